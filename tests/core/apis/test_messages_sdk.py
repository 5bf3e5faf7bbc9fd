"""The Messages API through the one loop (`replay`'s and `run`'s), read by the official
`anthropic` SDK.

Generated requests with `api: "messages"` over every registered reasoning / tool-call
format and a plain model (the chat SDK oracle's setups and conversations,
`tests/core/sdk/sdk_cases.py`): random chunkings, stop sequences, `length` finishes
(`max_tokens`) and aborts. Each stream's events validate against the SDK's event types,
the SDK's `MessageStream` reads our SSE and must accumulate exactly the worker's whole
message for the same token ids (a `response` record), itself read by
`messages.create`. The stream ends with the request-end marker after `message_stop`.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

import anthropic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.apis.messages_sdk import MESSAGES, accumulated, client, read_whole, sse
from tests.core.parsers.properties.test_properties import PIECES, _tokenizer, conversations
from tests.core.parsers.shared.samples import SETUPS, chat_request
from tests.core.sdk.sdk_cases import PLAIN, STOPS, WORDS, _chunks, registry
from tests.support.examples import examples
from tests.support.helpers import Run

CREATED = 1767225600
_settings = settings(
    max_examples=examples(8),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@dataclass
class Case:
    model: str
    prompt: list[int]
    output: list[int]
    finish: str
    request: dict[str, Any]
    cuts: list[int]
    abort_after: int | None = None  # records sent before an `abort`
    records: list[dict[str, Any]] = field(default_factory=list)


def messages_request(chat: dict[str, Any]) -> dict[str, Any]:
    """A chat request of the parser cases as the Messages request it stands for."""
    req: dict[str, Any] = {"max_tokens": 256}
    tools = [
        {"name": t["function"]["name"], "input_schema": t["function"].get("parameters", {})}
        for t in chat.get("tools", [])
    ]
    if tools:
        req["tools"] = tools
    choice = chat.get("tool_choice")
    if choice in ("auto", "none"):
        req["tool_choice"] = {"type": choice}
    elif choice == "required":
        req["tool_choice"] = {"type": "any"}
    elif isinstance(choice, dict):
        req["tool_choice"] = {"type": "tool", "name": choice["function"]["name"]}
    if chat.get("chat_template_kwargs") is not None:
        req["chat_template_kwargs"] = chat["chat_template_kwargs"]
    return req


FORMATS = [PLAIN, *sorted(SETUPS)]


@st.composite
def cases(draw: st.DrawFn, name: str) -> Case:
    if name == PLAIN:
        text = "".join(draw(st.lists(st.sampled_from(WORDS), max_size=12), label="text"))
        tok = _tokenizer("deepseek")
        req: dict[str, Any] = {"max_tokens": 256}
        prompt = [0]
    else:
        setup = SETUPS[name]
        tok = _tokenizer(setup.tokenizer)
        conv = draw(conversations(setup), label="conversation")
        text = setup.render(conv)
        req = messages_request(chat_request(setup, conv))
        prompt = list(tok.encode(setup.prompt_tail, add_special_tokens=False).ids)
    output = list(tok.encode(text, add_special_tokens=False).ids)
    output = output or list(tok.encode(" ok.", add_special_tokens=False).ids)
    if name == PLAIN and draw(st.booleans(), label="stop"):
        req["stop_sequences"] = draw(st.lists(st.sampled_from(STOPS), min_size=1, max_size=2))
    elif name != PLAIN and draw(st.booleans(), label="stop"):
        # A stop sequence the output holds: it may cut reasoning, text or a call.
        found = [p for p in PIECES if len(p.strip()) > 1 and p in text]
        if found:
            req["stop_sequences"] = [draw(st.sampled_from(found), label="stop sequence")]
    cuts = draw(st.lists(st.integers(1, 6), max_size=12), label="cuts")
    rnd = random.Random(draw(st.integers(0, 2**32), label="abort"))
    return Case(
        model=name,
        prompt=prompt,
        output=output,
        finish=draw(st.sampled_from(["stop", "stop", "length"])),
        request=req,
        cuts=cuts,
        abort_after=rnd.randint(1, 4) if draw(st.booleans()) and rnd.random() < 0.3 else None,
    )


def run_case(case: Case) -> tuple[list[bytes], bytes]:
    """The stream's event values (the request-end marker checked and left off) and the
    whole message, through the one loop."""
    rid = "msg_sdk"
    context = {
        "api": "messages",
        "model": case.model,
        "created": CREATED,
        "prompt_token_ids": case.prompt,
        "prompt_tokens": len(case.prompt),
    }
    parts = _chunks(case.output, case.cuts)
    sent = parts if case.abort_after is None else parts[: case.abort_after]
    finish = case.finish if len(sent) == len(parts) else "abort"
    records: list[dict[str, Any]] = []
    for k, part in enumerate(sent):
        last = k == len(parts) - 1
        choice = {"index": 0, "token_ids": part, "finish_reason": case.finish if last else None}
        rec: dict[str, Any] = {"request_id": rid, "seq": k, "generate_chunk": {"choices": [choice]}}
        if k == 0:
            rec.update(context, messages_request=dict(case.request, stream=True))
        records.append(rec)
    kind = "abort" if case.abort_after is not None else "end"
    records.append({"request_id": rid, "seq": len(records), "type": kind})
    case.records = records
    stream = Run(registry())
    stream.feed(*records)
    kept = [i for part in sent for i in part]
    whole = Run(registry())
    gen = {"choices": [{"index": 0, "token_ids": kept, "finish_reason": finish}]}
    whole.feed(
        {
            "request_id": rid,
            "seq": 0,
            "type": "response",
            **context,
            "messages_request": case.request,
            "generate_response": gen,
        }
    )
    errors = [o.value for o in stream.outputs + whole.outputs if o.kind == "error"]
    assert not errors, errors
    kinds = [o.kind for o in stream.outputs]
    assert kinds[-1] == "done" and set(kinds[:-1]) == {"chunk"}, kinds
    (response,) = [o.value for o in whole.outputs if o.kind == "response"]
    return [o.value for o in stream.outputs[:-1]], response


def check(case: Case) -> None:
    values, body = run_case(case)
    got = accumulated(values, case.model)
    want = read_whole(body, case.model)
    assert got.model_dump() == want.model_dump()
    events = [json.loads(v) for v in values]
    assert events[0]["type"] == "message_start"
    assert [e["type"] for e in events[-2:]] == ["message_delta", "message_stop"]
    if case.abort_after is not None and want.stop_reason is None:
        return
    if want.stop_reason == "stop_sequence":  # (it ended the output before the engine did)
        assert want.stop_sequence in case.request["stop_sequences"]
        return
    expected = {"stop": ("end_turn", "tool_use"), "length": ("max_tokens",)}
    assert want.stop_reason in expected[case.finish]
    tools = [b for b in want.content if b.type == "tool_use"]
    assert (want.stop_reason == "tool_use") == (bool(tools) and case.finish == "stop"), (
        want.stop_reason,
        tools,
    )


@pytest.mark.parametrize("name", FORMATS)
def test_the_sdk_accumulates_every_messages_stream_to_the_whole_message(name: str) -> None:
    """Every format (each registered reasoning / tool-call parser) and the plain model."""

    @_settings
    @given(case=cases(name))
    def prop(case: Case) -> None:
        check(case)

    prop()


def _record(rid: str, seq: int, **fields: Any) -> dict[str, Any]:
    return {"request_id": rid, "seq": seq, **fields}


def test_a_request_that_fails_mid_stream_ends_with_an_error_event() -> None:
    """A sequence gap fails the request: the stream's last event is `error` (the SDK
    raises it, with our body), and the closing record's request-end marker follows."""
    run = Run(registry())
    head = {"api": "messages", "model": PLAIN, "messages_request": {"max_tokens": 8}}
    chunk = {"choices": [{"index": 0, "token_ids": [19923, 3]}]}
    run.feed(_record("m1", 0, generate_chunk=chunk, **head))
    run.feed(_record("m1", 2, generate_chunk=chunk), _record("m1", 3, type="end"))
    kinds = [o.kind for o in run.outputs]
    assert kinds[-2:] == ["error", "done"]
    error = json.loads(run.outputs[-2].value)
    assert error["type"] == "error" and error["error"]["type"] == "api_error"
    values = [o.value for o in run.outputs if o.kind in ("chunk", "error")]
    sdk = client(sse(values), stream=True)
    with (
        pytest.raises(anthropic.APIStatusError) as raised,
        sdk.messages.stream(model=PLAIN, max_tokens=8, messages=MESSAGES) as s,
    ):
        for _ in s:
            pass
    assert raised.value.body == error


