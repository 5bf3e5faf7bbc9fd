"""The generic groups of cases_families.py: plain text, EOS, special tokens, usage, stop
strings, `n`, reasoning, completions, refused requests, logprobs (MiniMax M3's cases run
most of them too)."""

from __future__ import annotations

from dataclasses import replace

from tests.peer.cases.cases import CALLS, REASONINGS, TEXTS, TOOLS, Builder
from tests.peer.cases.families.cases_families_models import Family, family_case
from tests.peer.drive import Case, Gen


def add_plain(b: Builder, fam: Family) -> None:
    eos = fam.eos[0]
    for server, extra in fam.plain:
        for i, text in enumerate(TEXTS):
            how: str | int = 1 if i % 2 == 0 else "random"
            g = Gen([*b.ids(text), eos])
            b.both(
                family_case(fam, f"plain-{i}-{server}", server, fam.chat_request(**extra), [g]), how
            )
        # finish "length": the text just stops (maybe inside a character)
        for i in (2, 4, 8):
            ids = b.ids(TEXTS[i])
            g = Gen(ids[: max(1, len(ids) - 1)], "length")
            req = fam.chat_request(**extra)
            b.both(family_case(fam, f"plain-length-{i}-{server}", server, req, [g]))
    # The output ends inside a character: the rest never came (length), or EOS follows.
    server, extra = fam.plain[0]
    partial = b.ids("Smile 😀")[:-1]
    for finish, tail in (("length", []), ("stop", [eos])):
        g = Gen(partial + tail, finish)
        req = fam.chat_request(**extra)
        b.both(family_case(fam, f"partial-char-{finish}", server, req, [g]), 1)
    # A last chunk carrying only the finish reason.
    ids = b.ids(TEXTS[4])
    g = Gen(ids, "length", cuts=[*b.cuts(len(ids), 2), 0])
    case = family_case(fam, "empty-last-chunk", server, fam.chat_request(**extra), [g])
    b.add(replace(case, stream=True))


def add_eos(b: Builder, fam: Family) -> None:
    """Each EOS id ending the output, reported as the engine would (stop_reason null for
    the primary, the id for the others) or not reported (an older host), and kept."""
    server, extra = fam.plain[0]
    ids = b.ids(TEXTS[0])
    for k, eos in enumerate(fam.eos):
        reported = None if k == 0 else eos
        for label, stop_reason in (("reported", reported), ("unreported", None)):
            if label == "unreported" and reported is None:
                continue
            g = Gen([*ids, eos], "stop", stop_reason)
            req = fam.chat_request(**extra)
            b.both(family_case(fam, f"eos-{eos}-{label}", server, req, [g]))
        req = fam.chat_request(include_stop_str_in_output=True, skip_special_tokens=False, **extra)
        g = Gen([*ids, eos], "stop", reported)
        b.both(family_case(fam, f"eos-{eos}-kept", server, req, [g]), 2)
    # An EOS id that is not the last token (the engine did not stop on it).
    g = Gen([*ids[:3], fam.eos[-1], *ids[3:], fam.eos[0]], "stop")
    b.both(family_case(fam, "eos-inside", server, fam.chat_request(**extra), [g]), 1)
    # Completion.
    for k, eos in enumerate(fam.eos):
        g = Gen([*ids, eos], "stop", None if k == 0 else eos)
        creq = fam.completion_request()
        b.both(family_case(fam, f"eos-completion-{eos}", server, creq, [g], api="completion"))


def add_specials(b: Builder, fam: Family) -> None:
    server, extra = fam.plain[0]
    ids = b.ids("Before")
    for k, t in enumerate(fam.specials + fam.added):
        ids += [t, *b.ids(f" w{k} ")]
    ids += b.ids("after")
    for skip in (True, False):
        req = fam.chat_request(skip_special_tokens=skip, **extra)
        b.both(family_case(fam, f"special-skip-{skip}", server, req, [Gen([*ids, fam.eos[0]])]), 1)
        creq = fam.completion_request(skip_special_tokens=skip)
        g = Gen(ids, "length")
        b.both(
            family_case(fam, f"special-completion-skip-{skip}", server, creq, [g], api="completion")
        )
    req = fam.chat_request(skip_special_tokens=False, spaces_between_special_tokens=False, **extra)
    b.both(family_case(fam, "special-no-spaces", server, req, [Gen([*ids, fam.eos[0]])]), 3)


