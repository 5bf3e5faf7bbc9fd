"""DeepSeek V4 parity cases about request options: stop strings, `n`, the completion API,
and the requests we refuse."""

from __future__ import annotations

from dataclasses import replace

from tests.peer.cases.cases_builder import (
    CALLS,
    END_THINK,
    EOS,
    NO_THINK,
    REASONINGS,
    TEXTS,
    TOOLS,
    Builder,
    chat_request,
    completion_request,
    dsml,
)
from tests.peer.drive import Case, Gen


def add_stops(b: Builder) -> None:
    text = "Hello there! General Kenobi. You are a bold one."
    full = b.ids(text)
    # Where "Kenobi" completes: the engine stops at that token, stop_reason = the string.
    upto = next(k for k in range(1, len(full) + 1) if "Kenobi" in b.tok.decode(full[:k]))
    for server, extra in (("off", {}), ("on", NO_THINK)):
        for incl in (False, True):
            req = chat_request(stop=["Kenobi", "never"], include_stop_str_in_output=incl, **extra)
            g = Gen(full[:upto], "stop", "Kenobi")
            b.both(Case(f"stop-string-{server}-incl-{incl}", server, "chat", False, req, [[g]]), 1)
        # An older host reports no stop_reason: the stop list is searched.
        req = chat_request(stop="bold", **extra)
        b.add(Case(f"stop-unreported-{server}", server, "chat", False, req, [[Gen([*full, EOS])]]))
        # stop_token_ids: a client stop token (streaming is accepted here).
        stop_tok = full[3]
        req = chat_request(stop_token_ids=[stop_tok], **extra)
        g = Gen(full[:4], "stop", stop_tok)
        b.both(Case(f"stop-token-{server}", server, "chat", False, req, [[g]]), "random")
        g = Gen(full[:4], "stop", None)
        b.both(Case(f"stop-token-unreported-{server}", server, "chat", False, req, [[g]]), 1)
        req = chat_request(stop_token_ids=[stop_tok], include_stop_str_in_output=True, **extra)
        b.both(
            Case(
                f"stop-token-kept-{server}",
                server,
                "chat",
                False,
                req,
                [[Gen(full[:4], "stop", stop_tok)]],
            ),
            2,
        )
    # Streaming with stop strings (vLLM refuses them).
    for server, extra in (("off", {}), ("on", NO_THINK)):
        req = chat_request(stop=["Kenobi"], **extra)
        g = Gen(full[:upto], "stop", "Kenobi", cuts=b.cuts(upto, "random"))
        b.add(Case(f"stop-string-streaming-{server}", server, "chat", True, req, [[g]]))
    creq = completion_request(stop=["Kenobi"])
    b.both(
        Case(
            "stop-completion",
            "off",
            "completion",
            False,
            creq,
            [[Gen(full[:upto], "stop", "Kenobi")]],
        ),
        1,
    )
    creq = completion_request(stop=["bold"])
    b.add(
        Case(
            "stop-completion-unreported", "off", "completion", False, creq, [[Gen(full, "length")]]
        )
    )
    b.add(
        Case(
            "stop-chat-after-length",
            "off",
            "chat",
            False,
            chat_request(stop=["bold"]),
            [[Gen(full, "length")]],
        )
    )
    # Stop string with logprobs (whole).
    req = chat_request(stop=["Kenobi"], logprobs=True, top_logprobs=1)
    g = Gen(full[:upto], "stop", "Kenobi", logprobs=b.logprobs(full[:upto], 1))
    b.add(Case("stop-string-logprobs", "off", "chat", False, req, [[g]]))


def add_n(b: Builder) -> None:
    texts = [TEXTS[0], TEXTS[2], TEXTS[4]]
    for server, extra in (("off", {}), ("on", NO_THINK)):
        gens = [
            Gen(b.ids(t) + ([EOS] if k != 1 else []), "stop" if k != 1 else "length", index=k)
            for k, t in enumerate(texts)
        ]
        req = chat_request(n=3, **extra)
        b.add(Case(f"n3-{server}/whole", server, "chat", False, req, [gens]))
        streamed = [replace(g, cuts=b.cuts(len(g.token_ids), "random")) for g in gens]
        order = [g.index for g in streamed for _ in g.cuts or []]
        b.rng.shuffle(order)
        # each choice's chunks in order, choices interleaved at random
        b.add(
            Case(
                f"n3-{server}/stream-interleaved",
                server,
                "chat",
                True,
                req,
                [streamed],
                order=order,
            )
        )
        req = chat_request(n=3, stream_options={"include_usage": True}, **extra)
        b.add(
            Case(
                f"n3-usage-{server}/stream-interleaved",
                server,
                "chat",
                True,
                req,
                [streamed],
                engine_usage="final",
                order=order,
            )
        )
    # n > 1 with logprobs.
    gens = [
        Gen([*b.ids(t), EOS], index=k, logprobs=None) for k, t in enumerate([TEXTS[4], TEXTS[3]])
    ]
    for g in gens:
        g.logprobs = b.logprobs(g.token_ids, 2)
    req = chat_request(n=2, logprobs=True, top_logprobs=2)
    b.add(Case("n2-logprobs/whole", "off", "chat", False, req, [gens]))
    streamed = [replace(g, cuts=b.cuts(len(g.token_ids), "random")) for g in gens]
    order = [g.index for g in streamed for _ in g.cuts or []]
    b.rng.shuffle(order)
    b.add(Case("n2-logprobs/stream-interleaved", "off", "chat", True, req, [streamed], order=order))
    # n > 1 with reasoning and tool calls (thinking prompt, tools auto).
    gens = [
        Gen([*b.ids(REASONINGS[0]), END_THINK, *b.ids(TEXTS[0]), EOS], index=0),
        Gen([*b.ids(REASONINGS[1]), END_THINK, *b.ids(dsml(CALLS[:1])), EOS], index=1),
    ]
    req = chat_request(n=2, tools=TOOLS)
    b.add(Case("n2-reasoning-tools/whole", "on", "chat", False, req, [gens]))
    streamed = [replace(g, cuts=b.cuts(len(g.token_ids), "random")) for g in gens]
    order = [g.index for g in streamed for _ in g.cuts or []]
    b.rng.shuffle(order)
    b.add(
        Case(
            "n2-reasoning-tools/stream-interleaved",
            "on",
            "chat",
            True,
            req,
            [streamed],
            order=order,
        )
    )


