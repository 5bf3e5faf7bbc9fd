"""The random cases of test_parity.py's hypothesis tests: the tokenizers they run on, the
settings and pinned seeds, the shared builders, and the strategies of DeepSeek V4, Llama 3.2
and the three families (gpt-oss's and MiniMax M3's are in hypothesis_gptoss_m3.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from tests.peer.cases import cases as C
from tests.peer.cases.families import cases_families as F
from tests.peer.cases.llama import cases_llama as L
from tests.peer.cases.minimax_m3 import cases_minimax_m3 as M
from tests.peer.drive import Case, Gen
from tests.support.vocab.offline_tokenizers import offline_tokenizer
from tests.support.vocab.tiktoken_convert import gpt_oss_tokenizer
from worker.adapters.tokenizers import load_tokenizer
from worker.config import load_registry

TOKENIZER = load_registry().models["deepseek-v4"].tokenizer
LLAMA = load_tokenizer(L.LLAMA_TOKENIZER, Path.cwd())[0]
FAMILY_TOKENIZERS = {fam.prefix: offline_tokenizer(fam.data) for fam in F.FAMILIES}
GPTOSS = gpt_oss_tokenizer()
M3 = offline_tokenizer(M.M3.data)


# --------------------------------------------------------------------------- hypothesis

# Each example is one case, counted like the generated ones; failures are collected
# and reported together after the run (no shrinking: every example costs vLLM calls).
EXAMPLES = 60
SETTINGS = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# derandomize draws a test's examples from a digest of its source (hypothesis'
# function_digest), so the one body all drivers now share would draw new ones. Each driver
# is pinned to the digest of the body it had before, so the same examples run: the four
# that already shared `_run_examples`, the families, gpt-oss, MiniMax M3.
SEED_SHARED = int(
    "ebcf5fdbe86f94670cf94853a32c826d1a6df03a6a14e2a9a98cd8495359ee81cb47de52f5d0a3f90f972574cc8209c7",
    16,
)
SEED_FAMILIES = int(
    "496b4896c69cddf04b148ccd2f1e7fad090e842dfe6ecabef60d2bd4badf081002701066b0c7331af9c42d9183713c1e",
    16,
)
SEED_GPTOSS = int(
    "2c4f6c65a6c0980018c23e0d2505c5edecc913bbbe2aa8524514cf319c7eafb2f8b70adb285a05f00099bb63cf02be27",
    16,
)
SEED_M3 = int(
    "521bc14b95defeee793b8f317be22c13dc2f5d8b42eb9de88bf7e1b35ab6f72e245f9308372ab09dcd22fe688312afe6",
    16,
)

CHARS = list("abcxyz ABC .,!?-:'\"()[]{}<>/\\_\n\t0123") + list(
    "éüñ日本語中文한국어😀🦜🧬🎉👍🏽\u0301\u200d—…"
)
text = st.text(alphabet=st.sampled_from(CHARS), min_size=1, max_size=40)
arg_value = st.one_of(
    text,
    st.integers(-1000, 10**6),
    st.booleans(),
    st.lists(st.integers(0, 9), max_size=3),
)
tool_call = st.tuples(
    st.sampled_from(["get_weather", "search"]),
    st.dictionaries(st.sampled_from(["location", "days", "query", "limit"]), arg_value, max_size=3),
)


def _cuts(draw: Any, n: int) -> list[int]:
    if n == 0:
        return [0]
    style = draw(st.sampled_from(["one", "fixed", "random"]))
    if style == "one":
        return [1] * n
    if style == "fixed":
        k = draw(st.integers(2, 12))
        return [k] * (n // k) + ([n % k] if n % k else [])
    out, left = [], n
    while left:
        k = draw(st.integers(1, min(left, 50)))
        out.append(k)
        left -= k
    return out


def _choices_case(
    draw: Any,
    b: C.Builder,
    name: str,
    server: str,
    chat_request: Any,
    gens: list[Gen],
    extra: dict[str, Any],
) -> Case:
    """A chat case of one choice or several (`n`): streamed, each choice in random chunks
    (several interleaved in a random order) and now and then the usage, or whole."""
    n = len(gens)
    if n > 1:
        extra["n"] = n
    stream = draw(st.booleans())
    if stream and draw(st.booleans()):
        extra["stream_options"] = {"include_usage": True}
    order = None
    if stream:
        gens = [replace(g, cuts=_cuts(draw, len(g.token_ids))) for g in gens]
        if n > 1:
            order = [g.index for g in gens for _ in g.cuts or []]
            b.rng.shuffle(order)
    case = Case(name, server, "chat", stream, chat_request(**extra), [gens])
    case.engine_usage = "final" if "stream_options" in extra else "none"
    case.order = order
    case.extra["shape"] = "random"
    return case


@st.composite
def conversations(draw: Any) -> Case:
    """Parsers on: optional reasoning, content, 0–2 DSML calls under any tool_choice
    (strict tool calling), EOS or length; streamed in random chunks or whole."""
    b = C.Builder(TOKENIZER)
    think = draw(st.booleans())
    reasoning = draw(text) if think else ""
    content = draw(st.one_of(st.just(""), text))
    calls = draw(st.lists(tool_call, max_size=2))
    ids: list[int] = []
    if think:
        ids += b.ids(reasoning) + ([C.END_THINK] if content or calls or draw(st.booleans()) else [])
    if content:
        ids += b.ids(content)
    if calls:
        ids += b.ids(("\n\n" if content else "") + C.dsml(calls))
    if not ids:
        ids = b.ids("ok")
    finish = draw(st.sampled_from(["stop", "length"]))
    if finish == "stop":
        ids.append(C.EOS)
    extra: dict[str, Any] = {} if think else dict(C.NO_THINK)
    if calls or draw(st.booleans()):
        extra["tools"] = C.TOOLS
        # Strict tool calling (server "on"): every mode reads the model's own format.
        choice = draw(st.sampled_from([None, "auto", "none", "required", "named"]))
        if choice == "named":
            extra["tool_choice"] = {"type": "function", "function": {"name": "get_weather"}}
        elif choice is not None:
            extra["tool_choice"] = choice
    stream = draw(st.booleans())
    if stream and draw(st.booleans()):
        extra["stream_options"] = {"include_usage": True}
    req = C.chat_request(**extra)
    g = Gen(ids, finish, cuts=_cuts(draw, len(ids)) if stream else None)
    usage = "final" if "stream_options" in extra else "none"
    return Case("hypothesis-conversation", "on", "chat", stream, req, [[g]], engine_usage=usage)


@st.composite
def plain_outputs(draw: Any) -> Case:
    """No parsers: chat or completion text, special tokens, logprobs, random chunks."""
    b = C.Builder(TOKENIZER, seed=draw(st.integers(0, 2**16)))
    pieces = draw(
        st.lists(
            st.one_of(text, st.sampled_from([[C.BOS], [C.PAD], [C.THINK]])), min_size=1, max_size=4
        )
    )
    ids: list[int] = []
    for p in pieces:
        ids += p if isinstance(p, list) else b.ids(p)
    ids = ids[:150]
    finish = draw(st.sampled_from(["stop", "length"]))
    if finish == "stop":
        ids.append(C.EOS)
    api = draw(st.sampled_from(["chat", "completion"]))
    extra: dict[str, Any] = {"skip_special_tokens": draw(st.booleans())}
    top = draw(st.one_of(st.none(), st.integers(0, 4)))
    logprobs = None
    if top is not None:
        if api == "chat":
            extra.update(logprobs=True, top_logprobs=top)
            logprobs = b.logprobs(ids, top)
        else:
            extra["logprobs"] = top
            logprobs = b.logprobs(ids, top + 1)
    stream = draw(st.booleans())
    req = C.chat_request(**extra) if api == "chat" else C.completion_request(**extra)
    g = Gen(ids, finish, logprobs=logprobs, cuts=_cuts(draw, len(ids)) if stream else None)
    return Case("hypothesis-plain", "off", api, stream, req, [[g]])


@st.composite
def llama_conversations(draw: Any) -> Case:
    """The llama3_json tool parser: prose, 0–2 calls (after `<|python_tag|>` or bare, at
    the start or after the prose, `; `-separated), under any tool_choice on both strict
    settings (strict off, a forced choice's output is its constrained JSON); an EOS id or
    length; streamed in random chunks or whole."""
    b = C.Builder(LLAMA, alternatives=L.ALTERNATIVES)
    server = draw(st.sampled_from(L.TOOL_SERVERS))
    choice = draw(st.sampled_from([None, "auto", "none", "required", "named"]))
    tools = choice is not None or draw(st.booleans())
    items = draw(st.lists(tool_call, max_size=2))
    prose = draw(st.one_of(st.just(""), text))
    forced = choice in ("required", "named")
    if server == "llama-lax" and forced and items:
        # What guided decoding lets the model write without strict tool calling.
        if choice == "required":
            out = json.dumps([{"name": n, "parameters": a} for n, a in items], ensure_ascii=False)
            shape = "json-required"
        else:
            out, shape = json.dumps(items[0][1], ensure_ascii=False), "json-named"
    elif items:
        tag = draw(st.booleans())
        out, shape = L.calls(items, tag=tag), "python-tag" if tag else "bare"
        if prose and draw(st.booleans()):
            out = prose + draw(st.sampled_from(["\n", " ", "\n\n"])) + out
            shape = "prose-then-call"
    else:
        out, shape = prose, "prose"
    ids = b.ids(out) if out else b.ids("ok")
    finish = draw(st.sampled_from(["stop", "stop", "length"]))
    stop_reason: int | None = None
    if finish == "stop":
        eos = draw(st.sampled_from([L.EOT, L.EOM, L.END_OF_TEXT]))
        ids.append(eos)
        stop_reason = None if eos == L.END_OF_TEXT or draw(st.booleans()) else eos
    extra: dict[str, Any] = {}
    if tools:
        extra["tools"] = C.TOOLS
        if choice == "named":
            extra["tool_choice"] = {"type": "function", "function": {"name": "get_weather"}}
        elif choice is not None:
            extra["tool_choice"] = choice
    stream = draw(st.booleans())
    if stream and draw(st.booleans()):
        extra["stream_options"] = {"include_usage": True}
    req = L.chat_request(**extra)
    g = Gen(ids, finish, stop_reason, cuts=_cuts(draw, len(ids)) if stream else None)
    usage = "final" if "stream_options" in extra else "none"
    case = Case("hypothesis-llama", server, "chat", stream, req, [[g]], engine_usage=usage)
    case.extra["shape"] = shape
    return case


@st.composite
def llama_plain(draw: Any) -> Case:
    """Llama, no parser: chat or completion text with special tokens, logprobs, EOS ids,
    random chunks."""
    b = C.Builder(LLAMA, seed=draw(st.integers(0, 2**16)), alternatives=L.ALTERNATIVES)
    specials = [[L.BOS], [L.PYTHON_TAG], [L.EOT], [L.PAD], [L.RESERVED]]
    pieces = draw(st.lists(st.one_of(text, st.sampled_from(specials)), min_size=1, max_size=4))
    ids: list[int] = []
    for p in pieces:
        ids += p if isinstance(p, list) else b.ids(p)
    ids = ids[:150]
    finish = draw(st.sampled_from(["stop", "length"]))
    if finish == "stop":
        ids.append(draw(st.sampled_from([L.EOT, L.END_OF_TEXT])))
    api = draw(st.sampled_from(["chat", "completion"]))
    extra: dict[str, Any] = {"skip_special_tokens": draw(st.booleans())}
    top = draw(st.one_of(st.none(), st.integers(0, 4)))
    logprobs = None
    if top is not None:
        if api == "chat":
            extra.update(logprobs=True, top_logprobs=top)
            logprobs = b.logprobs(ids, top)
        else:
            extra["logprobs"] = top
            logprobs = b.logprobs(ids, top + 1)
    stream = draw(st.booleans())
    req = L.chat_request(**extra) if api == "chat" else L.completion_request(**extra)
    g = Gen(ids, finish, logprobs=logprobs, cuts=_cuts(draw, len(ids)) if stream else None)
    return Case("hypothesis-llama-plain", "llama-off", api, stream, req, [[g]])


@st.composite
def family_conversations(draw: Any, fam: F.Family) -> Case:
    """GLM-4.7, MiniMax M2 or Qwen3 on one of its servers: optional reasoning (thinking off
    through the template kwargs where the family has the switch), content, 0–2 calls in
    the server's own format (the model writes it under every tool_choice: strict tool
    calling, and GLM's parser never constrains to JSON), under any tool_choice; one of
    the EOS ids or length; streamed in random chunks or whole."""
    tok = FAMILY_TOKENIZERS[fam.prefix]
    b = C.Builder(tok, alternatives=fam.alternatives)
    server = draw(st.sampled_from(fam.servers))
    think = fam.no_think is None or draw(st.booleans())
    reasoning = draw(text) if think else ""
    content = draw(st.one_of(st.just(""), text))
    items = draw(st.lists(tool_call, max_size=2))
    answer = content + (draw(st.sampled_from(["", "\n", "\n\n"])) if content and items else "")
    answer += server.calls(items) if items else ""
    out = fam.think(reasoning, answer) if think else answer
    ids = b.ids(out) if out else b.ids("ok")
    finish = draw(st.sampled_from(["stop", "stop", "length"]))
    stop_reason: int | None = None
    if finish == "stop":
        k = draw(st.integers(0, len(fam.eos) - 1))
        ids.append(fam.eos[k])
        stop_reason = None if k == 0 or draw(st.booleans()) else fam.eos[k]
    extra: dict[str, Any] = {} if think else dict(fam.no_think or {})
    choice = draw(st.sampled_from([None, "auto", "none", "required", "named"]))
    if items or choice is not None or draw(st.booleans()):
        extra["tools"] = C.TOOLS
        if choice == "named":
            extra["tool_choice"] = {"type": "function", "function": {"name": "get_weather"}}
        elif choice is not None:
            extra["tool_choice"] = choice
    stream = draw(st.booleans())
    if stream and draw(st.booleans()):
        extra["stream_options"] = {"include_usage": True}
    req = fam.chat_request(**extra)
    g = Gen(ids, finish, stop_reason, cuts=_cuts(draw, len(ids)) if stream else None)
    usage = "final" if "stream_options" in extra else "none"
    case = Case(f"hypothesis-{fam.prefix}", server.name, "chat", stream, req, [[g]])
    case.engine_usage = usage
    case.extra["shape"] = "native" if items else "prose"
    return F.mark_specials(case, tok)


# Per family: fewer examples (three families, each a tenth of a second an example).
FAMILY_SETTINGS = settings(SETTINGS, max_examples=40)
