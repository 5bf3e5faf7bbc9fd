"""The Messages formatter on its own (worker/core/apis/messages.py), fed hand-built chat
pieces: every event validates against the official `anthropic` SDK's types, and the
SDK's `MessageStream`, reading our SSE, accumulates exactly our whole message for the
same answer; random cuts of the same answer give the same message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import anthropic
import msgspec
import pytest
from anthropic.types import ErrorResponse
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.core.apis.messages_sdk import (
    EVENT_SCHEMA,
    MESSAGES,
    accumulated,
    client,
    read_whole,
    sse,
)
from tests.support.examples import examples
from worker.core.apis import messages as m
from worker.core.apis.parts import Part
from worker.core.errors import DerenderError
from worker.core.state import FormatState, RequestState, decode_state, encode_state
from worker.wire.outbound import FunctionDelta, ToolCallDelta, UsageInfo

RID = "req-1"
MODEL = "m"


@dataclass
class Answer:
    """What a chat answer says, whole."""

    reasoning: str = ""
    content: str = ""
    calls: list[tuple[str, str, str]] = field(default_factory=list)  # id, name, arguments
    finish: str | None = "stop"
    matched: int | str | None = None


@dataclass
class P:
    """One record's chat piece of choice 0."""

    reasoning: str | None = None
    content: str | None = None
    calls: list[ToolCallDelta] | None = None
    finish: str | None = None
    matched: int | str | None = None


def head(index: int, cid: str, name: str, args: str | None = None) -> ToolCallDelta:
    return ToolCallDelta(index, cid, "function", FunctionDelta(name, args or msgspec.UNSET))


def frag(index: int, args: str) -> ToolCallDelta:
    return ToolCallDelta(index, function=FunctionDelta(arguments=args))


def new_state(prompt: int | None = 3) -> RequestState:
    return RequestState(seq=0, api="messages", model=MODEL, prompt_tokens=prompt, fmt=FormatState())


def stream(pieces: list[P], prompt: int = 3, output: int = 7, abort: bool = False) -> list[bytes]:
    """The events of a stream; the state goes through msgpack between records, as it
    does through Redis."""
    state = new_state(prompt)
    out = m.start(state, RID)
    for p in pieces:
        state = decode_state(encode_state(state))
        part = Part(p.reasoning or "", p.content or "", p.calls or [], p.finish, p.matched)
        out += m.piece(state, RID, part)
    out += m.end(state, RID, UsageInfo(prompt, output, prompt + output), abort)
    assert all(o.kind == "chunk" for o in out)
    return [o.value for o in out]


def whole(a: Answer, prompt: int = 3, output: int = 7) -> bytes:
    calls = [head(i, cid, n, args) for i, (cid, n, args) in enumerate(a.calls)]
    part = Part(a.reasoning, a.content, calls, a.finish, a.matched)
    o = m.whole(new_state(prompt), RID, [part], UsageInfo(prompt, output, prompt + output))
    assert o.kind == "response"
    return o.value


def check(pieces: list[P], answer: Answer) -> tuple[list[dict[str, Any]], Any]:
    """The SDK accumulates our stream to exactly our whole message; the events' shape."""
    values = stream(pieces)
    got = accumulated(values)
    want = read_whole(whole(answer))
    assert got.model_dump() == want.model_dump()
    events = [json.loads(v) for v in values]
    _check_order(events)
    return events, want


