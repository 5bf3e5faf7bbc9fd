"""`step(state, record) -> Step`: the whole derender decision for one record, pure and total.

No I/O, no clock, no randomness: the tokenizer and limits arrive in the `Registry`,
`created` comes from the seq-0 record (or its broker timestamp, passed in). The same
state and record always give the same bytes, which is what makes redelivery after a
crash and offline replay safe.

Total: `step` raises nothing. Whatever goes wrong with a record fails its request, always
through `fail`: one `error` output (then `[DONE]` when the record ends the stream) and a
failed state. A bug in the core fails it the same way, with `internal_error`, and hands
the exception back for the caller to log. The shell only routes what a Step holds.

One record is handled in numbered steps:
  1. sequencing: duplicates, gaps, failed and finished requests, missing or corrupt state;
  2. seq 0 opens the request (request.py): model, options, bounds, `created`;
  3. bounds of the record's payload, before any tokenizer work (bounds.py);
  4. the payload: `chunk`, `end`, `abort` (stream.py) or `response` (response.py);
  5. the outputs' size bound; then the new state is encoded, as it must be storable.

Reading order for a newcomer: this module → request → bounds → stream → decode →
response → echo → render.
"""

from __future__ import annotations

import msgspec

from worker.core import apis, errors, render
from worker.core.bounds import output_too_large
from worker.core.errors import DerenderError
from worker.core.model import Registry
from worker.core.records.control import answered
from worker.core.records.echo import echo_chunks
from worker.core.records.request import open_request
from worker.core.records.response import on_response
from worker.core.records.stream import on_chunk, on_end, streamed
from worker.core.render import Output, error_output
from worker.core.state import (
    ACTIVE,
    DONE,
    FAILED,
    UNSTORABLE,
    CorruptState,
    FormatState,
    RequestState,
    encode_state,
)
from worker.core.tables import EMPTY, RequestTables, Tables, TablesMissing
from worker.wire.inbound import ChunkRecord

# The output vocabulary, importable from here as before the core was split (the shell's
# pipeline uses these names).
__all__ = [
    "CHUNK",
    "DONE_KIND",
    "DUPLICATE",
    "ERROR",
    "FAILED_RESULT",
    "OK",
    "RESPONSE",
    "SKIPPED",
    "Output",
    "Step",
    "error_output",
    "fail",
    "step",
    "step_invalid",
]

# Step results, for metrics (the `result` label of derender_records_total).
from worker.constants import CHUNK, DONE_KIND, DUPLICATE, ERROR, OK, RESPONSE, SKIPPED
from worker.constants import FAILED as FAILED_RESULT

# Records that end a stream. A failed request still answers them with `[DONE]`, so a
# client waiting on the stream is released.
_CLOSING = ("end", "abort")


# A msgspec Struct for its C-built `__init__` (one per record). Collected by the gc: an
# internal error's traceback leads back to the frame that holds the Step.
class Step(msgspec.Struct):
    """What one record did to its request."""

    state: RequestState | None  # None: nothing to store (no request was opened)
    outputs: list[Output]
    result: str
    # `encode_state(state)`, made by the storable check: set exactly when the shell must
    # write the state (a state, and any result but DUPLICATE), so it never encodes again.
    blob: bytes | None = None
    # The exception behind an `internal_error` (a core bug, a tokenizer failure), with
    # its traceback, for the caller to log: the core itself does no I/O.
    exception: Exception | None = None
    # The request's tables (core/tables.py) to store beside the state: set by the record
    # that opens a request with any, and written once with that state.
    tables: bytes | None = None
    # The code of the error this record failed its request with (`fail`), else None.
    error: str | None = None