def add_usage(b: Builder, fam: Family) -> None:
    server, extra = fam.plain[0]
    ids = [*b.ids(TEXTS[2]), fam.eos[0]]
    variants = [
        ("final", {"include_usage": True}, "final"),
        ("continuous", {"include_usage": True, "continuous_usage_stats": True}, "continuous"),
        ("engine-silent", {"include_usage": True}, "none"),
        ("off", {"include_usage": False}, "none"),
    ]
    for name, so, engine in variants:
        req = fam.chat_request(stream_options=so, **extra)
        g = Gen(ids, cuts=b.cuts(len(ids), "random"))
        case = family_case(fam, f"usage-{name}", server, req, [g])
        b.add(replace(case, stream=True, engine_usage=engine))
    # Usage while reasoning and a tool call stream (thinking prompt).
    for s in fam.servers[:1]:
        text = fam.think(REASONINGS[1], s.calls(CALLS[:1]))
        tids = [*b.ids(text), fam.eos[0]]
        so = {"include_usage": True, "continuous_usage_stats": True}
        req = fam.chat_request(tools=TOOLS, stream_options=so)
        g = Gen(tids, cuts=b.cuts(len(tids), "random"))
        case = family_case(fam, f"usage-continuous-tool-call-{s.name}", s.name, req, [g], "native")
        b.add(replace(case, stream=True, engine_usage="continuous"))


def add_stops(b: Builder, fam: Family) -> None:
    server, extra = fam.plain[0]
    full = b.ids("Hello there! General Kenobi. You are a bold one.")
    upto = next(k for k in range(1, len(full) + 1) if "Kenobi" in b.tok.decode(full[:k]))
    for incl in (False, True):
        req = fam.chat_request(stop=["Kenobi", "never"], include_stop_str_in_output=incl, **extra)
        g = Gen(full[:upto], "stop", "Kenobi")
        b.both(family_case(fam, f"stop-string-incl-{incl}", server, req, [g]), 1)
    req = fam.chat_request(stop="bold", **extra)
    b.add(family_case(fam, "stop-unreported", server, req, [Gen([*full, fam.eos[0]])]))
    stop_tok = full[3]
    req = fam.chat_request(stop_token_ids=[stop_tok], **extra)
    b.both(family_case(fam, "stop-token", server, req, [Gen(full[:4], "stop", stop_tok)]), "random")
    b.both(family_case(fam, "stop-token-unreported", server, req, [Gen(full[:4], "stop", None)]), 1)
    # Streaming with a stop string (vLLM refuses it).
    req = fam.chat_request(stop=["Kenobi"], **extra)
    g = Gen(full[:upto], "stop", "Kenobi", cuts=b.cuts(upto, "random"))
    b.add(replace(family_case(fam, "stop-string-streaming", server, req, [g]), stream=True))
    # A stop string in the reasoning and in the answer (thinking prompt, parser server).
    s = fam.servers[0]
    rids = b.ids(fam.think("Think of Kenobi now.", "Then answer Kenobi."))
    for word, cut_in in (("Kenobi", "reasoning"), ("answer", "content")):
        upto = next(k for k in range(1, len(rids) + 1) if word in b.tok.decode(rids[:k]))
        req = fam.chat_request(stop=[word])
        g = Gen(rids[:upto], "stop", word)
        b.both(family_case(fam, f"stop-string-in-{cut_in}-{s.name}", s.name, req, [g]), 1)


