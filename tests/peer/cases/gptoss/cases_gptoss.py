"""The parity cases of gpt-oss (Harmony): gpt-oss's tokenizer (o200k_harmony, rebuilt id for
id by tests/support/vocab/tiktoken_convert.py; setup_peer.sh copies it into vLLM's model folder, and
our registry reads that file) on two render servers:

- `gptoss-on`: `--reasoning-parser openai_gptoss --tool-call-parser openai`;
- `gptoss-reasoning`: no tool parser. vLLM sets `openai_gptoss` for a gpt_oss model itself,
  flag or not, so reasoning is always split; calls to functions are dropped.

The output is Harmony messages, every framing marker one special token: the prompt ends
with `<|start|>assistant`, so the first message begins at its header (`<|channel|>analysis
<|message|>…<|end|>`) and each later one with `<|start|>assistant`. Calls go to
`functions.NAME` on the commentary channel, the recipient before or after the channel,
with a content type (` <|constrain|>json`, ` json`, `<|constrain|>code`) or none.

Generated from a fixed seed, like cases.py; every case name starts `gptoss-`.
"""

from __future__ import annotations

from dataclasses import replace

from tokenizers import Tokenizer

from tests.peer.cases.cases import CALLS, REASONINGS, TEXTS, TOOLS, Builder
from tests.peer.cases.families.cases_families import mark_specials
from tests.peer.cases.gptoss.cases_gptoss_harmony import (
    ALTERNATIVES,
    END,
    ENDOFPROMPT,
    GPTOSS_EOS,
    GPTOSS_TOKENIZER,
    JSON_CT,
    NAMED,
    NEXT,
    ON,
    REASONING,
    REPORTED,
    RETURN,
    SEED,
    SERVERS,
    _case,
    _text,
    analysis,
    args_text,
    call,
    calls,
    chat_request,
    completion_request,
    final,
    gen,
    harmony,
    msg,
    preamble,
)
from tests.peer.cases.gptoss.cases_gptoss_tools import (
    _completion,
    _errors,
    _tool_choice,
    _tools,
    _typed,
)
from tests.peer.drive import Case, Gen

# What the other modules read here (`G.…`): the Harmony text helpers and constants live in
# cases_gptoss_harmony.py, the tool groups in cases_gptoss_tools.py.
__all__ = [
    "ALTERNATIVES",
    "END",
    "GPTOSS_EOS",
    "GPTOSS_TOKENIZER",
    "NAMED",
    "REPORTED",
    "SERVERS",
    "args_text",
    "build",
    "chat_request",
    "harmony",
    "msg",
]


def build(tok: Tokenizer) -> list[Case]:
    b = Builder(tok, SEED, ALTERNATIVES)
    _plain(b)
    _eos(b)
    _messages(b)
    _recovery(b)
    _specials(b)
    _usage(b)
    _stops(b)
    _n(b)
    _reasoning(b)
    _logprobs(b)
    _tools(b)
    _typed(b)
    _tool_choice(b)
    _completion(b)
    _errors(b)
    for case in b.cases:
        mark_specials(case, tok)
    return b.cases


# --------------------------------------------------------------------------- groups


def _plain(b: Builder) -> None:
    """Reasoning then an answer, on both servers; the answer alone; cut by length."""
    for i, text in enumerate(TEXTS):
        out = harmony(analysis(REASONINGS[i % len(REASONINGS)]), final(text))
        servers = SERVERS if i % 3 == 0 else (ON,)
        for server in servers:
            how: str | int = 1 if i % 2 == 0 else "random"
            _text(b, f"plain-{i}-{server}", server, out, how)
    _text(b, "final-only", ON, final(TEXTS[1]), 1)
    _text(b, "final-only-tools", ON, final(TEXTS[3]), "random", tools=TOOLS)
    # finish "length": the answer just stops (maybe inside a character)
    for i in (2, 4, 8):
        ids = b.ids(harmony(analysis(REASONINGS[0]), final(TEXTS[i])))
        g = gen(ids[:-2], "length")
        b.both(_case(f"plain-length-{i}", ON, chat_request(), [g]))
    # The output ends inside a character: the rest never came (length), or EOS follows.
    ids = b.ids(harmony(analysis("Hm."), final("Smile 😀")))[:-2]
    for finish, tail in (("length", []), ("stop", [RETURN])):
        b.both(_case(f"partial-char-{finish}", ON, chat_request(), [gen(ids + tail, finish)]), 1)
    # A last chunk carrying only the finish reason.
    ids = b.ids(harmony(analysis("Hm."), final(TEXTS[4], end="")))
    g = Gen(ids, "length", cuts=[*b.cuts(len(ids), 2), 0])
    b.add(replace(_case("empty-last-chunk", ON, chat_request(), [g]), stream=True))


