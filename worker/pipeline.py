"""The batch: decode → (load states) → step each record in order → outputs + state writes.

`process_batch` is synchronous and does no I/O: the shell around it (Kafka + Redis in
`run`, files + memory in `replay`) loads the states it names before, and produces,
saves and commits after. Both shells therefore publish byte-identical records.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

import msgspec

from worker.constants import (
    DLQ,
    H_ERROR,
    H_KIND,
    H_PART,
    H_REQUEST_ID,
    H_SEQ,
    H_SOURCE,
    MAX_SEQ,
    UNKNOWN_SEQ,
)
from worker.core import derender, errors
from worker.core.derender import Output, Step
from worker.core.errors import DerenderError
from worker.core.model import Registry
from worker.core.state import DONE, FAILED, RequestState, decode_state, encode_state
from worker.ports import InRecord, OutRecord, Partition, StateWrite, Stored
from worker.wire.inbound import BadRecord, ChunkRecord, decode_record, read_head
from worker.wire.outbound import DONE as DONE_BYTES

log = logging.getLogger("derender.pipeline")

# The error code of a record the core itself failed on (a bug, not bad input).
INTERNAL_ERROR = "internal_error"

DUPLICATE = derender.DUPLICATE


class Decoded(msgspec.Struct):  # (collected: a BadRecord's traceback can make a cycle)
    record: InRecord
    chunk: ChunkRecord | None
    bad: BadRecord | None
    request_id: str | None  # the chunk's, or the bad record's when it could be read


def _good(rec: InRecord, chunk: ChunkRecord) -> Decoded:
    return Decoded(rec, chunk, None, chunk.request_id)


def _bad(rec: InRecord, bad: BadRecord) -> Decoded:
    return Decoded(rec, None, bad, bad.request_id)


@dataclass
class BatchResult:
    outputs: list[OutRecord] = field(default_factory=list)
    dead_letters: list[OutRecord] = field(default_factory=list)
    writes: dict[str, StateWrite] = field(default_factory=dict)
    # request_id → the partition its records came from (a refused write rewinds it).
    partitions: dict[str, Partition] = field(default_factory=dict)
    results: Counter[str] = field(default_factory=Counter)
    tokens: int = 0


def _seq_or_none(seq: int | None) -> int | None:
    return seq if seq is not None and seq <= MAX_SEQ else None


# msgspec raises more than DecodeError on some bad JSON: RecursionError when it is nested
# deeper than about a thousand levels (even inside a field it would skip), and
# UnicodeDecodeError for invalid UTF-8 inside a string. Uncaught, one such record crashed
# the worker, and again on every restart (its offset was never committed).
_UNDECODABLE = (RecursionError, ValueError)


def _decode(value: bytes, key: str | None) -> ChunkRecord:
    try:
        return decode_record(value, key)
    except _UNDECODABLE as exc:  # (BadRecord itself is no ValueError: it passes through)
        what = "JSON nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise BadRecord(f"invalid ChunkRecord: {what}") from None


def _head(value: bytes) -> tuple[str | None, int | None]:
    try:
        rid, seq = read_head(value)
    except _UNDECODABLE:
        return None, None
    return rid, _seq_or_none(seq)


def decode_batch(records: list[InRecord], max_record_bytes: int) -> list[Decoded]:
    decoded: list[Decoded] = []
    for rec in records:
        if len(rec.value) > max_record_bytes:
            rid, seq = _head(rec.value)
            rid = rid if rid is not None else rec.key
            bad = BadRecord(
                f"record of {len(rec.value)} bytes exceeds the record size limit "
                f"({max_record_bytes} bytes)",
                rid,
                seq,
                # Reported as an error of its request; with no request to name (no readable
                # request_id, no key) it was dropped without a trace: dead-letter it.
                dead_letter=rid is None,
            )
            decoded.append(_bad(rec, bad))
            continue
        try:
            chunk = _decode(rec.value, rec.key)
        except BadRecord as bad:
            bad.seq = _seq_or_none(bad.seq)  # an out-of-range seq is no readable seq
            decoded.append(_bad(rec, bad))
            continue
        if chunk.seq > MAX_SEQ:
            out_of_range = BadRecord(
                f"invalid ChunkRecord: seq {chunk.seq} is out of range (at most {MAX_SEQ})",
                chunk.request_id,
            )
            decoded.append(_bad(rec, out_of_range))
            continue
        decoded.append(_good(rec, chunk))
    return decoded


def batch_request_ids(decoded: list[Decoded]) -> list[str]:
    """The state keys a batch needs, in first-seen order (one load round trip)."""
    seen: dict[str, None] = {}
    for d in decoded:
        rid = d.request_id
        if rid is not None:
            seen.setdefault(rid, None)
    return list(seen)


# Header values that repeat on every output, encoded once.
_PARTS = [str(i).encode() for i in range(8)]
_KINDS: dict[str, bytes] = {}


def _emit(result: BatchResult, request_id: str, seq: str, outputs: list[Output]) -> None:
    rid, seq_b = request_id.encode(), seq.encode()
    for part, o in enumerate(outputs):
        kind = _KINDS.get(o.kind) or _KINDS.setdefault(o.kind, o.kind.encode())
        headers = [
            (H_REQUEST_ID, rid),
            (H_SEQ, seq_b),
            (H_PART, _PARTS[part] if part < len(_PARTS) else str(part).encode()),
            (H_KIND, kind),
        ]
        result.outputs.append(OutRecord(request_id, o.value, headers, o.kind))


def process_batch(
    decoded: list[Decoded],
    stored: Mapping[str, Stored | None],
    registry: Registry,
    epochs: Mapping[Partition, int] | None = None,
) -> BatchResult:
    """Step every record in order against the loaded states; nothing here does I/O.

    Each state write carries the owner epoch of its request's partition (`epochs`, as the
    checkpoint claimed them; 0 where none was claimed)."""
    result = BatchResult()
    partition_of = result.partitions
    owned = epochs or {}
    # request_id → (current state, loaded seq, stored blob undecodable)
    live: dict[str, tuple[RequestState | None, int | None, bool]] = {}
    touched: set[str] = set()
    # request_id → its state's encoding, when the last step that touched it was checked.
    blobs: dict[str, bytes] = {}
    results = result.results
    tokens = 0

    def current(rid: str, partition: Partition) -> tuple[RequestState | None, int | None, bool]:
        if rid in live:
            return live[rid]
        partition_of[rid] = partition
        s = stored.get(rid)
        if s is None:
            entry: tuple[RequestState | None, int | None, bool] = (None, None, False)
        else:
            try:
                entry = (decode_state(s.blob), s.seq, False)
            except (msgspec.DecodeError, msgspec.ValidationError):
                entry = (None, s.seq, True)
        live[rid] = entry
        return entry

    for d in decoded:
        if d.bad is not None:
            bad = d.bad
            if bad.dead_letter:
                result.dead_letters.append(
                    OutRecord(
                        d.record.key or "",
                        d.record.value,
                        [(H_ERROR, bad.reason.encode()), (H_SOURCE, d.record.source.encode())],
                        DLQ,
                    )
                )
                result.results[DLQ] += 1
            if bad.request_id is None:
                continue
            state, loaded, _ = current(bad.request_id, d.record.partition)
            st = derender.step_invalid(state, bad.request_id, bad.seq, bad.reason)
            if not bad.dead_letter:
                # CONTRACT.md §5: a record over a bound (the byte limit) is reported as an
                # `invalid_request_error`; step_invalid's `invalid_record` is for records
                # that do not match the schema (those are dead-lettered).
                st.outputs = [
                    _bound_error(bad.reason) if o.kind == derender.ERROR else o for o in st.outputs
                ]
            seq = str(bad.seq) if bad.seq is not None else UNKNOWN_SEQ
            blobs.pop(bad.request_id, None)
            # A dead-lettered record is counted once, as "dlq" (not again for its error).
            _record(result, live, touched, bad.request_id, st, loaded, seq, bad.dead_letter)
            continue
        rec = d.chunk
        assert rec is not None
        entry = live.get(rec.request_id)
        state, loaded, corrupt = (
            entry if entry is not None else current(rec.request_id, d.record.partition)
        )
        try:
            st = derender.step(state, rec, registry, d.record.timestamp_ms, corrupt)
        except Exception as exc:  # a bug or a tokenizer failure: fail this request only
            st = _internal_error(state, rec, exc)
        if st.state is not None and st.result != DUPLICATE:
            # The state must be storable: msgspec's JSON decoder takes integers of any size
            # (`created`, `n`, a choice `index`, `stop_token_ids`, …) that msgpack cannot
            # hold. Encoding it here (the blob is kept for the write) confines such a record
            # to its request; at the end of the batch it crashed the worker.
            try:
                blobs[rec.request_id] = encode_state(st.state)
            except (OverflowError, msgspec.EncodeError) as exc:
                st = _failed(state, rec, DerenderError(f"a number is out of range: {exc}"))
                assert st.state is not None
                blobs[rec.request_id] = encode_state(st.state)
        chunk = rec.generate_chunk
        if chunk is not None:
            for c in chunk.choices:
                if c.token_ids:
                    tokens += len(c.token_ids)
        # (_record, inlined: this is the path of nearly every record.)
        results[st.result] += 1
        if st.outputs:
            _emit(result, rec.request_id, str(rec.seq), st.outputs)
        live[rec.request_id] = (st.state, loaded, False)
        if st.state is not None and st.result != DUPLICATE:
            touched.add(rec.request_id)
    result.tokens = tokens
    # One encode per request, however many of its records the batch held.
    for rid in touched:
        state, loaded, _ = live[rid]
        assert state is not None
        blob = blobs.get(rid)
        result.writes[rid] = StateWrite(
            rid,
            state.seq,
            blob if blob is not None else encode_state(state),
            state.status == DONE,
            loaded,
            owned.get(partition_of[rid], 0),
        )
    return result


def _bound_error(reason: str) -> Output:
    return derender.error_output(DerenderError(reason, errors.INVALID_REQUEST))


def _internal_error(state: RequestState | None, rec: ChunkRecord, exc: Exception) -> Step:
    """One poison record must not stop its partition: report it and fail the request."""
    log.exception("record %s/%s failed inside the core", rec.request_id, rec.seq)
    err = DerenderError(f"internal error: {type(exc).__name__}: {exc}", INTERNAL_ERROR)
    return _failed(state, rec, err)


def _failed(state: RequestState | None, rec: ChunkRecord, err: DerenderError) -> Step:
    """Report `err` for this record and fail the request (`[DONE]` too at end/abort)."""
    failed = RequestState(seq=rec.seq if state is None else max(rec.seq, state.seq), status=FAILED)
    outputs = [derender.error_output(err)]
    if rec.type in ("end", "abort"):
        outputs.append(Output(derender.DONE_KIND, DONE_BYTES))
        failed.status = DONE
    return Step(failed, outputs, derender.FAILED_RESULT)


def _record(
    result: BatchResult,
    live: dict[str, tuple[RequestState | None, int | None, bool]],
    touched: set[str],
    rid: str,
    st: Step,
    loaded: int | None,
    seq: str,
    counted: bool = False,
) -> None:
    if not counted:
        result.results[st.result] += 1
    _emit(result, rid, seq, st.outputs)
    live[rid] = (st.state, loaded, False)
    if st.state is not None and st.result != derender.DUPLICATE:
        touched.add(rid)


def fail_refused(result: BatchResult, refused: list[OutRecord]) -> list[OutRecord]:
    """The broker refused these outputs for themselves (too large for the topic): their
    requests fail. Returns one `error` output per refused output, in its place (the same
    request, seq and part headers), and turns each request's state write into a failure,
    so its later records are skipped."""
    errors_out: list[OutRecord] = []
    for rec in refused:
        err = DerenderError(
            f"an output of {len(rec.value)} bytes was refused by the broker (larger than "
            "the output topic's max.message.bytes?)",
            errors.INVALID_REQUEST,
        )
        value = derender.error_output(err).value
        headers = [(k, v) for k, v in rec.headers if k != H_KIND] + [(H_KIND, b"error")]
        errors_out.append(OutRecord(rec.key, value, headers, derender.ERROR))
        w = result.writes.get(rec.key)
        if w is not None:
            status = DONE if w.done else FAILED
            blob = encode_state(RequestState(seq=w.seq, status=status))
            result.writes[rec.key] = StateWrite(
                w.request_id, w.seq, blob, w.done, w.expected_seq, w.epoch
            )
    return errors_out
