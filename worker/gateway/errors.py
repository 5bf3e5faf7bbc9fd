"""The errors the gateway answers itself, in vLLM's shape: `{"error": {"message", "type",
"param", "code"}}` with the HTTP status as `code`, as vLLM's servers write them (the
official SDKs raise them as `APIError`s, also inside a stream)."""

from __future__ import annotations

import json
from typing import Any

# The `type` vLLM's servers give each status (its create_error_response names).
_TYPES = {
    400: "BadRequestError",
    404: "NotFoundError",
    413: "BadRequestError",
    500: "InternalServerError",
    502: "BadGatewayError",
    503: "ServiceUnavailableError",
    504: "GatewayTimeoutError",
}


def error_object(message: str, status: int, param: str | None = None) -> dict[str, Any]:
    return {
        "error": {
            "message": message,
            "type": _TYPES.get(status, "BadRequestError"),
            "param": param,
            "code": status,
        }
    }


def error_body(message: str, status: int, param: str | None = None) -> bytes:
    return json.dumps(error_object(message, status, param), ensure_ascii=False).encode()


class Refused(Exception):
    """A request answered with an error before anything reached the topic."""

    def __init__(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        super().__init__(body.decode("utf-8", "replace"))
        self.status = status
        self.body = body
        self.content_type = content_type

    @classmethod
    def of(cls, message: str, status: int, param: str | None = None) -> Refused:
        return cls(status, error_body(message, status, param))