def add_n(b: Builder, fam: Family) -> None:
    """n = 2: a tool call in one choice and prose in the other, thinking on."""
    for s in fam.servers:
        gens = [
            Gen([*b.ids(fam.think(REASONINGS[0], TEXTS[0])), fam.eos[0]], index=0),
            Gen([*b.ids(fam.think(REASONINGS[1], s.calls(CALLS[:2]))), fam.eos[0]], index=1),
        ]
        req = fam.chat_request(n=2, tools=TOOLS)
        b.add(family_case(fam, f"n2-tools-{s.name}/whole", s.name, req, gens, "native"))
        streamed = [replace(g, cuts=b.cuts(len(g.token_ids), "random")) for g in gens]
        order = [g.index for g in streamed for _ in g.cuts or []]
        b.rng.shuffle(order)
        req = fam.chat_request(n=2, tools=TOOLS, stream_options={"include_usage": True})
        case = family_case(
            fam, f"n2-tools-{s.name}/stream-interleaved", s.name, req, streamed, "native"
        )
        b.add(replace(case, stream=True, order=order, engine_usage="final"))


def add_reasoning(b: Builder, fam: Family) -> None:
    eos = fam.eos[0]
    for s in fam.servers:
        for i, r in enumerate(REASONINGS):
            content = TEXTS[(i * 3) % len(TEXTS)]
            ids = [*b.ids(fam.think(r, content)), eos]
            how: str | int = 1 if i % 2 else "random"
            req = fam.chat_request()
            b.both(
                family_case(fam, f"reasoning-content-{i}-{s.name}", s.name, req, [Gen(ids)]), how
            )
            # include_reasoning false
            req = fam.chat_request(include_reasoning=False)
            b.both(family_case(fam, f"reasoning-hidden-{i}-{s.name}", s.name, req, [Gen(ids)]))
        # reasoning only: the output ends inside the reasoning
        text = fam.think(REASONINGS[1], "")
        text = text[: text.index("</think>")]
        g = Gen(b.ids(text), "length")
        b.both(family_case(fam, f"reasoning-only-{s.name}", s.name, fam.chat_request(), [g]))
        # whitespace around the end marker
        ids = [*b.ids("Thinking hard.  \n</think>\n\nAnswer."), eos]
        g = Gen(ids)
        b.both(
            family_case(fam, f"reasoning-trailing-space-{s.name}", s.name, fam.chat_request(), [g]),
            1,
        )
        # The start marker written again, a stray end marker, the start in the answer.
        text = "<think>Hmm.</think>Plain </think> text <think>inner</think> out"
        g = Gen([*b.ids(text), eos])
        b.both(family_case(fam, f"reasoning-markers-{s.name}", s.name, fam.chat_request(), [g]), 1)
        # Reasoning with logprobs, shown and hidden.
        ids = [*b.ids(fam.think(REASONINGS[3], TEXTS[3])), eos]
        for hidden in (False, True):
            req = fam.chat_request(logprobs=True, top_logprobs=1, include_reasoning=not hidden)
            g = Gen(ids, logprobs=b.logprobs(ids, 1))
            b.both(
                family_case(fam, f"reasoning-logprobs-hidden-{hidden}-{s.name}", s.name, req, [g])
            )
    if fam.no_think is None:
        return
    # Thinking switched by the template kwargs (`enable_thinking` is what the GLM and
    # Qwen3 templates read; `thinking` is the other spelling vLLM parsers know): think
    # markers in the output.
    text = "Answer <think>not a trace</think> done."
    for s in fam.servers:
        for kw in ({"enable_thinking": False}, {"thinking": False}, {"enable_thinking": True}):
            key = "-".join(f"{k}-{v}" for k, v in kw.items())
            req = fam.chat_request(chat_template_kwargs=kw)
            g = Gen([*b.ids(text), eos])
            b.both(family_case(fam, f"reasoning-kwargs-{key}-{s.name}", s.name, req, [g]), "random")
    s = fam.servers[0]
    # Thinking off, then a tool call.
    req = fam.chat_request(tools=TOOLS, **fam.no_think)
    g = Gen([*b.ids("Checking.\n" + s.calls(CALLS[:1])), eos])
    b.both(family_case(fam, "reasoning-off-tool-call", s.name, req, [g], "native"), 1)


