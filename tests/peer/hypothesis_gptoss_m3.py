"""The random cases of test_parity.py for gpt-oss (Harmony conversations on both servers) and
MiniMax M3 (random outputs under every thinking mode), on hypothesis_cases.py's settings and
builders."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st

from tests.peer.cases import cases as C
from tests.peer.cases.families import cases_families as F
from tests.peer.cases.gptoss import cases_gptoss as G
from tests.peer.cases.minimax_m3 import cases_minimax_m3 as M
from tests.peer.drive import Case, Gen
from tests.peer.hypothesis_cases import GPTOSS, M3, SETTINGS, _choices_case, text, tool_call

# gpt-oss: random Harmony conversations on both servers.
GPTOSS_CALLEES = ["functions.get_weather", "functions.search", "get_weather", "math.sum"]
GPTOSS_BUILTINS = ["browser.search", "python", "container.exec", "assistant"]
GPTOSS_CTYPES = ["", " <|constrain|>json", " json", " <|constrain|>code", "<|constrain|>json"]
gptoss_word = st.text(alphabet=st.sampled_from(list("abcxyzKLM")), min_size=3, max_size=6)


@st.composite
def gptoss_message(draw: Any) -> tuple[str, str]:
    """One Harmony message (after its `<|start|>assistant`): reasoning, an answer, a
    preamble, a call to a function, or a message to a built-in tool or the assistant; the
    recipient before or after the channel; a content type or none; any end marker."""
    kind = draw(st.sampled_from(["analysis", "final", "preamble", "call", "call", "builtin"]))
    to: str | None = None
    body = draw(text)
    if kind == "call":
        channel, to = "commentary", draw(st.sampled_from(GPTOSS_CALLEES))
        _, args = draw(tool_call)
        body = draw(
            st.sampled_from(
                [G.args_text(args), G.args_text(args, compact=False), body, "", "{'a': 1}"]
            )
        )
    elif kind == "builtin":
        channel = draw(st.sampled_from(["commentary", "analysis"]))
        to = draw(st.sampled_from(GPTOSS_BUILTINS))
    else:
        channel = {"analysis": "analysis", "final": "final", "preamble": "commentary"}[kind]
    ctype = draw(st.sampled_from(GPTOSS_CTYPES)) if to or draw(st.booleans()) else ""
    ends = ["<|end|>", "<|end|>", "<|return|>", "<|call|>" if to else "<|end|>"]
    end = draw(st.sampled_from(ends))
    to_first = to is not None and draw(st.booleans())
    return G.msg(channel, body, to=to, ctype=ctype, end=end, to_first=to_first), body


@st.composite
def gptoss_output(draw: Any, b: C.Builder) -> tuple[Gen, list[str]]:
    """1–4 messages (now and then text before the first header), ended on an EOS id
    (reported or not), on `<|end|>` with or without EOS, or cut anywhere (length); and
    the messages' bodies."""
    messages = draw(st.lists(gptoss_message(), min_size=1, max_size=4))
    bodies = [body for _, body in messages]
    out = G.harmony(*(m for m, _ in messages))
    if draw(st.integers(0, 9)) == 0:
        out = draw(st.sampled_from(["Hi", "ok ", "\n"])) + out
    ids = b.ids(out)
    how = draw(st.sampled_from(["as-is", "as-is", "eos", "cut"]))
    if how == "cut":
        return Gen(ids[: draw(st.integers(1, len(ids)))], "length"), bodies
    if how == "eos" or ids[-1] not in G.REPORTED:
        if ids[-1] in G.REPORTED:
            ids = ids[:-1]
        ids.append(draw(st.sampled_from([*G.GPTOSS_EOS, G.END])))
    stop_reason = G.REPORTED.get(ids[-1])
    if stop_reason is not None and draw(st.booleans()):
        stop_reason = None  # an older host: not reported
    return Gen(ids, "stop", stop_reason), bodies


