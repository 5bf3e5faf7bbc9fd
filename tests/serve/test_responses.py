"""`serve`'s POST /v1/responses/derender over real HTTP, read by the official openai SDK:
a stream of calls carrying `stream_state`, cut anywhere and ended by the generate
stream's `[DONE]`, accumulates (`client.responses.stream`) to exactly the whole answer
to the same ids; errors and the state's binding."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.serve.bodies import PLAIN, REASONED, TOOL_CALL
from tests.serve.conftest import Client, LiveServer
from tests.serve.contract.contract_calls import message_error
from tests.serve.formats import (
    RESPONSES,
    RESPONSES_REQUEST,
    TOOL,
    body,
    openai_sdk,
    sse,
    stream,
    whole,
)
from tests.support.examples import examples

CASES: list[tuple[str, list[int], dict[str, Any], str]] = [
    ("deepseek-v4", REASONED, RESPONSES_REQUEST, "stop"),
    ("deepseek-v4", TOOL_CALL, dict(RESPONSES_REQUEST, tools=[TOOL]), "stop"),
    ("deepseek-v4", REASONED[:9], dict(RESPONSES_REQUEST, max_output_tokens=9), "length"),
    ("plain", PLAIN, {"model": "plain", "input": "?"}, "stop"),
    ("plain", PLAIN, {"model": "plain", "input": "?", "stop": ["Kenobi"]}, "stop"),
]


def _sdk_final(events: list[dict[str, Any]]) -> Any:
    """The response the SDK's stream ends with (`response.completed`'s or the terminal
    event's: the accumulator builds them from the items it was streamed)."""
    final = None
    with openai_sdk(sse(events), stream=True).responses.stream(model="m", input="?") as s:
        for event in s:
            if event.type in ("response.completed", "response.incomplete", "response.failed"):
                final = event.response
    assert final is not None
    return final


def _items(response: Any) -> list[Any]:
    """The output items as dicts, without what the SDK's stream parses (`parsed`,
    `parsed_arguments`)."""

    def bare(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: bare(v) for k, v in value.items() if k not in ("parsed", "parsed_arguments")}
        if isinstance(value, list):
            return [bare(v) for v in value]
        return value

    return [bare(item.model_dump()) for item in response.output]


def _sdk_whole(answer: dict[str, Any]) -> Any:
    return openai_sdk(json.dumps(answer).encode(), stream=False).responses.create(
        model="m", input="?"
    )


@settings(
    max_examples=examples(30),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    case=st.sampled_from(range(len(CASES))),
    sizes=st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=30),
)
def test_streamed_responses_accumulate_to_the_whole_response(
    server: LiveServer, case: int, sizes: list[int]
) -> None:
    model, out, request, finish = CASES[case]
    c = Client(server.port)
    try:
        events = stream(c, RESPONSES, out, sizes, request, model=model, finish=finish)
        answer = whole(c, RESPONSES, out, request, model=model, finish=finish)
    finally:
        c.close()
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[0]["type"] == "response.created"
    terminal = events[-1]
    assert terminal["type"] in ("response.completed", "response.incomplete")
    # The stream's last response is the whole answer (the clock's second aside).
    got = dict(terminal["response"], created_at=0)
    assert got == dict(answer, created_at=0)
    want = _sdk_whole(answer)
    final = _sdk_final(events)
    assert final.output_text == want.output_text
    assert _items(final) == _items(want)
    assert final.status == want.status == ("incomplete" if finish == "length" else "completed")
    assert want.usage is not None and want.usage.output_tokens == len(out)


def test_tool_call_is_a_function_call_item(client: Client) -> None:
    request = dict(RESPONSES_REQUEST, tools=[TOOL])
    events = stream(client, RESPONSES, TOOL_CALL, [2], request)
    (call,) = [e["item"] for e in events if e["type"] == "response.output_item.done"][1:]
    assert call["type"] == "function_call" and call["name"] == "get_weather"
    assert json.loads(call["arguments"]) == {"location": "杭州", "days": 5}
    deltas = [e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta"]
    assert "".join(deltas) == call["arguments"]


def test_the_end_needs_the_request_id(client: Client) -> None:
    first = stream(
        client, RESPONSES, PLAIN[:2], [2], {"model": "plain", "input": "?"}, model="plain"
    )
    assert first[-1]["type"] == "response.completed"
    call = body(RESPONSES, RESPONSES_REQUEST, stream=True, generate_chunk="[DONE]")
    call["stream_state"] = None
    status, answer = client.post(RESPONSES, call)
    assert status == 400 and "request_id is required" in message_error(answer)


def test_a_state_of_another_endpoint_is_refused(client: Client) -> None:
    generate = {"request_id": "r-x", "choices": [{"index": 0, "token_ids": REASONED[:3]}]}
    call = body(RESPONSES, RESPONSES_REQUEST, stream=True, generate_chunk=generate)
    call["stream_state"] = None
    status, answer = client.post(RESPONSES, call)
    assert status == 200, answer
    state = answer["stream_state"]
    chat = {
        "stream": True,
        "model": "deepseek-v4",
        "generate_chunk": generate,
        "stream_state": state,
        "prompt_token_ids": call["prompt_token_ids"],
        "chat_request": {"messages": []},
    }
    status, refused = client.chat(chat)
    assert status == 400 and "does not belong" in message_error(refused)
    call["stream_state"] = state
    status, answer = client.post(RESPONSES, call)
    assert status == 200 and answer["events"]


def test_the_request_is_required_with_parsers(client: Client) -> None:
    call = body(RESPONSES, RESPONSES_REQUEST, stream=True, generate_chunk={"choices": []})
    del call["responses_request"]
    status, answer = client.post(RESPONSES, call)
    assert status == 400 and "responses_request is required" in message_error(answer)


def test_a_failure_mid_stream_is_the_apis_failed_event(client: Client) -> None:
    """A record the core fails (a token id past the vocabulary) answers 200 with the
    stream's `response.failed` last: a relay forwards it as any other event."""
    first = body(RESPONSES, RESPONSES_REQUEST, stream=True, stream_state=None)
    first["generate_chunk"] = {"request_id": "r-f", "choices": [{"index": 0, "token_ids": [5]}]}
    status, answer = client.post(RESPONSES, first)
    assert status == 200, answer
    bad = dict(first, stream_state=answer["stream_state"])
    bad["generate_chunk"] = {"request_id": "r-f", "choices": [{"index": 0, "token_ids": [10**9]}]}
    status, failed = client.post(RESPONSES, bad)
    assert status == 200, failed
    (event,) = failed["events"]
    assert event["type"] == "response.failed"
    assert event["response"]["status"] == "failed" and event["response"]["error"]["message"]
