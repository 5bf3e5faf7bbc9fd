"""`serve`'s POST /v1/messages/derender over real HTTP, read by the official anthropic
SDK: a stream of calls carrying `stream_state`, cut anywhere and ended by the generate
stream's `[DONE]`, accumulates (`MessageStream`) to exactly the whole message to the same
ids; every event validates against the SDK's types; a whole request's error is the API's."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.apis.messages_sdk import accumulated, read_whole
from tests.serve.bodies import PLAIN, REASONED, TOOL_CALL
from tests.serve.conftest import Client, LiveServer
from tests.serve.formats import ANTHROPIC_TOOL, MESSAGES, MESSAGES_REQUEST, body, stream, whole
from tests.support.examples import examples

CASES: list[tuple[str, list[int], dict[str, Any], str, str]] = [
    ("deepseek-v4", REASONED, MESSAGES_REQUEST, "stop", "end_turn"),
    ("deepseek-v4", TOOL_CALL, dict(MESSAGES_REQUEST, tools=[ANTHROPIC_TOOL]), "stop", "tool_use"),
    ("deepseek-v4", REASONED[:9], dict(MESSAGES_REQUEST, max_tokens=9), "length", "max_tokens"),
    ("plain", PLAIN, dict(MESSAGES_REQUEST, model="plain"), "stop", "end_turn"),
    (
        "plain",
        PLAIN,
        dict(MESSAGES_REQUEST, model="plain", stop_sequences=["Kenobi"]),
        "stop",
        "stop_sequence",
    ),
]


@settings(
    max_examples=examples(30),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    case=st.sampled_from(range(len(CASES))),
    sizes=st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=30),
)
def test_streamed_messages_accumulate_to_the_whole_message(
    server: LiveServer, case: int, sizes: list[int]
) -> None:
    model, out, request, finish, reason = CASES[case]
    c = Client(server.port)
    try:
        events = stream(c, MESSAGES, out, sizes, request, rid="msg-1", model=model, finish=finish)
        answer = whole(c, MESSAGES, out, request, rid="msg-1", model=model, finish=finish)
    finally:
        c.close()
    assert events[0]["type"] == "message_start" and events[-1]["type"] == "message_stop"
    got = accumulated([json.dumps(e).encode() for e in events])
    want = read_whole(json.dumps(answer).encode())
    assert got.model_dump() == want.model_dump()
    assert want.stop_reason == reason
    if reason == "stop_sequence":
        assert want.stop_sequence == "Kenobi"
    assert want.usage.output_tokens == len(out)


def test_a_whole_error_is_the_apis(client: Client) -> None:
    """A request the core refuses answers Anthropic's error body with its status."""
    request = dict(MESSAGES_REQUEST, tool_choice={"type": "nonsense"})
    generate = {"request_id": "m-err", "choices": [{"index": 0, "token_ids": REASONED}]}
    status, answer = client.post(MESSAGES, body(MESSAGES, request, generate_response=generate))
    assert status == 400, answer
    assert answer["type"] == "error" and answer["error"]["type"] == "invalid_request_error"


def test_a_failure_mid_stream_is_the_apis_error_event(client: Client) -> None:
    first = body(MESSAGES, MESSAGES_REQUEST, stream=True, stream_state=None)
    first["generate_chunk"] = {"request_id": "m-f", "choices": [{"index": 0, "token_ids": [5]}]}
    status, answer = client.post(MESSAGES, first)
    assert status == 200, answer
    bad = dict(first, stream_state=answer["stream_state"])
    bad["generate_chunk"] = {"request_id": "m-f", "choices": [{"index": 0, "token_ids": [10**9]}]}
    status, failed = client.post(MESSAGES, bad)
    assert status == 200, failed
    assert failed["events"][-1]["type"] == "error"
    assert failed["events"][-1]["error"]["message"]