@st.composite
def gptoss_conversations(draw: Any) -> Case:
    """gpt-oss on `gptoss-on` or `gptoss-reasoning`: random Harmony output (one choice, or
    two), under any tool_choice, include_reasoning, logprobs, parallel_tool_calls, a stop
    string cut where it appears; streamed in random chunks (interleaved for two) or whole."""
    b = C.Builder(GPTOSS, seed=draw(st.integers(0, 2**16)), alternatives=G.ALTERNATIVES)
    server = draw(st.sampled_from(G.SERVERS))
    n = draw(st.sampled_from([1, 1, 1, 1, 2]))
    outputs = [draw(gptoss_output(b)) for _ in range(n)]
    gens = [replace(g, index=i) for i, (g, _) in enumerate(outputs)]
    extra: dict[str, Any] = {}
    choice = draw(st.sampled_from([None, "auto", "none", "required", "named"]))
    if choice is not None or draw(st.booleans()):
        extra["tools"] = C.TOOLS
        if choice == "named":
            extra["tool_choice"] = G.NAMED
        elif choice is not None:
            extra["tool_choice"] = choice
    if draw(st.integers(0, 4)) == 0:
        extra["include_reasoning"] = False
    if draw(st.integers(0, 4)) == 0:
        extra["parallel_tool_calls"] = False
    if n == 1 and draw(st.integers(0, 7)) == 0:
        # A stop string: a piece of a message's body; the engine stopped at the token
        # where it first appears in the output's text (special tokens skipped).
        g = gens[0]
        seen = GPTOSS.decode(g.token_ids)
        pieces = [p for body in outputs[0][1] for p in re.findall(r"\S{2,4}", body)]
        pieces = [p for p in pieces if p in seen]
        if pieces:
            word = draw(st.sampled_from(pieces))
            ids = g.token_ids
            upto = next(k for k in range(1, len(ids) + 1) if word in b.tok.decode(ids[:k]))
            gens[0] = Gen(ids[:upto], "stop", word)
            extra["stop"] = [word]
    top = draw(st.one_of(st.none(), st.integers(0, 3)))
    if top is not None:
        extra.update(logprobs=True, top_logprobs=top)
        gens = [replace(g, logprobs=b.logprobs(g.token_ids, top)) for g in gens]
    case = _choices_case(draw, b, "hypothesis-gptoss", server, G.chat_request, gens, extra)
    return F.mark_specials(case, GPTOSS)


# gpt-oss: more examples (its outputs vary more: messages, headers, ends, requests).
GPTOSS_SETTINGS = settings(SETTINGS, max_examples=80)


# MiniMax M3: random outputs under every thinking mode (60 examples: one server, and the
# thinking modes and call layouts multiply).
M3_CHOICES = [None, "auto", "none", "required", "named"]


@st.composite
def m3_output(draw: Any, mode: str) -> str:
    """One M3 output: reasoning (the block the prompt opened when thinking is enabled, now
    and then a block the model writes), content, 0–2 calls in one block (or two blocks),
    parameters as elements or JSON text, now and then text after the block."""
    out = ""
    if mode == "enabled":
        if draw(st.integers(0, 5)):
            out = draw(text) + M.END_THINK
    elif draw(st.booleans()):
        out = M.THINK + draw(text) + M.END_THINK
    content = draw(st.one_of(st.just(""), text))
    out += content
    items = draw(st.lists(tool_call, max_size=2))
    if items:
        json_text = draw(st.booleans())
        if len(items) == 2 and draw(st.booleans()):
            calls = M.m3_calls(items[:1], json_text) + M.m3_calls(items[1:], json_text)
        else:
            calls = M.m3_calls(items, json_text)
        out += draw(st.sampled_from(["", "\n", "\n\n"])) if content else ""
        out += calls
        if draw(st.integers(0, 5)) == 0:
            out += draw(text)
    return out or "ok"


@st.composite
def m3_conversations(draw: Any) -> Case:
    """MiniMax M3 on `minimax_m3-on`: random outputs (one choice, or two) under each
    thinking mode, any tool_choice, include_reasoning, logprobs; EOS or cut anywhere
    (length); streamed in random chunks (interleaved for two) or whole."""
    b = C.Builder(M3, seed=draw(st.integers(0, 2**16)), alternatives=M.M3.alternatives)
    mode = draw(st.sampled_from(list(M.MODES)))
    n = draw(st.sampled_from([1, 1, 1, 1, 2]))
    gens = []
    for i in range(n):
        ids = b.ids(draw(m3_output(mode)))
        if draw(st.integers(0, 3)) == 0:
            gens.append(Gen(ids[: draw(st.integers(1, len(ids)))], "length", index=i))
        else:
            gens.append(Gen([*ids, M.EOS], index=i))
    extra: dict[str, Any] = dict(M.MODES[mode])
    choice = draw(st.sampled_from(M3_CHOICES))
    if choice is not None or draw(st.integers(0, 3)):
        extra["tools"] = C.TOOLS
        if choice == "named":
            extra["tool_choice"] = {"type": "function", "function": {"name": "get_weather"}}
        elif choice is not None:
            extra["tool_choice"] = choice
    if draw(st.integers(0, 4)) == 0:
        extra["include_reasoning"] = False
    top = draw(st.one_of(st.none(), st.none(), st.integers(0, 2)))
    if top is not None:
        extra.update(logprobs=True, top_logprobs=top)
        gens = [replace(g, logprobs=b.logprobs(g.token_ids, top)) for g in gens]
    case = _choices_case(draw, b, "hypothesis-minimax_m3", M.SERVER, M.M3.chat_request, gens, extra)
    return M.mark_texts(case, M3)