def step(
    state: RequestState | CorruptState | None,
    record: ChunkRecord,
    registry: Registry,
    timestamp_ms: int | None = None,
    state_corrupt: bool = False,
    tables: bytes | Tables | None = None,
) -> Step:
    """Apply one record to its request's state; never raises.

    `state` is the store's verdict on the request (`load_state`): None when nothing is
    stored, the decoded state, or `CorruptState` when the blob does not decode. The
    given state may be changed in place; the returned Step's state is what to store.
    `state_corrupt=True` is the older spelling of passing a `CorruptState`. `tables` is
    the request's tables: compiled (held for the batch) or the stored blob the store
    returned (needed when the registry's cache does not hold them: `TableCache.held`).
    """
    if state_corrupt:
        state = CorruptState()
    closes = record.type in _CLOSING
    # The request as far as it is known, for `fail` to keep its api, model and created.
    known = state if isinstance(state, RequestState) else None
    try:
        # 1) Sequencing. Nearly every record is the next one of a live request: that
        # case is told apart first, without a call.
        if known is None or known.status != ACTIVE or record.seq != known.seq + 1:
            settled = _sequence(state, record, closes)
            if settled is not None:
                return _stored(settled, closes)
        # 2) Open the request (seq 0), or take the record's seq.
        opening = known is None
        if known is None:
            known, tabs = open_request(record, registry, timestamp_ms)
        else:
            known.seq = record.seq
            tabs = _tables(known, tables, registry)
        if registry.tables.uses.get(record.request_id) != tabs.digest:
            registry.tables.note(record.request_id, tabs.digest)
        # (`registry.resolve` without the call: a state's model is always a name)
        model = registry.models.get(known.model)
        if model is None:  # the registry changed under a live request
            raise DerenderError(
                f"The model `{known.model}` does not exist.", errors.MODEL_NOT_FOUND, "model"
            )
        outputs: list[Output] = []
        if opening and known.opts.echo and record.type != "response":
            outputs = echo_chunks(known, record, model)  # the prompt comes first
        # 3) + 4) The payload: its bounds first, then the tokenizer work.
        if record.type == "chunk":
            chunk = record.generate_chunk
            # (the streamed record in one frame; anything else returns None)
            said = None if chunk is None else streamed(known, record.request_id, chunk, model, tabs)
            if said is None:
                said = on_chunk(known, record.request_id, chunk, model, tabs)
            outputs = outputs + said if outputs else said  # (on_chunk's list is its own)
        elif record.type == "response":
            outputs += on_response(known, record, model, tabs)
        else:
            outputs += on_end(known, record.request_id, model, tabs, abort=record.type == "abort")
        # 5) The outputs' size (the state's follows, in `_stored`).
        limit = registry.max_output_bytes
        for o in outputs:
            if len(o.value) > limit:
                raise output_too_large(o, limit)
        if known.fmt is not None and known.fmt.held > limit:
            raise DerenderError(
                f"the {known.api} response so far ({known.fmt.held} bytes) exceeds the output "
                f"size limit (max_output_bytes = {limit} bytes): its last event could not "
                "carry it"
            )
        # A chunk after every choice finished (a stop string fired; the engine goes on
        # until told: worker/core/records/control.py) says nothing and did no tokenizer work.
        result = SKIPPED if not outputs and record.type == "chunk" and answered(known) else OK
        st = Step(known, outputs, result)
        if opening and tabs.blob:
            st.tables = tabs.blob
    except DerenderError as exc:
        st = _fail_record(known, record, exc, closes, timestamp_ms)
    except Exception as exc:  # a bug or a tokenizer failure: fail this request only
        st = _fail_record(known, record, _internal_error(exc), closes, timestamp_ms)
        st.exception = exc
    else:
        # `_stored`'s common case, without the call: the state encodes.
        try:
            st.blob = encode_state(known)
            return st
        except UNSTORABLE:
            pass
    return _stored(st, closes)


def step_invalid(
    state: RequestState | CorruptState | None,
    request_id: str,
    seq: int | None,
    reason: str,
    code: str = errors.INVALID_RECORD,
) -> Step:
    """A record the shell could not read as a ChunkRecord, though it read its request_id.

    `code` is the error's: `invalid_record` for a record that does not match the schema
    (the shell dead-letters it too), `invalid_request_error` for one over a bound (the
    record size limit). With a readable seq that is new, the request is failed as with
    any bad record; without one, only the error is reported (the state is left alone).
    """
    exc = DerenderError(reason, code)
    known = state if isinstance(state, RequestState) else None
    if seq is None:
        return _stored(Step(known, [error_output(exc)], FAILED_RESULT), closes=False)
    if known is not None and seq <= known.seq:
        return Step(known, [], DUPLICATE)
    if known is not None and known.status != ACTIVE:
        known.seq = seq
        return _stored(Step(known, [], SKIPPED), closes=False)
    return fail(known, seq, exc, closes=False, request_id=request_id)


def fail(
    state: RequestState | None,
    seq: int,
    exc: DerenderError,
    *,
    closes: bool,
    reply: int | None = None,
    request_id: str | None = None,
    whole: bool = False,
) -> Step:
    """The one way a request fails: `exc` is reported once, and later records of the
    request are consumed silently.

    The failed state keeps `seq` (the failing record's: it counts as applied, so its
    redelivery is a duplicate) and, when `state` is given, the request's api, model,
    created and reply partition; without one, `reply` (the failing record's own
    `reply_partition`) says where its error goes. `closes` (the record is `end` /
    `abort`): `[DONE]` follows the error and the request is finished. The Step carries
    the failed state's blob. With `request_id`, a Responses or Messages request's error
    is its API's (worker/core/apis/; `whole`: the failing record is a `response`).
    """
    return _stored(_failed(state, seq, exc, closes, reply, request_id, whole), closes)


def _fail_record(
    known: RequestState | None,
    record: ChunkRecord,
    exc: DerenderError,
    closes: bool,
    timestamp_ms: int | None,
) -> Step:
    """`fail` for the record `step` was applying. A seq-0 record of a Responses or
    Messages request that failed before its request opened still gets its API's error:
    a stand-in state carries what the record says."""
    if known is None and record.seq == 0 and record.api in apis.FORMATS:
        created = record.created
        if created is None:
            created = timestamp_ms // 1000 if timestamp_ms is not None else 0
        known = RequestState(
            seq=record.seq,
            api=record.api,
            model=record.model or "",
            created=created,
            reply_partition=record.reply_partition,
            fmt=FormatState(),
        )
    return fail(
        known,
        record.seq,
        exc,
        closes=closes,
        reply=record.reply_partition,
        request_id=record.request_id,
        whole=record.type == "response",
    )