def _eos(b: Builder) -> None:
    """Each EOS id ending the answer, reported as the engine would (stop_reason null for
    `<|return|>`, the id for the others) or not reported, and kept; `<|end|>` before the
    EOS, and no EOS after `<|end|>`."""
    body = b.ids(harmony(analysis("Hm."), final(TEXTS[0], end="")))
    for eos in GPTOSS_EOS:
        reported = REPORTED[eos]
        for label, stop_reason in (("reported", reported), ("unreported", None)):
            if label == "unreported" and reported is None:
                continue
            g = Gen([*body, eos], "stop", stop_reason)
            b.both(_case(f"eos-{eos}-{label}", ON, chat_request(), [g]), "random")
        req = chat_request(include_stop_str_in_output=True, skip_special_tokens=False)
        b.both(_case(f"eos-{eos}-kept", ON, req, [Gen([*body, eos], "stop", reported)]), 2)
        # The message ended by <|end|>, then the EOS.
        g = Gen([*body, END, eos], "stop", reported)
        b.both(_case(f"eos-{eos}-after-end", ON, chat_request(), [g]), 1)
    # <|end|> and no EOS (stop, as an engine with <|end|> as a stop token says, and length).
    for finish in ("stop", "length"):
        g = Gen([*body, END], finish)
        b.both(_case(f"end-no-eos-{finish}", ON, chat_request(), [g]), 1)
    # An EOS id that is not the last token (the engine did not stop on it).
    ids = b.ids(harmony(analysis("Hm."), final("Hi", end="<|endoftext|>")))
    ids += b.ids(NEXT + "<|channel|>final<|message|>Again<|return|>")
    b.both(_case("eos-inside", ON, chat_request(), [gen(ids)]), 1)
    # Completion.
    cids = b.ids(" there was a tokenizer.")
    for eos in GPTOSS_EOS:
        g = Gen([*cids, eos], "stop", REPORTED[eos])
        b.both(_case(f"eos-completion-{eos}", ON, completion_request(), [g], api="completion"))