def add_completion(b: Builder) -> None:
    prompts = ["Once upon a time", "日本語で", "def main():"]
    outs = [
        b.ids(" there was a tokenizer. 日本語"),
        b.ids("話しましょう 😀"),
        b.ids("\n    pass\n"),
    ]
    creq = completion_request(prompt=prompts)
    gens = [[Gen(o, "length")] for o in outs]
    b.add(Case("completion-prompts3/whole", "off", "completion", False, creq, gens))
    creq = completion_request(prompt=prompts, logprobs=1)
    gens = [[Gen(o, "length", logprobs=b.logprobs(o, 2))] for o in outs]
    b.add(Case("completion-prompts3-logprobs/whole", "off", "completion", False, creq, gens))
    # n = 2 per prompt on two prompts.
    creq = completion_request(prompt=prompts[:2], n=2)
    gens = [[Gen(o, "length", index=0), Gen([*o[:3], EOS], "stop", index=1)] for o in outs[:2]]
    b.add(Case("completion-prompts2-n2/whole", "off", "completion", False, creq, gens))
    for i, o in enumerate(outs):
        creq = completion_request(prompt=prompts[i])
        b.both(
            Case(f"completion-{i}", "off", "completion", False, creq, [[Gen([*o, EOS])]]),
            1 if i else "random",
        )
    # echo
    for stream in (False, True):
        creq = completion_request(echo=True)
        g = Gen(outs[0], "length", cuts=b.cuts(len(outs[0]), 3))
        b.add(
            Case(
                f"completion-echo-{'stream' if stream else 'whole'}",
                "off",
                "completion",
                stream,
                creq,
                [[g]],
            )
        )
    # Streaming n = 2, interleaved.
    creq = completion_request(n=2)
    gens = [
        Gen(outs[0], "length", index=0, cuts=b.cuts(len(outs[0]), "random")),
        Gen(outs[1] + [EOS], index=1, cuts=b.cuts(len(outs[1]) + 1, 1)),
    ]
    order = [g.index for g in gens for _ in g.cuts or []]
    b.rng.shuffle(order)
    b.add(
        Case(
            "completion-n2/stream-interleaved", "off", "completion", True, creq, [gens], order=order
        )
    )
    # Completion on the parser server: parsers do not apply.
    o = b.ids("</think> <｜DSML｜tool_calls> text")
    b.both(
        Case(
            "completion-on-server",
            "on",
            "completion",
            False,
            completion_request(),
            [[Gen([*o, EOS])]],
        ),
        1,
    )


def add_errors(b: Builder) -> None:
    ids = [*b.ids(TEXTS[0]), EOS]
    req = chat_request()
    bad = Case("error-unknown-model", "off", "chat", False, dict(req, model="nope"), [[Gen(ids)]])
    bad.extra["model"] = "nope"
    b.both(bad, 2)
    # top_logprobs over max_logprobs (20) in the engine's entries.
    lp = b.logprobs(ids[:2], 0)
    for e in lp:
        e["top_logprobs"] = [
            {"token_id": 3 + k, "logprob": -1.0 - k, "rank": k + 1} for k in range(21)
        ]
    b.both(
        Case(
            "error-top-logprobs-bound",
            "off",
            "chat",
            False,
            chat_request(logprobs=True),
            [[Gen(ids[:2], logprobs=lp)]],
        ),
        1,
    )
    # An out-of-vocabulary id.
    b.both(Case("error-out-of-vocab", "off", "chat", False, req, [[Gen([19923, 999_999, EOS])]]), 1)
    # Whole response with no token ids.
    b.add(Case("error-empty-token-ids/whole", "off", "chat", False, req, [[Gen([], "stop")]]))
    b.add(
        Case(
            "error-completion-empty-token-ids/whole",
            "off",
            "completion",
            False,
            completion_request(),
            [[Gen([], "stop")]],
        )
    )
