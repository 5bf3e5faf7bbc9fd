"""What the gateway's four APIs differ in (worker/gateway/dialects.py): SSE framing, the
stream's end, error shapes, checked against the official SDKs' types."""

from __future__ import annotations

import json

import pytest
from anthropic.types import ErrorResponse as AnthropicErrorResponse
from openai.types.responses import ResponseErrorEvent

from worker.gateway.dialects import CHAT, DIALECTS, MESSAGES, RESPONSES, event_type
from worker.gateway.requests import context, max_tokens


def test_chat_keeps_data_lines_and_done() -> None:
    chat = DIALECTS[CHAT]
    assert chat.sse(b'{"id":"x"}') == b'data: {"id":"x"}\n\n'
    assert chat.stream_error("boom", 502, 0).endswith(b"data: [DONE]\n\n")
    assert chat.reshaped(b'{"error":{"message":"m","code":404}}') == (
        b'{"error":{"message":"m","code":404}}'
    )


@pytest.mark.parametrize("api", [RESPONSES, MESSAGES])
def test_events_name_their_type_and_have_no_done(api: str) -> None:
    d = DIALECTS[api]
    value = b'{"type":"response.output_text.delta","delta":"hi"}'
    assert d.sse(value) == b"event: response.output_text.delta\ndata: " + value + b"\n\n"
    assert event_type(b'{"delta": "x", "type": "message_delta"}') == b"message_delta"
    assert b"[DONE]" not in d.stream_error("boom", 504, 3)


def test_responses_error_event_is_the_sdks() -> None:
    frame = DIALECTS[RESPONSES].stream_error("no output", 504, 7).decode()
    head, data = frame.strip().split("\n")
    assert head == "event: error"
    event = ResponseErrorEvent.model_validate(json.loads(data[len("data: ") :]))
    assert (event.sequence_number, event.message) == (7, "no output")


def test_messages_errors_are_anthropics() -> None:
    d = DIALECTS[MESSAGES]
    reshaped = json.loads(d.reshaped(b'{"error":{"message":"no model","type":"x","code":404}}'))
    err = AnthropicErrorResponse.model_validate(reshaped)
    assert (err.error.type, err.error.message) == ("not_found_error", "no model")
    assert d.status_of(json.dumps(reshaped).encode()) == 404
    assert json.loads(d.error_body("down", 502))["error"]["type"] == "api_error"
    frame = d.stream_error("down", 502, 0).decode()
    assert frame.startswith("event: error\ndata: ")
    AnthropicErrorResponse.model_validate_json(frame.split("data: ", 1)[1])


def test_each_apis_request_field_and_output_bound() -> None:
    rendered = {"token_ids": [1, 2]}
    assert "responses_request" in context(RESPONSES, {"input": "x"}, rendered, 0, None)
    assert "messages_request" in context(MESSAGES, {"messages": []}, rendered, 0, None)
    assert max_tokens(RESPONSES, {"max_output_tokens": 7, "max_tokens": 9}) == 7
    assert max_tokens(MESSAGES, {"max_tokens": 9}) == 9
    assert max_tokens("completion", {}) == 16
    assert max_tokens("completion", {"max_tokens": None}) is None
