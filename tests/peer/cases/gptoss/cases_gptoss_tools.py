"""gpt-oss's last groups of cases_gptoss.py, in its order: calls to functions on the
commentary channel, typed arguments, every tool_choice, completions and refused requests."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tests.peer.cases.cases import CALLS, REASONINGS, TOOL_CHOICES, TOOLS, Builder
from tests.peer.cases.families.cases_families import TYPED_CALLS, TYPED_TOOLS
from tests.peer.cases.gptoss.cases_gptoss_harmony import (
    ON,
    RETURN,
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
    preamble,
)
from tests.peer.drive import Case, Gen


def _tools(b: Builder) -> None:
    r = analysis(REASONINGS[1])
    tokyo = {"location": "Tokyo"}
    outputs = {
        "single": harmony(r, *calls(CALLS[:1])),
        "single-spaced-json": harmony(r, call("get_weather", args_text(CALLS[2][1], False))),
        "parallel": harmony(r, *calls(CALLS[:2])),
        "parallel3": harmony(r, *calls(CALLS[1:4])),
        "preamble-then-call": harmony(r, preamble("Let me check."), *calls(CALLS[2:3])),
        "call-then-final": harmony(r, call("get_weather", tokyo, end="<|end|>"), final("Done.")),
        "recipient-first": harmony(r, call("get_weather", tokyo, to_first=True)),
        "recipient-first-json": harmony(
            r, call("get_weather", tokyo, ctype=" json", to_first=True)
        ),
        "recipient-first-constrain": harmony(
            r, call("search", {"query": "x"}, ctype=" <|constrain|>json", to_first=True)
        ),
        "first-message-call": harmony(call("get_weather", tokyo)),
        "first-message-recipient-first": harmony(call("get_weather", tokyo, to_first=True)),
        "ctype-json-word": harmony(r, call("get_weather", tokyo, ctype=" json")),
        "ctype-none": harmony(r, call("get_weather", tokyo, ctype="")),
        "ctype-code": harmony(r, call("get_weather", "print( 1 )", ctype=" <|constrain|>code")),
        "dotted-name": harmony(r, call("math.sum", '{"a": 2, "b": 3}', prefix="")),
        "bare-name": harmony(r, call("get_weather", '{"location":"X"}', prefix="")),
        "ended-by-end": harmony(r, call("get_weather", tokyo, end="<|end|>"), final("Hello!")),
        "ended-by-return": harmony(r, call("get_weather", tokyo, end="<|return|>")),
        "args-not-json": harmony(r, call("get_weather", "{'location': 'Tokyo'}")),
        "args-empty": harmony(r, call("get_weather", "")),
        "args-object-empty": harmony(r, call("search", {})),
        "args-unicode": harmony(r, call("get_weather", {"location": "東京 😀"})),
        "args-spaced": harmony(r, call("get_weather", '{ "location" :  "Tokyo" }')),
        "args-newlines": harmony(r, call("search", '{\n  "query": "a\\nb",\n  "limit": 2\n}')),
        "unknown-function": harmony(r, *calls([("img_gen", {"prompt": "cat"}), CALLS[2]])),
        "text-before-call-header": "Hi" + call("get_weather", tokyo),
    }
    for k, (name, text) in enumerate(outputs.items()):
        how: str | int = 1 if name == "single" else "random" if k % 2 else 2
        for server in SERVERS if k % 3 == 0 else (ON,):
            _text(b, f"tools-{name}-{server}", server, text, how, tools=TOOLS, shape="call")
    # A call cut by length: in its header, in the arguments, after them (no <|call|>).
    full = harmony(r, call("get_weather", CALLS[0][1]))
    ids = b.ids(full)
    marks = {
        "in-recipient": full.index("get_weather") + 4,
        "in-args": full.index("杭") + 1,
        "after-args": full.index("<|call|>"),
    }
    for where, at in marks.items():
        k = len(ids)
        while k and not full[:at].startswith(b.tok.decode(ids[:k], skip_special_tokens=False)):
            k -= 1
        g = gen(ids[:k], "length")
        b.both(_case(f"tools-cut-{where}", ON, chat_request(tools=TOOLS), [g], "cut"), "random")
    # parallel_tool_calls false with two and three calls.
    for n in (2, 3):
        text = harmony(r, *calls(CALLS[:n]))
        req = chat_request(tools=TOOLS, parallel_tool_calls=False)
        b.both(_case(f"tools-single-call-only-{n}", ON, req, [gen(b.ids(text))], "call"), 2)
    # Calls with logprobs.
    ids = b.ids(harmony(analysis("Hm."), *calls(CALLS[:1])))
    req = chat_request(tools=TOOLS, logprobs=True, top_logprobs=2)
    g = gen(ids, logprobs=b.logprobs(ids, 2))
    b.both(_case("tools-logprobs", ON, req, [g], "call"), "random")


def _typed(b: Builder) -> None:
    """Arguments of every JSON type, compact and non-ASCII as gpt-oss writes them, and as
    `json.dumps` writes them."""
    for name, items in TYPED_CALLS.items():
        for compact in (True, False):
            body = [call(n, args_text(a, compact)) for n, a in items]
            text = harmony(analysis("Booking."), *body)
            req = chat_request(tools=TYPED_TOOLS)
            b.both(_case(f"typed-{name}-compact-{compact}", ON, req, [gen(b.ids(text))], "call"))


def _tool_choice(b: Builder) -> None:
    """Every tool_choice on both servers, the output a call, a preamble then a call, or an
    answer."""
    r = analysis("Hm.")
    shapes = {
        "call": harmony(r, *calls(CALLS[:1])),
        "preamble-call": harmony(r, preamble("Checking."), *calls(CALLS[2:3])),
        "final": harmony(r, final("I cannot call tools right now. 😀")),
    }
    for server in SERVERS:
        for choice_name, choice in TOOL_CHOICES:
            for shape, text in shapes.items():
                extra: dict[str, Any] = {}
                if choice_name != "no-tools":
                    extra = {"tools": TOOLS, "tool_choice": choice}
                req = chat_request(**extra)
                name = f"tool-choice-{choice_name}-{shape}-{server}"
                b.both(_case(name, server, req, [gen(b.ids(text))], shape), "random")


def _completion(b: Builder) -> None:
    """Completion on the parser server: the parsers do not apply."""
    o = b.ids(harmony(analysis("Hm."), *calls(CALLS[:1])) + " text")
    b.both(_case("completion-harmony", ON, completion_request(), [gen(o)], api="completion"), 1)
    prompts = ["Once upon a time", "日本語で"]
    outs = [b.ids(" there was a tokenizer. 日本語"), b.ids("話しましょう 😀")]
    creq = completion_request(prompt=prompts, n=2)
    gens = [[Gen(o, "length", index=0), Gen([*o[:3], RETURN], "stop", index=1)] for o in outs]
    b.add(Case("gptoss-completion-prompts2-n2/whole", ON, "completion", False, creq, gens))
    creq = completion_request(stream_options={"include_usage": True})
    g = Gen(outs[0], "length", cuts=b.cuts(len(outs[0]), "random"))
    case = _case("completion-usage", ON, creq, [g], api="completion")
    b.add(replace(case, stream=True, engine_usage="final"))


def _errors(b: Builder) -> None:
    vocab = b.tok.get_vocab_size(with_added_tokens=True)
    ids = b.ids(harmony(analysis("Hm."), "<|channel|>final<|message|>Hi"))
    g = Gen([*ids, vocab, RETURN])
    b.both(_case("error-out-of-vocab", ON, chat_request(), [g]), 1)
    b.add(_case("error-empty-token-ids/whole", ON, chat_request(), [Gen([], "stop")]))
