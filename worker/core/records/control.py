"""When the worker has finished a request before its engine has: the early-stop rule.

In the tokens-only path the engine does not see stop strings (vLLM refuses `stop` there),
so it generates to `max_tokens` after a stop string fired in the worker, and after the
request failed in the worker. With a control topic the worker says so, once per request,
at the record where its answer ended (`ControlRecord`):

- `stop`: a `chunk` record left every requested choice finished, and the engine had not
  finished them all in that record (a stop string or stop token id fired here). With
  `n` > 1, a request whose last choice the engine finished while the worker had stopped
  others earlier gets none (a per-choice abort is not something engines take);
- `error`: the record failed a live request (any reason: bounds, a bad record, an output
  over `--max-output-bytes`, a corrupt or missing state, a gap);
- `abort`: an `abort` record closed a live request.

An `end` or a whole `response` record is the engine's own end: never a control record.
Pure, like the rest of the core: the same state and record give the same bytes, so
`replay` and a redelivered batch say the same thing.
"""

from __future__ import annotations

import msgspec

from worker.constants import CONTROL
from worker.core.render import Output
from worker.core.state import ACTIVE, FAILED, CorruptState, RequestState
from worker.wire.control import ControlRecord, Reason

_encode = msgspec.json.Encoder().encode


def answered(state: RequestState | CorruptState | None) -> bool:
    """Every requested choice of a live request has finished (engine or stop)."""
    if not isinstance(state, RequestState) or state.status != ACTIVE:
        return False
    choices = state.choices
    return len(choices) >= state.opts.n and all(c.done for c in choices)


def live(state: RequestState | CorruptState | None) -> bool:
    """The engine may still be generating it: not finished, failed or answered. Read
    before the record is applied (the step changes the state in place)."""
    if state is None:
        return True  # seq 0 opens it; a later seq without a state fails it (still live)
    if isinstance(state, CorruptState):
        return True
    return state.status == ACTIVE and not answered(state)


def control(
    request_id: str,
    record_type: str,
    engine_finished: bool,
    before: RequestState | CorruptState | None,
    after: RequestState | None,
    seq: int,
    error: str | None,
) -> Output | None:
    """The control output for a record applied to a live request (`live`, asked before
    the step), if it ended that request early. `before` is the
    state object the record was applied to, `after` the step's state, `error` the code of
    the error the step reported (None when it reported none)."""
    if record_type in ("end", "response"):
        return None
    reason: Reason
    if after is not None and after.status == FAILED and error is not None:
        reason = "error"
    elif record_type == "abort":
        reason = "abort"
    elif record_type == "chunk" and not engine_finished and answered(after):
        reason = "stop"
    else:
        return None
    tokens = _tokens(after) or _tokens(before)
    value = ControlRecord(
        request_id=request_id,
        reason=reason,
        error=error if reason == "error" else None,
        seq=seq,
        output_tokens=tokens,
    )
    return Output(CONTROL, _encode(value))


def _tokens(state: RequestState | CorruptState | None) -> int:
    if not isinstance(state, RequestState):
        return 0
    return sum(c.tokens for c in state.choices)
