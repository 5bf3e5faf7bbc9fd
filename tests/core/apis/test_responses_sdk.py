"""The official `openai` SDK as the oracle of the Responses format.

Each generated case (cases.py: every registered reasoning / tool-call format and a plain
model with stop strings; random chunkings, `length` finishes, aborts) is streamed and
answered whole through the one loop, and:

- every event validates against the SDK's own `ResponseStreamEvent` union, numbered
  0, 1, 2, … by `sequence_number`;
- the SDK reads the stream as a gateway serves it (`event:` + `data:` lines, through
  `client.responses.stream()`, whose `ResponseStreamState` accumulates it and raises on
  any inconsistency), and the texts and arguments it accumulated from the deltas are
  exactly the whole response's;
- the stream's terminal event carries exactly the whole response (stream equals whole),
  which the SDK reads as its `Response`; `get_final_response()` succeeds on a completed
  stream;
- the whole response says what the chat API says for the same tokens: reasoning, text,
  tool calls (ids, names, arguments), the finish as a status, usage.
"""

from __future__ import annotations

import itertools
import json
import typing
from typing import Any

import httpx2
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from openai.types.responses import Response, ResponseStreamEvent

from tests.core.apis.cases import Answers, cases, run
from tests.core.parsers.shared.samples import SETUPS
from tests.core.sdk.sdk_cases import PLAIN, Case
from tests.support.examples import examples

# The SDK's event types by their `type` (its union is discriminated by the SDK itself).
EVENTS: dict[str, Any] = {
    typing.get_args(m.model_fields["type"].annotation)[0]: m
    for m in typing.get_args(typing.get_args(ResponseStreamEvent)[0])
}
_settings = settings(
    max_examples=examples(12),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def sse(values: list[bytes]) -> bytes:
    """The SSE body a gateway writes: `event: <type>` and `data: <value>` per event, and
    nothing for the request-end marker (the Responses API has no `[DONE]`)."""
    body = b""
    for v in values[:-1]:
        body += b"event: " + json.loads(v)["type"].encode() + b"\ndata: " + v + b"\n\n"
    return body


def client(body: bytes, stream: bool) -> openai.OpenAI:
    media = "text/event-stream" if stream else "application/json"

    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": media}, content=body)

    return openai.OpenAI(
        api_key="test",
        base_url="http://derender.test/v1",
        http_client=httpx2.Client(transport=httpx2.MockTransport(answer)),
    )


def check(case: Case, answers: Answers) -> None:
    values = answers.stream[:-1]  # (the last is the request-end marker)
    raw = [json.loads(v) for v in values]
    for k, event in enumerate(raw):
        EVENTS[event["type"]].model_validate(event)
        assert event["sequence_number"] == k
    assert [e["type"] for e in raw[:2]] == ["response.created", "response.in_progress"]
    terminal = raw[-1]
    whole = json.loads(answers.whole)
    streamed = terminal["response"]
    # Stream equals whole, items in the model's order both ways (a format that writes
    # text after its calls, as Muse's frames do, has its message item after them).
    assert streamed == whole
    assert all(e["type"] not in _TERMINAL for e in raw[:-1])

    # The SDK reads the stream and accumulates it.
    texts: dict[str, str] = {}
    args: dict[str, str] = {}
    with client(sse(answers.stream), True).responses.stream(model=case.model, input="?") as s:
        for event in s:
            if event.type == "response.output_text.delta":
                texts[event.item_id] = event.snapshot
            elif event.type == "response.function_call_arguments.delta":
                args[event.item_id] = event.snapshot
        if terminal["type"] == "response.completed":
            final = s.get_final_response()
            assert final.id == whole["id"] and len(final.output) == len(whole["output"])
    got = client(answers.whole, False).responses.create(model=case.model, input="?")
    assert isinstance(got, Response)
    assert got.model_dump(mode="json", exclude_none=True) == Response.model_validate(
        whole
    ).model_dump(mode="json", exclude_none=True)

    # The deltas add up to the whole response's texts and arguments.
    reasoning_deltas: dict[str, str] = {}
    for e in raw:
        if e["type"] == "response.reasoning_text.delta":
            reasoning_deltas[e["item_id"]] = reasoning_deltas.get(e["item_id"], "") + e["delta"]
    for item in streamed["output"]:
        if item["type"] == "message":
            assert texts.get(item["id"], "") == item["content"][0]["text"]
        elif item["type"] == "function_call":
            assert args.get(item["id"], "") == item["arguments"]
        else:
            assert reasoning_deltas.get(item["id"], "") == item["content"][0]["text"]
    check_semantics(whole, json.loads(answers.chat))


_TERMINAL = ("response.completed", "response.incomplete", "response.failed")


def check_semantics(whole: dict[str, Any], chat: dict[str, Any]) -> None:
    """The Responses answer says what the chat answer says."""
    (choice,) = chat["choices"]
    message = choice["message"]
    output = whole["output"]
    kinds = [item["type"] for item in output]
    reasoning = "".join(i["content"][0]["text"] for i in output if i["type"] == "reasoning")
    text = "".join(i["content"][0]["text"] for i in output if i["type"] == "message")
    calls = [
        (i["call_id"], i["name"], i["arguments"])
        for i in whole["output"]
        if i["type"] == "function_call"
    ]
    chat_reasoning = message.get("reasoning") or message.get("reasoning_content") or ""
    assert reasoning == chat_reasoning
    assert text == (message["content"] or "")
    assert calls == [
        (c["id"], c["function"]["name"], c["function"]["arguments"])
        for c in message.get("tool_calls") or []
    ]
    # A run of reasoning or of text is one item: two such items never follow each other.
    assert all(a != b or a == "function_call" for a, b in itertools.pairwise(kinds))
    finish = choice["finish_reason"]
    if finish == "length":
        assert whole["status"] == "incomplete"
        assert whole["incomplete_details"] == {"reason": "max_output_tokens"}
    elif finish == "abort":
        assert whole["status"] == "incomplete" and whole["incomplete_details"] is None
    else:
        assert whole["status"] == "completed" and whole["incomplete_details"] is None
    usage = chat["usage"]
    assert (whole["usage"]["input_tokens"], whole["usage"]["output_tokens"]) == (
        usage["prompt_tokens"],
        usage["completion_tokens"],
    )


@pytest.mark.parametrize("name", [PLAIN, *sorted(SETUPS)])
def test_the_sdk_reads_every_format(name: str) -> None:
    @_settings
    @given(cases(name))
    def prop(case: Case) -> None:
        check(case, run(case))

    prop()