def _messages(b: Builder) -> None:
    """How each message is classified and joined (vLLM's probe cases, from
    /tmp/harmony/SUMMARY.md)."""
    r = analysis(REASONINGS[0])
    texts = {
        "two-analysis": harmony(
            analysis("First thought."), analysis("Second thought."), final("Hi")
        ),
        "preamble-final": harmony(preamble("Let me look that up."), final("The answer is 42.")),
        "analysis-preamble-final": harmony(r, preamble("One moment."), final(TEXTS[2])),
        "to-assistant": harmony(
            msg("commentary", "Some tool response", to="assistant"), final("Here is the answer")
        ),
        "builtin-browser-analysis": harmony(
            r,
            msg("analysis", '{"query":"vllm"}', to="browser.search", ctype=JSON_CT, end="<|call|>"),
        ),
        "builtin-python-analysis": harmony(
            r, msg("analysis", "print(1 + 1)", to="python", ctype=" code", end="<|call|>")
        ),
        "builtin-browser-commentary": harmony(
            r,
            msg(
                "commentary",
                '{"query":"vllm"}',
                to="browser.search",
                ctype=JSON_CT,
                end="<|call|>",
            ),
        ),
        "builtin-container-commentary": harmony(
            r, msg("commentary", '{"cmd":["ls"]}', to="container.exec", end="<|call|>")
        ),
        "analysis-constrain": harmony(msg("analysis", '{"t":1}', ctype=JSON_CT), final("Hi")),
        "final-constrain": harmony(r, msg("final", '{"a":1}', ctype=JSON_CT, end="<|return|>")),
        "stray-end": harmony(analysis("think") + "<|end|>", final("ok")),
        "message-without-channel": "<|message|>hello<|end|>" + NEXT + final("Hi"),
        "specials-in-body": final("a<|start|>b<|channel|>c"),
        "endoftext-in-body": harmony(r, final("Hi", end="<|endoftext|>")),
        "call-ends-final": harmony(r, final("Hi", end="<|call|>")),
        "empty-final": harmony(r, final("")),
        "empty-analysis": harmony(analysis(""), final("Hi")),
        "analysis-only": harmony(r) + "<|return|>",
        "final-then-final": harmony(final("One.", end="<|end|>"), final("Two.")),
        "whitespace-bodies": harmony(analysis("  \n"), preamble("\n"), final(" spaced  ")),
        "newlines-inside": harmony(analysis("a\n\nb\n"), final("\nline one\nline two\n")),
        "unknown-channel": harmony(r, msg("thoughts", "hidden"), final("Hi")),
        "end-inside-final": harmony(r, final("x<|endofprompt|>y")),
    }
    for k, (name, text) in enumerate(texts.items()):
        how: str | int = 1 if k % 3 == 0 else 3 if k % 3 == 1 else "random"
        _text(b, f"msg-{name}", ON, text, how, tools=TOOLS)
        if k % 2 == 0:
            _text(b, f"msg-{name}-no-tools", REASONING, text, "random")
    # A framing marker spelled with ordinary tokens is text.
    ordinary = [i for piece in ("<|", "end", "|>") for i in b.ids(piece)]
    ids = [*b.ids("<|channel|>final<|message|>a"), *ordinary, *b.ids("b<|return|>")]
    b.both(_case("msg-marker-as-text", ON, chat_request(), [gen(ids)]), 1)


def _recovery(b: Builder) -> None:
    """Outputs that end in a header, or never had one: vLLM's recovery decodes the open
    message's tokens (special tokens kept) into content; text before a header is its
    recipient."""
    r = analysis(REASONINGS[1])
    texts = {
        "cut-in-header": harmony(r, "<|channel|>comm"),
        "cut-in-recipient": harmony(r, "<|channel|>commentary to=functions.get_wea"),
        "cut-after-start": harmony(r, ""),
        "cut-in-first-header": "<|channel|>ana",
        "cut-after-message-marker": harmony(r, "<|channel|>final<|message|>"),
        "no-header": "Hello there, no header at all.<|return|>",
        "no-header-length": "Hello there, no header at all.",
        "return-only": "<|return|>",
        "endoftext-only": "<|endoftext|>",
        "text-before-header": "Hi<|channel|>final<|message|>Hello!<|return|>",
        "malformed": harmony(
            analysis("thinking"),
            preamble("thinking"),
            '<|channel|>final {"answer": "hi"}<|return|>',
        ),
        "cut-in-analysis": "<|channel|>analysis<|message|>I am thinking about the",
        "cut-in-final": harmony(r, "<|channel|>final<|message|>The answer is"),
    }
    for k, (name, text) in enumerate(texts.items()):
        how: str | int = 1 if k % 2 == 0 else "random"
        _text(b, f"recover-{name}", ON, text, how, tools=TOOLS)
        if name in ("text-before-header", "no-header", "cut-in-header", "malformed"):
            _text(b, f"recover-{name}-no-tools", ON, text, how)
            _text(b, f"recover-{name}-reasoning", REASONING, text, how, tools=TOOLS)


def _specials(b: Builder) -> None:
    """Special tokens inside a final body, skip_special_tokens either way (the parser
    reads ids), and the same ids as completion text."""
    inner = "A<|startoftext|>b<|reserved_200013|>c<|endofprompt|>d<|endoftext|>e"
    text = harmony(analysis("Hm."), final(inner))
    for skip in (True, False):
        req = chat_request(skip_special_tokens=skip)
        b.both(_case(f"special-skip-{skip}", ON, req, [gen(b.ids(text))]), 1)
        ids = b.ids("Before" + inner + "after")
        creq = completion_request(skip_special_tokens=skip)
        g = Gen(ids, "length")
        b.both(_case(f"special-completion-skip-{skip}", ON, creq, [g], api="completion"))
        hids = b.ids(harmony(analysis("Hm."), final("Hi")))
        g = Gen(hids, "stop")
        b.both(_case(f"special-completion-harmony-{skip}", ON, creq, [g], api="completion"), 3)
    req = chat_request(skip_special_tokens=False, spaces_between_special_tokens=False)
    b.both(_case("special-no-spaces", ON, req, [gen(b.ids(text))]), 3)