def _check_order(events: list[dict[str, Any]]) -> None:
    """One message_start first, message_delta then message_stop last; blocks numbered
    0, 1, … each started, then its deltas, then stopped, one open at a time."""
    kinds = [e["type"] for e in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds.count("message_start") == 1
    open_: int | None = None
    seen = 0
    for e in events[1:-2]:
        if e["type"] == "content_block_start":
            assert open_ is None and e["index"] == seen
            open_, seen = e["index"], seen + 1
        elif e["type"] == "content_block_stop":
            assert e["index"] == open_
            open_ = None
        else:
            assert e["type"] == "content_block_delta" and e["index"] == open_
    assert open_ is None and seen >= 1


def test_reasoning_text_and_parallel_calls() -> None:
    pieces = [
        P(reasoning="Let me "),
        P(reasoning="think."),
        P(content="Calling"),
        P(content=" tools."),
        P(calls=[head(0, "chatcmpl-tool-aa", "get_weather", '{"city": "Pa')]),
        P(calls=[frag(0, 'ris"}'), head(1, "chatcmpl-tool-bb", "search")]),
        P(calls=[frag(1, '{"q": "日本語 \\"x\\""'), frag(1, ', "n": [1, {"k": null}]}')]),
        P(finish="tool_calls"),
    ]
    answer = Answer(
        "Let me think.",
        "Calling tools.",
        [
            ("chatcmpl-tool-aa", "get_weather", '{"city": "Paris"}'),
            ("chatcmpl-tool-bb", "search", '{"q": "日本語 \\"x\\"", "n": [1, {"k": null}]}'),
        ],
        "tool_calls",
    )
    events, want = check(pieces, answer)
    assert [b.type for b in want.content] == ["thinking", "text", "tool_use", "tool_use"]
    assert [b.id for b in want.content[2:]] == ["toolu_aa", "toolu_bb"]
    assert want.content[3].input == {"q": '日本語 "x"', "n": [1, {"k": None}]}
    assert want.stop_reason == "tool_use" and want.stop_sequence is None
    assert want.id == "msg_req-1" and want.usage.input_tokens == 3
    assert want.usage.output_tokens == 7
    assert want.content[0].signature == ""
    # One record's call header and arguments: the block opens, then its first fragment.
    starts = [e for e in events if e["type"] == "content_block_start"]
    assert starts[2]["content_block"] == {
        "type": "tool_use",
        "id": "toolu_aa",
        "name": "get_weather",
        "input": {},
    }


def test_a_forced_call_that_finishes_with_stop_is_tool_use() -> None:
    """A named tool_choice finishes `stop` in chat; Anthropic says `tool_use`."""
    pieces = [P(calls=[head(0, "chatcmpl-tool-aa", "f", "{}")], finish="stop")]
    _, want = check(pieces, Answer(calls=[("chatcmpl-tool-aa", "f", "{}")]))
    assert want.stop_reason == "tool_use"


@pytest.mark.parametrize(
    ("finish", "matched", "reason", "sequence"),
    [
        ("stop", None, "end_turn", None),
        ("stop", 128001, "end_turn", None),  # a stop token id is no stop sequence
        ("stop", "END", "stop_sequence", "END"),
        ("length", None, "max_tokens", None),
        ("abort", None, None, None),
        (None, None, None, None),
    ],
)
def test_stop_reasons(finish: str | None, matched: Any, reason: Any, sequence: Any) -> None:
    pieces = [P(content="Hello"), P(content=" there", finish=finish, matched=matched)]
    events, want = check(pieces, Answer("", "Hello there", [], finish, matched))
    assert (want.stop_reason, want.stop_sequence) == (reason, sequence)
    assert events[-2]["delta"] == {"stop_reason": reason, "stop_sequence": sequence}


def test_a_stop_sequence_after_a_call_is_stop_sequence() -> None:
    pieces = [P(calls=[head(0, "chatcmpl-tool-aa", "f", '{"a": 1')], finish="stop", matched="}")]
    _, want = check(pieces, Answer(calls=[("chatcmpl-tool-aa", "f", '{"a": 1')], matched="}"))
    assert (want.stop_reason, want.stop_sequence) == ("stop_sequence", "}")
    assert want.content[0].input == {"a": 1}


def test_a_length_cut_inside_arguments_gives_what_was_complete() -> None:
    """The SDK reads cut arguments in partial mode; the whole message's input is the same."""
    args = '{"city": "Paris", "items": [1, 2], "q": "unfini'
    pieces = [P(calls=[head(0, "chatcmpl-tool-aa", "f", args[:9])]), P(calls=[frag(0, args[9:])])]
    pieces.append(P(finish="length"))
    _, want = check(pieces, Answer(calls=[("chatcmpl-tool-aa", "f", args)], finish="length"))
    assert want.stop_reason == "max_tokens"
    assert want.content[0].input == {"city": "Paris", "items": [1, 2]}


def test_an_empty_answer_is_one_empty_text_block() -> None:
    events, want = check([P(finish="stop")], Answer())
    assert [b.model_dump() for b in want.content] == [
        {"type": "text", "text": "", "citations": None}
    ]
    assert [e["type"] for e in events] == [
        "message_start",
        "content_block_start",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]


def test_reasoning_after_text_opens_a_new_thinking_block() -> None:
    values = stream([P(reasoning="a"), P(content="b"), P(reasoning="c"), P(finish="stop")])
    got = accumulated(values)
    assert [
        (b.type, getattr(b, "thinking", None) or getattr(b, "text", None)) for b in got.content
    ] == [
        ("thinking", "a"),
        ("text", "b"),
        ("thinking", "c"),
    ]
    _check_order([json.loads(v) for v in values])


def test_arguments_of_a_call_without_header_say_nothing() -> None:
    """A suppressed call (no header) sends nothing, as the whole answer leaves it out."""
    values = stream([P(content="x", calls=[frag(0, '{"a": 1}')], finish="stop")])
    assert not [v for v in values if b"input_json_delta" in v]
    assert accumulated(values).model_dump() == read_whole(whole(Answer(content="x"))).model_dump()


def test_ids() -> None:
    assert m.message_id("abc") == "msg_abc"
    assert m.message_id("msg_abc") == "msg_abc"
    assert m.tool_use_id("chatcmpl-tool-0123") == "toolu_0123"
    # Ids the model wrote itself (Kimi K2) or a format requires (Mistral) are kept.
    assert m.tool_use_id("functions.get_weather:0") == "functions.get_weather:0"
    assert m.tool_use_id("aB3dE6gH9") == "aB3dE6gH9"


def test_the_same_pieces_give_the_same_bytes() -> None:
    pieces = [P(reasoning="r"), P(content="c", calls=[head(0, "chatcmpl-tool-aa", "f", "{}")])]
    assert stream(pieces) == stream(pieces)


@pytest.mark.parametrize(
    ("code", "kind", "error_class"),
    [
        ("invalid_request_error", "invalid_request_error", anthropic.BadRequestError),
        ("model_not_found", "not_found_error", anthropic.NotFoundError),
        ("sequence_gap", "api_error", anthropic.InternalServerError),
        ("internal_error", "api_error", anthropic.InternalServerError),
    ],
)
def test_errors_as_the_api_shapes_them(code: str, kind: str, error_class: Any) -> None:
    (failure,) = m.failed(new_state(), RID, DerenderError("it broke", code), False)
    assert failure.kind == "error"
    body = failure.value
    assert json.loads(body) == {"type": "error", "error": {"type": kind, "message": "it broke"}}
    ErrorResponse.model_validate(json.loads(body))
    EVENT_SCHEMA.validate(json.loads(body))
    # Streamed: the SDK raises on the `error` event, with our body.
    state = new_state()
    values = [o.value for o in [*m.start(state, RID), *m.piece(state, RID, Part(content="x"))]]
    values.append(body)
    sdk = client(sse(values), stream=True)
    with (
        pytest.raises(anthropic.APIStatusError) as raised,
        sdk.messages.stream(model=MODEL, max_tokens=4, messages=MESSAGES) as s,
    ):
        for _ in s:
            pass
    assert raised.value.body == json.loads(body)
    # Whole: the body of an error status, read as the SDK's error class for it.
    status = {"invalid_request_error": 400, "not_found_error": 404, "api_error": 500}[kind]
    with pytest.raises(error_class) as whole_raised:
        client(body, stream=False, status=status).messages.create(
            model=MODEL, max_tokens=4, messages=MESSAGES
        )
    assert whole_raised.value.body == json.loads(body)


# --- random cuts of random answers ----------------------------------------------------------

_text = st.text(st.sampled_from(list('ab \n"{}<>é日😀\\')), max_size=12)
_args = st.dictionaries(
    st.sampled_from(["k", "v", "a b"]),
    st.one_of(
        st.integers(-5, 5), _text, st.booleans(), st.none(), st.lists(st.integers(), max_size=3)
    ),
    max_size=3,
).map(lambda d: json.dumps(d, ensure_ascii=False))


@st.composite
def answers(draw: st.DrawFn) -> Answer:
    calls = draw(st.lists(st.tuples(st.sampled_from(["f", "g"]), _args), max_size=3))
    finish = draw(st.sampled_from(["stop", "tool_calls", "length", "abort"]))
    cut = finish in ("length", "abort") and calls and draw(st.booleans())
    if cut:  # the last call's arguments cut short
        name, args = calls[-1]
        calls[-1] = (name, args[: draw(st.integers(0, len(args)))])
    return Answer(
        draw(_text),
        draw(_text),
        [(f"chatcmpl-tool-{i:02d}", n, a) for i, (n, a) in enumerate(calls)],
        finish,
        draw(st.sampled_from([None, "STOP"])) if finish == "stop" else None,
    )


def _cuts(draw: st.DrawFn, text: str) -> list[str]:
    points = sorted(draw(st.sets(st.integers(1, max(len(text) - 1, 1)), max_size=4)))
    points = [p for p in points if p < len(text)]
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True) if a < b]