# -- 1) sequencing --------------------------------------------------------------------


def _sequence(
    state: RequestState | CorruptState | None, record: ChunkRecord, closes: bool
) -> Step | None:
    """Where the record stands in its request: a Step when that settles it, None when
    its payload is to be applied."""
    if isinstance(state, CorruptState):
        exc = DerenderError("request state could not be decoded", errors.STATE_CORRUPT)
        return fail(None, record.seq, exc, closes=closes, reply=record.reply_partition)
    if state is None:
        if record.seq > 0:
            exc = DerenderError(
                f"no state for request {record.request_id!r} at seq {record.seq}: "
                "it expired or seq 0 was never seen",
                errors.STATE_MISSING,
                "seq",
            )
            return fail(None, record.seq, exc, closes=closes, reply=record.reply_partition)
        return None
    if record.seq <= state.seq:
        return Step(state, [], DUPLICATE)
    if state.status != ACTIVE:
        state.seq = record.seq
        if state.status == FAILED and closes:
            state.status = DONE
            return Step(state, [render.DONE], SKIPPED)
        return Step(state, [], SKIPPED)
    # (Once every choice is answered the engine side may drop the chunks it was told to
    # stop, `--control-topic`: a gap there is no error.)
    if record.seq > state.seq + 1 and not answered(state):
        exc = DerenderError(
            f"sequence gap: got seq {record.seq}, expected {state.seq + 1}",
            errors.SEQUENCE_GAP,
            "seq",
        )
        return fail(state, record.seq, exc, closes=closes, request_id=record.request_id)
    return None


def _tables(state: RequestState, blob: bytes | Tables | None, registry: Registry) -> Tables:
    """The tables of a live request: cached, or from the stored blob; a state written
    before the tables existed carries its lists inline."""
    if state.tables:
        try:
            return registry.tables.stored(state.tables, blob)
        except TablesMissing as exc:
            raise DerenderError(str(exc), errors.STATE_CORRUPT) from None
    opts, parser = state.opts, state.parser
    if opts.stop or opts.stop_token_ids or (parser is not None and parser.tools):
        tools = parser.tools if parser is not None else []
        return registry.tables.of(RequestTables(opts.stop, opts.stop_token_ids, tools))
    return EMPTY


# -- failures -------------------------------------------------------------------------


def _failed(
    state: RequestState | None,
    seq: int,
    exc: DerenderError,
    closes: bool,
    reply: int | None = None,
    request_id: str | None = None,
    whole: bool = False,
) -> Step:
    if state is not None and state.fmt is not None and request_id is not None:
        outputs = apis.on_failure(state, request_id, exc, whole)
    else:
        outputs = [error_output(exc)]
    # (The reply partition is kept: the error, its [DONE] and the failed request's later
    # outputs go where its other outputs went.)
    failed = RequestState(seq=seq, status=FAILED, reply_partition=reply)
    if closes:
        outputs.append(render.DONE)
        failed.status = DONE
    if state is not None:
        failed.api, failed.model, failed.created = state.api, state.model, state.created
        failed.reply_partition = state.reply_partition
    return Step(failed, outputs, FAILED_RESULT, error=exc.code)


def _stored(st: Step, closes: bool) -> Step:
    """5) The state must be storable: encode it (the Step keeps the blob for the write).

    msgspec's JSON decoder takes integers of any size (`created`, `n`, a choice `index`,
    `stop_token_ids`, …) that msgpack cannot hold; such a record fails its request here
    instead of failing the shell's write for the whole batch.
    """
    state = st.state
    if state is None or st.blob is not None or st.result == DUPLICATE:
        return st
    try:
        st.blob = encode_state(state)
        return st
    except UNSTORABLE as exc:
        reason = DerenderError(f"a number is out of range: {exc}")
    # A bare failed state: the fields `fail` would keep may be the numbers that did not fit.
    failed = _failed(None, state.seq, reason, closes, state.reply_partition)
    assert failed.state is not None
    try:
        failed.blob = encode_state(failed.state)
    except UNSTORABLE:
        # Only the seq itself is left to be out of range (the shell bounds it: MAX_SEQ):
        # there is no state to store, only the error to report.
        failed.state = None
    return failed


def _internal_error(exc: Exception) -> DerenderError:
    message = f"internal error: {type(exc).__name__}: {exc}"
    # The error output must encode, and JSON cannot carry a lone surrogate.
    message = message.encode("utf-8", "backslashreplace").decode("utf-8")
    return DerenderError(message, errors.INTERNAL_ERROR)