def _usage(b: Builder) -> None:
    ids = b.ids(harmony(analysis(REASONINGS[2]), final(TEXTS[2])))
    variants = [
        ("final", {"include_usage": True}, "final"),
        ("continuous", {"include_usage": True, "continuous_usage_stats": True}, "continuous"),
        ("engine-silent", {"include_usage": True}, "none"),
        ("off", {"include_usage": False}, "none"),
    ]
    for name, so, engine in variants:
        req = chat_request(stream_options=so)
        g = gen(ids, cuts=b.cuts(len(ids), "random"))
        b.add(replace(_case(f"usage-{name}", ON, req, [g]), stream=True, engine_usage=engine))
    # Usage while reasoning and a tool call stream.
    tids = b.ids(harmony(analysis(REASONINGS[1]), *calls(CALLS[:1])))
    so = {"include_usage": True, "continuous_usage_stats": True}
    for server in SERVERS:
        req = chat_request(tools=TOOLS, stream_options=so)
        g = gen(tids, cuts=b.cuts(len(tids), "random"))
        case = _case(f"usage-continuous-tool-call-{server}", server, req, [g], "call")
        b.add(replace(case, stream=True, engine_usage="continuous"))


def _stops(b: Builder) -> None:
    """Stop strings (the engine stopped at the token completing one) in the answer and in
    the reasoning; stop token ids."""
    # (The engine stops at the first stop string: the reasoning before the answer holds none.)
    head = b.ids(harmony(analysis("Think of a greeting."), "<|channel|>final<|message|>"))
    full = b.ids("Hello there! General Kenobi. You are a bold one.")
    upto = next(k for k in range(1, len(full) + 1) if "Kenobi" in b.tok.decode(full[:k]))
    for incl in (False, True):
        req = chat_request(stop=["Kenobi", "never"], include_stop_str_in_output=incl)
        g = Gen(head + full[:upto], "stop", "Kenobi")
        b.both(_case(f"stop-string-in-content-incl-{incl}", ON, req, [g]), 1)
    rids = b.ids("<|channel|>analysis<|message|>Think of Kenobi now.")
    rupto = next(k for k in range(1, len(rids) + 1) if "Kenobi" in b.tok.decode(rids[:k]))
    req = chat_request(stop=["Kenobi"])
    b.both(_case("stop-string-in-reasoning", ON, req, [Gen(rids[:rupto], "stop", "Kenobi")]), 1)
    # An older host reports no stop_reason: the stop list is searched.
    req = chat_request(stop="bold")
    b.add(_case("stop-unreported", ON, req, [gen([*head, *full, RETURN], stop_reason=None)]))
    # A stop string in a call's arguments.
    cids = b.ids(harmony(analysis("Hm."), call("get_weather", {"location": "Paris"})))
    cupto = next(k for k in range(1, len(cids) + 1) if "Paris" in b.tok.decode(cids[:k]))
    req = chat_request(stop=["Paris"], tools=TOOLS)
    b.both(_case("stop-string-in-call", ON, req, [Gen(cids[:cupto], "stop", "Paris")], "call"))
    # stop_token_ids: a client stop token.
    stop_tok = full[3]
    ids = head + full[:4]
    req = chat_request(stop_token_ids=[stop_tok])
    b.both(_case("stop-token", ON, req, [Gen(ids, "stop", stop_tok)]), "random")
    b.both(_case("stop-token-unreported", ON, req, [Gen(ids, "stop", None)]), 1)
    req = chat_request(stop_token_ids=[stop_tok], include_stop_str_in_output=True)
    b.both(_case("stop-token-kept", ON, req, [Gen(ids, "stop", stop_tok)]), 2)
    # A client stop token that is a Harmony marker: `<|end|>` ends the answer.
    ids = b.ids(harmony(analysis("Hm."), final("Hi", end="<|end|>")))
    req = chat_request(stop_token_ids=[END])
    b.both(_case("stop-token-end-marker", ON, req, [Gen(ids, "stop", END)]), 1)