@st.composite
def streamed(draw: st.DrawFn) -> tuple[list[P], Answer]:
    a = draw(answers())
    pieces = [P(reasoning=r) for r in _cuts(draw, a.reasoning)]
    pieces += [P(content=c) for c in _cuts(draw, a.content)]
    for i, (cid, name, args) in enumerate(a.calls):
        parts = _cuts(draw, args)
        first = parts.pop(0) if parts and draw(st.booleans()) else None
        pieces.append(P(calls=[head(i, cid, name, first)]))
        pieces += [P(calls=[frag(i, part)]) for part in parts]
    # Neighbouring records merged into one (a record says several things at once).
    merged: list[P] = []
    for p in pieces:
        if merged and draw(st.booleans()) and _mergeable(merged[-1], p):
            last = merged[-1]
            last.calls = (last.calls or []) + (p.calls or [])
            last.content = (last.content or "") + (p.content or "") or None
        else:
            merged.append(p)
    if a.finish != "abort":
        merged.append(P(finish=a.finish, matched=a.matched))
    return merged, a


def _mergeable(a: P, b: P) -> bool:
    """Merged in record order: reasoning first, then text, then calls, as one record
    orders them."""
    return b.reasoning is None and not (b.content is not None and a.calls)


@settings(max_examples=examples(150), deadline=None)
@given(case=streamed())
def test_random_cuts_accumulate_to_the_whole_message(case: tuple[list[P], Answer]) -> None:
    pieces, answer = case
    check(pieces, answer)


