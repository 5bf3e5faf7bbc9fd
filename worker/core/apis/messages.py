"""The Anthropic Messages format: not built yet. Every entry point refuses the request
with one clear error, so a `messages` record fails its request instead of misbehaving."""

from __future__ import annotations

from worker.core.apis.parts import Part
from worker.core.errors import DerenderError
from worker.core.render import Output, error_output
from worker.core.state import FormatState, RequestState
from worker.wire.inbound import ChatRequest, ChunkRecord
from worker.wire.outbound import UsageInfo

_NOT_BUILT = "the messages format is not built"


def chat_request(record: ChunkRecord) -> ChatRequest | None:
    raise DerenderError(_NOT_BUILT, param="api")


def open_format(record: ChunkRecord, req: ChatRequest | None) -> FormatState:
    raise DerenderError(_NOT_BUILT, param="api")


def start(state: RequestState, request_id: str) -> list[Output]:
    raise DerenderError(_NOT_BUILT, param="api")


def piece(state: RequestState, request_id: str, part: Part) -> list[Output]:
    raise DerenderError(_NOT_BUILT, param="api")


def end(state: RequestState, request_id: str, usage: UsageInfo, abort: bool) -> list[Output]:
    raise DerenderError(_NOT_BUILT, param="api")


def whole(state: RequestState, request_id: str, part: Part, usage: UsageInfo) -> Output:
    raise DerenderError(_NOT_BUILT, param="api")


def failed(state: RequestState, request_id: str, exc: DerenderError, whole: bool) -> list[Output]:
    # (Called while a request fails: raising here would fail `fail`. The chat error body.)
    return [error_output(exc)]
