"""What differs between the gateway's four APIs: where a request is rendered, what its
seq-0 record calls it, how its outputs are framed as SSE, how a stream ends, and the
shape of its errors.

Chat and completions stream `data: <json>` lines and end with `data: [DONE]`; the OpenAI
Responses and Anthropic Messages APIs stream `event: <type>` + `data: <json>` and have
no `[DONE]` (the worker still ends their requests with a `done` output, which ends the
HTTP stream). Errors: vLLM's (OpenAI's) `{"error": {...}}` for the first three;
Anthropic's `{"type": "error", "error": {"type", "message"}}` for Messages, as vLLM's
`/v1/messages` answers (its render endpoint answers OpenAI's shape: the gateway reshapes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from worker.gateway.errors import error_body, error_object

CHAT = "chat"
COMPLETION = "completion"
RESPONSES = "responses"
MESSAGES = "messages"

# Anthropic's error types by HTTP status (its API reference); others are `api_error`.
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_ANTHROPIC_STATUS = {v: k for k, v in _ANTHROPIC_TYPES.items()} | {"api_error": 500}
_EVENT = b'{"type":"'


@dataclass(frozen=True)
class Dialect:
    api: str
    render_path: str
    id_prefix: str
    request_field: str  # the seq-0 record's field holding the client's body
    max_tokens_keys: tuple[str, ...]  # the body's output bound, first given wins
    default_max_tokens: int | None = None  # (completions: vLLM's default, which render drops)

    @property
    def events(self) -> bool:
        """Streams `event:` lines and has no `[DONE]` (Responses, Messages)."""
        return self.api in (RESPONSES, MESSAGES)

    def sse(self, value: bytes) -> bytes:
        """One output's payload as the API's SSE event."""
        if not self.events:
            return b"data: " + value + b"\n\n"
        return b"event: " + event_type(value) + b"\ndata: " + value + b"\n\n"

    def error(self, message: str, status: int, param: str | None = None) -> dict[str, Any]:
        """The API's error body for an error the gateway answers itself."""
        if self.api == MESSAGES:
            kind = _ANTHROPIC_TYPES.get(status, "api_error")
            return {"type": "error", "error": {"type": kind, "message": message}}
        return error_object(message, status, param)

    def error_body(self, message: str, status: int, param: str | None = None) -> bytes:
        if not self.events:
            return error_body(message, status, param)
        return _compact(self.error(message, status, param))

    def reshaped(self, body: bytes) -> bytes:
        """An engine's error answer (vLLM's shape) in this API's shape."""
        if self.api != MESSAGES:
            return body
        try:
            error = json.loads(body)["error"]
            message, status = str(error["message"]), int(error["code"])
        except (ValueError, KeyError, TypeError):
            return body
        return self.error_body(message, status)

    def stream_error(self, message: str, status: int, sequence_number: int) -> bytes:
        """An error after the stream began, as the API's SSE event (chat and completions:
        the error body as a `data:` line, then `[DONE]`, as vLLM ends a failed stream)."""
        if self.api == RESPONSES:
            event: dict[str, Any] = {
                "type": "error",
                "code": error_object(message, status)["error"]["type"],
                "message": message,
                "param": None,
                "sequence_number": sequence_number,
            }
            return self.sse(_compact(event))
        if self.api == MESSAGES:
            return self.sse(self.error_body(message, status))
        return self.sse(self.error_body(message, status)) + b"data: [DONE]\n\n"

    def status_of(self, value: bytes) -> int:
        """The HTTP status of a whole request's error output."""
        try:
            body = json.loads(value)
            if self.api == MESSAGES and body.get("type") == "error":
                return _ANTHROPIC_STATUS.get(body["error"]["type"], 500)
            code = body["error"]["code"]
        except (ValueError, KeyError, TypeError, AttributeError):
            return 400
        return code if isinstance(code, int) and 400 <= code < 600 else 400


def _compact(body: dict[str, Any]) -> bytes:
    """JSON as the worker writes the APIs' events (no spaces: `type` first, as written)."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def event_type(value: bytes) -> bytes:
    """The `type` an event's JSON begins with (the worker writes it first)."""
    if value.startswith(_EVENT):
        end = value.find(b'"', len(_EVENT))
        if end > 0:
            return value[len(_EVENT) : end]
    try:
        return str(json.loads(value).get("type", "message")).encode()
    except (ValueError, AttributeError):
        return b"message"


DIALECTS = {
    CHAT: Dialect(
        CHAT, "/v1/chat/completions/render", "chatcmpl-", "chat_request",
        ("max_completion_tokens", "max_tokens"),
    ),
    COMPLETION: Dialect(
        COMPLETION, "/v1/completions/render", "cmpl-", "completion_request", ("max_tokens",), 16
    ),
    RESPONSES: Dialect(
        RESPONSES, "/v1/responses/render", "resp_", "responses_request", ("max_output_tokens",)
    ),
    MESSAGES: Dialect(
        MESSAGES, "/v1/messages/render", "msg_", "messages_request", ("max_tokens",)
    ),
}  # fmt: skip
