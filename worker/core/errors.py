"""The error codes (docs/integrate/contract.md, "Errors") and the exception that carries
them through the core."""

from __future__ import annotations

INVALID_REQUEST = "invalid_request_error"
MODEL_NOT_FOUND = "model_not_found"
SEQUENCE_GAP = "sequence_gap"
STATE_MISSING = "state_missing"
STATE_CORRUPT = "state_corrupt"
# Records that were not valid ChunkRecords (also dead-lettered by the shell).
INVALID_RECORD = "invalid_record"
# The core failed on a record (a bug or a tokenizer failure, not bad input): the request
# fails, its partition goes on.
INTERNAL_ERROR = "internal_error"
# Every code a request can fail with (the worker counts failures by code from the start).
CODES = (
    INVALID_REQUEST,
    MODEL_NOT_FOUND,
    SEQUENCE_GAP,
    STATE_MISSING,
    STATE_CORRUPT,
    INVALID_RECORD,
    INTERNAL_ERROR,
)


class DerenderError(Exception):
    """A request-level failure: becomes one `error` output and marks the request failed."""

    def __init__(self, message: str, code: str = INVALID_REQUEST, param: str | None = None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.param = param

    @property
    def type(self) -> str:
        # OpenAI's error `type`: everything the worker rejects is a problem with the
        # request's records, never a server fault (those are retried, not reported).
        return "invalid_request_error"
