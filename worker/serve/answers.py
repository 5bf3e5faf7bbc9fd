"""`serve`'s answers that are not a derendered body: vLLM's error shape, the checks vLLM
makes before derendering, and the core's error outputs as HTTP answers (ours in vLLM's
shape, the Messages API's in its own)."""

from __future__ import annotations

import msgspec

from worker.core import errors
from worker.serve import wire

# An answer: the HTTP status and the JSON body.
Answer = tuple[int, bytes]

# vLLM 0.33's messages for the checks it makes before derendering (serving.py).
CHAT_REQUEST_REQUIRED = (
    "chat_request is required when a tool or reasoning parser is configured because "
    "plain detokenization would leak raw parser markup into content."
)
PROMPT_IDS_REQUIRED = (
    "prompt_token_ids is required when a tool or reasoning parser is configured. Without "
    "it parse_delta cannot tell whether the prompt left reasoning open (e.g. a chat "
    "template that pre-opens <think>) and would misclassify reasoning content as plain "
    "content."
)

# What msgspec raises on a body it cannot read: bad JSON or a wrong shape, JSON nested
# past its limit (RecursionError), invalid UTF-8 in a string (a ValueError).
UNREADABLE = (msgspec.DecodeError, msgspec.ValidationError, RecursionError, ValueError)

# Our error codes (docs/integrate/contract.md, "Errors") → the HTTP status and vLLM's error `type`.
_STATUS: dict[str, tuple[int, str]] = {
    errors.MODEL_NOT_FOUND: (404, "NotFoundError"),
    errors.INTERNAL_ERROR: (500, "InternalServerError"),
}
_BAD_REQUEST = (400, "BadRequestError")


def error(
    message: str, status: int = 400, kind: str = "BadRequestError", param: str | None = None
) -> Answer:
    """vLLM's error body: `{"error": {"message", "type", "param", "code": <status>}}`."""
    return status, wire.encode(wire.ErrorResponse(wire.ErrorInfo(message, kind, param, status)))


def invalid_body(exc: Exception, param: str | None = None) -> Answer:
    """A body that is not JSON or not the endpoint's shape: 400, as vLLM's validation
    handler answers it (its `type` is the status phrase there)."""
    what = "JSON nested too deeply" if isinstance(exc, RecursionError) else str(exc)
    message = f"{param}: {what}" if param else what
    return error(message, 400, "Bad Request", param)


def missing(field: str) -> Answer:
    return error(f"Field required: `{field}`", 400, "Bad Request", field)


class Refusal(Exception):
    """A request refused before the core sees it; `answer` is the error to send."""

    def __init__(self, answer: Answer) -> None:
        super().__init__(answer[1].decode())
        self.answer = answer


class _OurError(msgspec.Struct):
    message: str
    param: str | None = None
    code: str = errors.INVALID_REQUEST


class _OurErrorBody(msgspec.Struct):
    error: _OurError


_error_decoder = msgspec.json.Decoder(_OurErrorBody)
# An output that is one of the API's events (each begins with its `type`).
EVENT = b'{"type":'


class _ApiError(msgspec.Struct):
    type: str
    message: str


class _ApiErrorBody(msgspec.Struct):
    """The Anthropic Messages API's error: `{"type": "error", "error": {"type", "message"}}`."""

    type: str
    error: _ApiError


_api_error_decoder = msgspec.json.Decoder(_ApiErrorBody)
# The Messages API's error types and their HTTP status (Anthropic's table).
_API_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}


def error_answer(value: bytes) -> Answer:
    """The core's error output as the answer: ours in vLLM's shape, the Messages API's
    error event as its own body with its status."""
    if value.startswith(EVENT):
        try:
            api_error = _api_error_decoder.decode(value)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return error("derender failed", 500, "InternalServerError")
        return _API_STATUS.get(api_error.error.type, 500), value
    try:
        body = _error_decoder.decode(value).error
    except (msgspec.DecodeError, msgspec.ValidationError):
        return error("derender failed", 500, "InternalServerError")
    status, kind = _STATUS.get(body.code, _BAD_REQUEST)
    return error(body.message, status, kind, body.param)