def test_text_after_a_call_in_one_record_keeps_the_model_order() -> None:
    """A record holding a call's last arguments and the text the model wrote after it
    comes as two parts, in that order (`apis.parts_of`): the arguments stay in their
    block, the text opens the next, and the whole message has the same order."""
    from worker.core import apis
    from worker.core.parsers import Content, ToolCallArgs, ToolCallStart
    from worker.core.render import Piece

    first = Piece(0, events=[ToolCallStart(0, "chatcmpl-tool-aa", "f"), ToolCallArgs(0, '{"a"')])
    second = Piece(0, finish_reason="stop", events=[ToolCallArgs(0, ": 1}"), Content("Done.")])
    parts = apis.parts_of(first) + apis.parts_of(second)
    assert [bool(p.calls) for p in parts] == [True, True, False]
    assert parts[-1].content == "Done." and parts[-1].finish_reason == "stop"
    state = new_state()
    values = [o.value for o in m.start(state, RID)]
    for part in parts:
        values += [o.value for o in m.piece(state, RID, part)]
    values += [o.value for o in m.end(state, RID, UsageInfo(3, 7, 10), False)]
    got = accumulated(values)
    assert [b.type for b in got.content] == ["tool_use", "text"]
    assert got.content[0].input == {"a": 1}
    body = m.whole(new_state(), RID, parts, UsageInfo(3, 7, 10)).value
    assert got.model_dump() == read_whole(body).model_dump()