def _n(b: Builder) -> None:
    """n = 2: a tool call in one choice and prose in the other."""
    for server in SERVERS:
        gens = [
            gen(b.ids(harmony(analysis(REASONINGS[0]), final(TEXTS[0]))), index=0),
            gen(b.ids(harmony(analysis(REASONINGS[1]), *calls(CALLS[:2]))), index=1),
        ]
        req = chat_request(n=2, tools=TOOLS)
        b.add(_case(f"n2-tools-{server}/whole", server, req, gens, "call"))
        streamed = [replace(g, cuts=b.cuts(len(g.token_ids), "random")) for g in gens]
        order = [g.index for g in streamed for _ in g.cuts or []]
        b.rng.shuffle(order)
        req = chat_request(n=2, tools=TOOLS, stream_options={"include_usage": True})
        case = _case(f"n2-tools-{server}/stream-interleaved", server, req, streamed, "call")
        b.add(replace(case, stream=True, order=order, engine_usage="final"))


def _reasoning(b: Builder) -> None:
    for i, r in enumerate(REASONINGS):
        text = harmony(analysis(r), final(TEXTS[(i * 3) % len(TEXTS)]))
        req = chat_request(include_reasoning=False)
        b.both(_case(f"reasoning-hidden-{i}", ON, req, [gen(b.ids(text))]))
    # hidden, with a call and with a preamble
    text = harmony(analysis(REASONINGS[1]), preamble("Checking."), *calls(CALLS[:1]))
    for server in SERVERS:
        req = chat_request(include_reasoning=False, tools=TOOLS)
        b.both(_case(f"reasoning-hidden-call-{server}", server, req, [gen(b.ids(text))], "call"))
    # Reasoning with logprobs, shown and hidden.
    ids = b.ids(harmony(analysis(REASONINGS[3]), final(TEXTS[3])))
    for hidden in (False, True):
        req = chat_request(logprobs=True, top_logprobs=1, include_reasoning=not hidden)
        g = gen(ids, logprobs=b.logprobs(ids, 1))
        b.both(_case(f"reasoning-logprobs-hidden-{hidden}", ON, req, [g]))


def _logprobs(b: Builder) -> None:
    for i, text in enumerate([TEXTS[2], TEXTS[4], "Hello 😀 🦜"]):
        ids = b.ids(harmony(analysis("Hm."), final(text)))
        for top in (0, 2):
            req = chat_request(logprobs=True, top_logprobs=top)
            g = gen(ids, logprobs=b.logprobs(ids, top))
            b.both(_case(f"logprobs-chat-{i}-top{top}", ON, req, [g]), "random")
        cids = b.ids(text)
        creq = completion_request(logprobs=2)
        g = Gen(cids, "length", logprobs=b.logprobs(cids, 3))
        b.both(_case(f"logprobs-completion-{i}", ON, creq, [g], api="completion"))
    # Sampled tokens only (no top list), and special tokens among the candidates.
    ids = b.ids(harmony(analysis("Hm."), final("Hi there")))
    lp = [
        {
            "token_id": t,
            "logprob": -0.5,
            "rank": 1,
            "top_logprobs": [
                {"token_id": t, "logprob": -0.5, "rank": 1},
                {"token_id": END, "logprob": -2.0, "rank": 2},
                {"token_id": ENDOFPROMPT, "logprob": -4.0, "rank": 3},
            ],
        }
        for t in ids
    ]
    for skip in (True, False):
        req = chat_request(logprobs=True, top_logprobs=3, skip_special_tokens=skip)
        b.both(_case(f"logprobs-specials-skip-{skip}", ON, req, [gen(ids, logprobs=lp)]))
    lp = [{"token_id": t, "logprob": -0.25} for t in ids]
    req = chat_request(logprobs=True)
    b.both(_case("logprobs-no-top", ON, req, [gen(ids, logprobs=lp)]), 2)