def add_completion(b: Builder, fam: Family) -> None:
    """Completion on a parser server: the parsers do not apply."""
    s = fam.servers[0]
    o = b.ids(fam.think("Hm.", s.calls(CALLS[:1])) + " text")
    creq = fam.completion_request()
    b.both(
        family_case(
            fam, f"completion-{s.name}", s.name, creq, [Gen([*o, fam.eos[0]])], api="completion"
        ),
        1,
    )
    prompts = ["Once upon a time", "日本語で"]
    outs = [b.ids(" there was a tokenizer. 日本語"), b.ids("話しましょう 😀")]
    creq = fam.completion_request(prompt=prompts, n=2)
    gens = [[Gen(o, "length", index=0), Gen([*o[:3], fam.eos[0]], "stop", index=1)] for o in outs]
    b.add(
        Case(f"{fam.prefix}-completion-prompts2-n2/whole", s.name, "completion", False, creq, gens)
    )
    creq = fam.completion_request(stream_options={"include_usage": True})
    g = Gen(outs[0], "length", cuts=b.cuts(len(outs[0]), "random"))
    case = family_case(fam, "completion-usage", s.name, creq, [g], api="completion")
    b.add(replace(case, stream=True, engine_usage="final"))


def add_errors(b: Builder, fam: Family) -> None:
    server, extra = fam.plain[0]
    vocab = b.tok.get_vocab_size(with_added_tokens=True)
    g = Gen([*b.ids("Hi"), vocab, fam.eos[0]])
    b.both(family_case(fam, "error-out-of-vocab", server, fam.chat_request(**extra), [g]), 1)
    g = Gen([], "stop")
    b.add(family_case(fam, "error-empty-token-ids/whole", server, fam.chat_request(**extra), [g]))


def add_logprobs(b: Builder, fam: Family) -> None:
    """Logprobs with top candidates (one family: Qwen3, byte-level BPE)."""
    server, extra = fam.plain[0]
    eos = fam.eos[0]
    for i, text in enumerate([TEXTS[2], TEXTS[4], "Hello 😀 🦜", TEXTS[5]]):
        ids = [*b.ids(text), eos]
        for top in (0, 2, 5):
            req = fam.chat_request(logprobs=True, top_logprobs=top, **extra)
            g = Gen(ids, logprobs=b.logprobs(ids, top))
            b.both(family_case(fam, f"logprobs-chat-{i}-top{top}", server, req, [g]), "random")
        for k in (0, 3):
            cids = ids[:-1]
            creq = fam.completion_request(logprobs=k)
            g = Gen(cids, "length", logprobs=b.logprobs(cids, k + 1))
            b.both(
                family_case(
                    fam, f"logprobs-completion-{i}-k{k}", server, creq, [g], api="completion"
                )
            )
    # Sampled tokens only (no top list), and special tokens among the candidates.
    ids = [*b.ids("Hi"), fam.specials[0], *b.ids(" there"), eos]
    lp = [
        {
            "token_id": t,
            "logprob": -0.5,
            "rank": 1,
            "top_logprobs": [
                {"token_id": t, "logprob": -0.5, "rank": 1},
                {"token_id": eos, "logprob": -2.0, "rank": 2},
                {"token_id": fam.added[0], "logprob": -4.0, "rank": 3},
            ],
        }
        for t in ids
    ]
    for skip in (True, False):
        req = fam.chat_request(logprobs=True, top_logprobs=3, skip_special_tokens=skip, **extra)
        b.both(
            family_case(fam, f"logprobs-specials-skip-{skip}", server, req, [Gen(ids, logprobs=lp)])
        )
    ids = [*b.ids(TEXTS[4]), eos]
    lp = [{"token_id": t, "logprob": -0.25} for t in ids]
    req = fam.chat_request(logprobs=True, **extra)
    b.both(family_case(fam, "logprobs-no-top", server, req, [Gen(ids, logprobs=lp)]), 2)
