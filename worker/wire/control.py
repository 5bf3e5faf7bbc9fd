"""The control topic's record (`--control-topic`): the worker tells the engine to stop
generating a request whose answer is already over. Keyed by `request_id`; the value is
this Struct as JSON. Written by the core (worker/core/records/control.py), read by `Publisher`
(the engine side) and by an engine adapter (docs/integrate/control.md)."""

from __future__ import annotations

from typing import Literal

import msgspec

CONTROL_VERSION = 1

# Why the worker finished the request: a stop string or stop token id fired on every
# choice (`stop`), the request failed (`error`, with its code), or an `abort` record
# closed it (`abort`).
Reason = Literal["stop", "error", "abort"]


class ControlRecord(msgspec.Struct, kw_only=True):
    """Stop generating `request_id`: its answer is over (docs/integrate/control.md)."""

    v: int = CONTROL_VERSION
    request_id: str
    action: Literal["abort"] = "abort"
    reason: Reason
    # The error's code (`sequence_gap`, `invalid_request_error`, …) when reason is error.
    error: str | None = None
    # The input record at which the worker finished the request.
    seq: int
    # Completion tokens the worker had derendered, every choice, up to that record.
    output_tokens: int
