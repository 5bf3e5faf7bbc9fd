"""DeepSeek V4 parity cases about the text: plain outputs over the stress texts, special
tokens kept or skipped, usage, and logprobs."""

from __future__ import annotations

from tests.peer.cases.cases_builder import (
    BOS,
    END_THINK,
    EOS,
    NO_THINK,
    PAD,
    REASONINGS,
    TEXTS,
    THINK,
    Builder,
    chat_request,
    completion_request,
)
from tests.peer.drive import Case, Gen


def add_plain(b: Builder) -> None:
    for i, text in enumerate(TEXTS):
        ids = b.ids(text)
        for server, req in (("off", chat_request()), ("on", chat_request(**NO_THINK))):
            how: str | int = 1 if i % 2 == 0 else "random"
            b.both(
                Case(f"plain-{i}-{server}", server, "chat", False, req, [[Gen([*ids, EOS])]]), how
            )
        # finish "length": no EOS, the text just stops (maybe mid-character)
        cut = ids[: max(1, len(ids) - 1)]
        b.both(
            Case(f"plain-length-{i}", "off", "chat", False, chat_request(), [[Gen(cut, "length")]]),
            "random",
        )
    # The output ends inside a character: the rest never came (length), or EOS follows.
    partial = b.ids("Smile 😀")[:-1]
    for server, req in (("off", chat_request()), ("on", chat_request(**NO_THINK))):
        for finish, tail in (("length", []), ("stop", [EOS])):
            g = Gen(partial + tail, finish)
            b.both(Case(f"partial-char-{finish}-{server}", server, "chat", False, req, [[g]]), 1)
    g = Gen(partial, "length")
    b.both(
        Case("partial-char-completion", "off", "completion", False, completion_request(), [[g]]), 1
    )
    # A final chunk that carries only the finish reason.
    ids = b.ids(TEXTS[4])
    for server, req in (("off", chat_request()), ("on", chat_request(**NO_THINK))):
        b.add(
            Case(
                f"plain-finish-only-chunk-{server}",
                server,
                "chat",
                True,
                req,
                [[Gen([*ids, EOS], cuts=[3] * (len(ids) // 3) + [len(ids) % 3 + 1])]],
            )
        )
        g = Gen(ids, "length", cuts=[*b.cuts(len(ids), 2), 0])
        b.add(Case(f"plain-empty-last-chunk-{server}", server, "chat", True, req, [[g]]))


def add_specials(b: Builder) -> None:
    text = [*b.ids("Before"), BOS, *b.ids(" middle "), PAD, THINK, *b.ids(" after")]
    for skip in (True, False):
        req = chat_request(skip_special_tokens=skip)
        b.both(Case(f"special-skip-{skip}", "off", "chat", False, req, [[Gen([*text, EOS])]]), 1)
        creq = completion_request(skip_special_tokens=skip)
        b.both(
            Case(
                f"special-completion-skip-{skip}",
                "off",
                "completion",
                False,
                creq,
                [[Gen(text, "length")]],
            ),
            "random",
        )
        # With parsers the markers' specials stay in the text the parser reads.
        req = chat_request(skip_special_tokens=skip, **NO_THINK)
        b.both(Case(f"special-on-skip-{skip}", "on", "chat", False, req, [[Gen([*text, EOS])]]), 1)
    # EOS kept: include_stop_str_in_output keeps the stop token text.
    req = chat_request(skip_special_tokens=False, include_stop_str_in_output=True)
    b.both(Case("special-eos-kept", "off", "chat", False, req, [[Gen([*b.ids(TEXTS[0]), EOS])]]), 2)
    # spaces_between_special_tokens has no effect on tokenizer.json tokenizers.
    req = chat_request(skip_special_tokens=False, spaces_between_special_tokens=False)
    b.both(Case("special-no-spaces", "off", "chat", False, req, [[Gen([*text, EOS])]]), 3)


def add_usage(b: Builder) -> None:
    ids = [*b.ids(TEXTS[2]), EOS]
    variants = [
        ("final", {"include_usage": True}, "final"),
        ("continuous", {"include_usage": True, "continuous_usage_stats": True}, "continuous"),
        ("engine-silent", {"include_usage": True}, "none"),
        ("off", {"include_usage": False}, "none"),
    ]
    for server, extra in (("off", {}), ("on", NO_THINK)):
        for name, so, engine in variants:
            for how in (1, "random"):
                req = chat_request(stream_options=so, **extra)
                g = Gen(ids, cuts=b.cuts(len(ids), how))
                b.add(
                    Case(
                        f"usage-{name}-{server}-{how}",
                        server,
                        "chat",
                        True,
                        req,
                        [[g]],
                        engine_usage=engine,
                    )
                )
    # Completion streaming usage.
    cids = b.ids(" there was a tokenizer. 日本語")
    for name, so, engine in variants[:3]:
        req = completion_request(stream_options=so)
        g = Gen(cids, "length", cuts=b.cuts(len(cids), "random"))
        b.add(
            Case(
                f"usage-completion-{name}",
                "off",
                "completion",
                True,
                req,
                [[g]],
                engine_usage=engine,
            )
        )
    # Reasoning with usage (thinking prompt).
    rids = [*b.ids(REASONINGS[1]), END_THINK, *b.ids(TEXTS[0]), EOS]
    req = chat_request(stream_options={"include_usage": True, "continuous_usage_stats": True})
    g = Gen(rids, cuts=b.cuts(len(rids), "random"))
    b.add(
        Case(
            "usage-continuous-reasoning", "on", "chat", True, req, [[g]], engine_usage="continuous"
        )
    )


def add_logprobs(b: Builder) -> None:
    for i, text in enumerate([TEXTS[2], TEXTS[4], "Hello 😀 🦜", TEXTS[5]]):
        ids = [*b.ids(text), EOS]
        for top in (0, 2, 5):
            req = chat_request(logprobs=True, top_logprobs=top)
            g = Gen(ids, logprobs=b.logprobs(ids, top))
            b.both(Case(f"logprobs-chat-{i}-top{top}", "off", "chat", False, req, [[g]]), "random")
        req = chat_request(logprobs=True, top_logprobs=3, **NO_THINK)
        g = Gen(ids, logprobs=b.logprobs(ids, 3))
        b.both(Case(f"logprobs-chat-on-{i}", "on", "chat", False, req, [[g]]), 1)
        for k in (0, 3):
            cids = ids[:-1]
            creq = completion_request(logprobs=k)
            g = Gen(cids, "length", logprobs=b.logprobs(cids, k + 1))
            b.both(
                Case(f"logprobs-completion-{i}-k{k}", "off", "completion", False, creq, [[g]]),
                "random",
            )
    # Logprobs across reasoning and content (thinking prompt).
    rids = [*b.ids(REASONINGS[2]), END_THINK, *b.ids(TEXTS[3]), EOS]
    req = chat_request(logprobs=True, top_logprobs=2)
    g = Gen(rids, logprobs=b.logprobs(rids, 2))
    b.both(Case("logprobs-reasoning", "on", "chat", False, req, [[g]]), "random")
    # The recorded exchange: "Hello", an incomplete emoji, its completing byte, EOS, with
    # lone-byte candidates at every position.
    ids = [19923, 53769, 225, EOS]
    lp = [
        {
            "token_id": t,
            "logprob": -0.25,
            "rank": 1,
            "top_logprobs": [
                {"token_id": t, "logprob": -0.25, "rank": 1},
                {"token_id": 100, "logprob": -3.0, "rank": 2},
                {"token_id": 225, "logprob": -3.5, "rank": 3},
            ],
        }
        for t in ids
    ]
    req = chat_request(logprobs=True, top_logprobs=3)
    b.both(
        Case("logprobs-split-candidates", "off", "chat", False, req, [[Gen(ids, logprobs=lp)]]), 1
    )
    creq = completion_request(logprobs=2)
    g = Gen(ids, logprobs=lp)
    b.both(Case("logprobs-split-candidates-completion", "off", "completion", False, creq, [[g]]), 1)
    # Sampled tokens only (logprobs requested, no top list).
    ids = [*b.ids(TEXTS[4]), EOS]
    lp = [{"token_id": t, "logprob": -0.25} for t in ids]
    b.both(
        Case(
            "logprobs-no-top",
            "off",
            "chat",
            False,
            chat_request(logprobs=True),
            [[Gen(ids, logprobs=lp)]],
        ),
        2,
    )