def test_a_refused_whole_request_answers_with_an_error_body() -> None:
    run = Run(registry())
    gen = {"choices": [{"index": 0, "token_ids": [19923], "finish_reason": "stop"}]}
    req = {"max_tokens": 8, "tool_choice": {"type": "sometimes"}}
    run.feed(
        _record(
            "m2",
            0,
            type="response",
            api="messages",
            model=PLAIN,
            messages_request=req,
            generate_response=gen,
        )
    )
    (out,) = run.outputs
    assert out.kind == "error"
    body = json.loads(out.value)
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert "tool_choice" in body["error"]["message"]
    with pytest.raises(anthropic.BadRequestError) as raised:
        client(out.value, stream=False, status=400).messages.create(
            model=PLAIN, max_tokens=8, messages=MESSAGES
        )
    assert raised.value.body == body


def test_replay_is_byte_identical() -> None:
    """The same records give the same bytes (ids, indices), run after run."""
    case = Case(PLAIN, [0], [19923, 3, 15892, 46703, 4050], "stop", {"max_tokens": 8}, [2, 1])
    first, whole_first = run_case(case)
    again, whole_again = run_case(case)
    assert first == again and whole_first == whole_again
    start = json.loads(first[0])["message"]
    assert start["id"] == "msg_sdk" and start["usage"] == {"input_tokens": 1, "output_tokens": 0}
