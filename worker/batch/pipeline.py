"""The batch: decode → (load states) → step each record in order → outputs + state writes.

`process_batch` is synchronous and does no I/O: the shell around it (Kafka + Redis in
`run`, files + memory in `replay`) loads the states it names before, and produces,
saves and commits after. Both shells therefore publish byte-identical records.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

import msgspec

from worker.batch.warm import WarmStates
from worker.constants import (
    CONTROL,
    DLQ,
    ERROR,
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
from worker.core.errors import DerenderError
from worker.core.model import Registry
from worker.core.records.control import control as control_output
from worker.core.records.control import live as still_live
from worker.core.render import Output
from worker.core.state import ACTIVE, DONE, CorruptState, RequestState, load_state
from worker.core.tables import Tables
from worker.ports import InRecord, OutRecord, Partition, StateWrite, Stored
from worker.wire.inbound import BadRecord, ChunkRecord, decode_record, read_head

log = logging.getLogger("derender.pipeline")

DUPLICATE = derender.DUPLICATE

# The process's warm states (batch/warm.py), shared by its lanes: process_batch runs whole
# between two awaits, and a state is reused only for the very bytes it was saved as.
WARM = WarmStates()


class Decoded(msgspec.Struct):  # (collected: a BadRecord's traceback can make a cycle)
    record: InRecord
    chunk: ChunkRecord | None
    bad: BadRecord | None
    request_id: str | None  # the chunk's, or the bad record's when it could be read


def _bad(rec: InRecord, bad: BadRecord) -> Decoded:
    return Decoded(rec, None, bad, bad.request_id)


@dataclass(slots=True)
class BatchResult:
    outputs: list[OutRecord] = field(default_factory=list)
    dead_letters: list[OutRecord] = field(default_factory=list)
    writes: dict[str, StateWrite] = field(default_factory=dict)
    # request_id → the partition its records came from (a refused write rewinds it).
    partitions: dict[str, Partition] = field(default_factory=dict)
    # Records by result (`Step.result`, and "dlq"), in the order first seen, dead letters
    # first. Plain dicts, not Counters: two Counters built and updated per batch were ~5 %
    # of a one-record batch (serve's every POST); the readers only add them up.
    results: dict[str, int] = field(default_factory=dict)
    # Records that failed their request, by error code (`Step.error`,
    # docs/integrate/contract.md, "Errors").
    errors: dict[str, int] = field(default_factory=dict)
    tokens: int = 0


def _seq_or_none(seq: int | None) -> int | None:
    return seq if seq is not None and seq <= MAX_SEQ else None


# msgspec raises more than DecodeError on some bad JSON: RecursionError when it is nested
# deeper than about a thousand levels (even inside a field it would skip), and
# UnicodeDecodeError for invalid UTF-8 inside a string. Uncaught, one such record crashed
# the worker, and again on every restart (its offset was never committed).
_UNDECODABLE = (RecursionError, ValueError)


def _undecodable(exc: RecursionError | ValueError) -> BadRecord:
    what = "JSON nested too deeply" if isinstance(exc, RecursionError) else str(exc)
    return BadRecord(f"invalid ChunkRecord: {what}")


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
            try:
                chunk = decode_record(rec.value, rec.key)
            except _UNDECODABLE as exc:  # (BadRecord is no ValueError: it passes through)
                raise _undecodable(exc) from None
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
        decoded.append(Decoded(rec, chunk, None, chunk.request_id))
    return decoded


def batch_requests(decoded: list[Decoded]) -> dict[str, Partition]:
    """The states a batch needs (one load round trip): request id → the partition its
    records came from, in first-seen order."""
    seen: dict[str, Partition] = {}
    for d in decoded:
        rid = d.request_id
        if rid is not None and rid not in seen:
            seen[rid] = d.record.partition
    return seen


def batch_request_ids(decoded: list[Decoded]) -> list[str]:
    """The state keys a batch needs, in first-seen order."""
    return list(batch_requests(decoded))


# Header values that repeat on every output, encoded once.
_PARTS = [str(i).encode() for i in range(8)]
_KINDS: dict[str, bytes] = {}


def _emit(
    result: BatchResult,
    request_id: str,
    seq: str,
    outputs: list[Output],
    source: Partition,
    carry: tuple[tuple[str, bytes], ...] | None = None,
    reply: int | None = None,
) -> None:
    """`carry`: the input record's trace and --pass-headers headers (`worker.observe.propagation`),
    onto every output it produced. `reply`: the output partition its request names (None:
    the key's)."""
    rid, seq_b = request_id.encode(), seq.encode()
    for part, o in enumerate(outputs):
        kind = _KINDS.get(o.kind) or _KINDS.setdefault(o.kind, o.kind.encode())
        headers = [
            (H_REQUEST_ID, rid),
            (H_SEQ, seq_b),
            (H_PART, _PARTS[part] if part < len(_PARTS) else str(part).encode()),
            (H_KIND, kind),
        ]
        if carry:
            headers += carry
        result.outputs.append(OutRecord(request_id, o.value, headers, o.kind, source, reply))


def process_batch(
    decoded: list[Decoded],
    stored: Mapping[str, Stored | None],
    registry: Registry,
    epochs: Mapping[Partition, int] | None = None,
    offsets: tuple[Mapping[Partition, int], ...] | None = None,
    held: Mapping[str, Tables] | None = None,
    confirm: bool = False,
    control: bool = False,
    warm: WarmStates | None = None,
) -> BatchResult:
    """Step every record in order against the loaded states; nothing here does I/O.

    The core decides what every record produces, failures included (`core.step` is
    total); this only routes: outputs with their headers, dead letters, and one state
    write per touched request, carrying the owner epoch of its partition (`epochs`, as
    the checkpoint claimed them; 0 where none was claimed) and, under exactly-once, the
    first offset of the batch's transaction and the batch's first and last offsets in it
    (`offsets`, per partition: the store keeps the state before the transaction).

    `confirm` (a store that waits for its replicas): a request the batch touched without
    changing its state (every record a duplicate, or skipped) gets its loaded state
    written back unchanged, so that the save waits for the replicas to have it too. The
    state may be one an earlier try of this very batch saved on the master and the
    replicas never acknowledged (the try failed at its WAIT); committing on it unconfirmed
    lost those records when the master died before its replica had them.

    `control` (`--control-topic`): a record that ended a live request before its engine
    did also yields a `control` output (worker/core/records/control.py), after its others.

    `warm`: the states this process saved last, decoded (batch/warm.py; the process's own
    by default): a state loaded back as the very blob saved is not decoded again."""
    warm = WARM if warm is None else warm
    result = BatchResult()
    partition_of = result.partitions
    owned = epochs or {}
    # request_id → (its current state, or the store's verdict on it; the seq it loaded at)
    live: dict[str, tuple[RequestState | CorruptState | None, int | None]] = {}
    # request_id → the encoding of its latest state that must be written (Step.blob)
    blobs: dict[str, bytes] = {}
    # request_id → its tables: compiled, held by this process for the batch (`held`), or
    # the blob the store returned (only where asked for: TableCache.held), and the tables
    # of requests opened in this batch, written once with their state (core/tables.py)
    tables_of: dict[str, bytes | Tables] = dict(held or {})
    opened: dict[str, bytes] = {}
    dead = 0  # dead letters ("dlq" in `results`)
    counts: dict[str, int] = {}  # → `results`
    failed: dict[str, int] = {}  # → `errors`
    tokens = 0

    def current(
        rid: str, partition: Partition
    ) -> tuple[RequestState | CorruptState | None, int | None]:
        entry = live.get(rid)
        if entry is None:
            partition_of[rid] = partition
            s = stored.get(rid)
            entry = live[rid] = (None, None) if s is None else (warm.take(rid, s.blob), s.seq)
            if s is not None and s.tables is not None:
                tables_of[rid] = s.tables
        return entry

    for d in decoded:
        if d.bad is not None:
            bad = d.bad
            if bad.dead_letter:
                result.dead_letters.append(
                    OutRecord(
                        d.record.key or "",
                        d.record.value,
                        [
                            (H_ERROR, bad.reason.encode()),
                            (H_SOURCE, d.record.source.encode()),
                            *(d.record.headers or ()),
                        ],
                        DLQ,
                        d.record.partition,
                    )
                )
                dead += 1
            if bad.request_id is None:
                continue
            rid = bad.request_id
            state, loaded = current(rid, d.record.partition)
            # docs/integrate/contract.md, "Errors": a record over a bound (the byte limit)
            # is reported as an `invalid_request_error`; one that does not match the schema
            # (dead-lettered too) as `invalid_record`.
            code = errors.INVALID_RECORD if bad.dead_letter else errors.INVALID_REQUEST
            was_live = control and still_live(state)
            st = derender.step_invalid(state, rid, bad.seq, bad.reason, code)
            if was_live and bad.seq is not None:
                _stop(st, rid, "invalid", False, state, bad.seq)
            if not bad.dead_letter:  # (a dead letter is counted once, as "dlq")
                counts[st.result] = counts.get(st.result, 0) + 1
            seq = str(bad.seq) if bad.seq is not None else UNKNOWN_SEQ
        else:
            rec = d.chunk
            assert rec is not None
            rid = rec.request_id
            entry = live.get(rid)  # (inline: the request's second record on is the usual case)
            state, loaded = entry if entry is not None else current(rid, d.record.partition)
            was_live = control and still_live(state)
            st = derender.step(
                state, rec, registry, d.record.timestamp_ms, tables=tables_of.get(rid)
            )
            # (A record that ends a request early always says something: its finishing
            # chunk, its error or the [DONE] of an abort.)
            if was_live and st.outputs:
                _stop(st, rid, rec.type, _engine_finished(rec), state, rec.seq)
            if st.tables is not None:
                tables_of[rid] = opened[rid] = st.tables
            if st.exception is not None:  # a bug, or a tokenizer failure: this request only
                log.error(
                    "record %s/%s failed inside the core", rid, rec.seq, exc_info=st.exception
                )
                st.exception = None  # (its traceback holds frames: let them go)
            chunk = rec.generate_chunk
            if chunk is not None:
                for c in chunk.choices:
                    if c.token_ids:
                        tokens += len(c.token_ids)
            counts[st.result] = counts.get(st.result, 0) + 1
            seq = str(rec.seq)
        if st.error is not None:
            failed[st.error] = failed.get(st.error, 0) + 1
        if st.outputs:
            # (Routed by the state the step left: a failed request keeps its reply partition.)
            after = st.state
            reply = after.reply_partition if after is not None else None
            _emit(result, rid, seq, st.outputs, partition_of[rid], d.record.headers, reply)
        if st.result != DUPLICATE:
            live[rid] = (st.state, loaded)
        if st.blob is not None:
            blobs[rid] = st.blob
    result.tokens = tokens
    if dead:  # (dead letters first; a step's result is never "dlq": constants.py)
        counts = {DLQ: dead, **counts}
    result.results = counts
    result.errors = failed
    if confirm:
        for rid, (state, _) in live.items():
            s = stored.get(rid)
            if rid not in blobs and s is not None and isinstance(state, RequestState):
                blobs[rid] = s.blob
    # One write per request, however many of its records the batch held: its last state.
    for rid, blob in blobs.items():
        state, loaded = live[rid]
        if not isinstance(state, RequestState):  # (nothing the core could stand behind)
            continue
        partition = partition_of[rid]
        since, first, last = (
            (o[partition] for o in offsets) if offsets is not None else (-1, -1, -1)
        )
        result.writes[rid] = StateWrite(
            rid,
            state.seq,
            blob,
            state.status == DONE,
            loaded,
            owned.get(partition, 0),
            first,
            last,
            opened.get(rid, b""),
            since,
        )
        if state.status == ACTIVE:  # (its next records come in a later batch)
            warm.keep(rid, blob, state)
    return result


def _stop(
    st: derender.Step,
    rid: str,
    record_type: str,
    engine_finished: bool,
    before: RequestState | CorruptState | None,
    seq: int,
) -> None:
    """Append the control output, if the record ended its live request early."""
    c = control_output(rid, record_type, engine_finished, before, st.state, seq, st.error)
    if c is not None:
        st.outputs = [*st.outputs, c]  # (a Step's list may be shared: render.DONE's)


def _engine_finished(rec: ChunkRecord) -> bool:
    """The engine itself finished every choice this record carries."""
    chunk = rec.generate_chunk
    return (
        chunk is not None
        and bool(chunk.choices)
        and all(c.finish_reason is not None for c in chunk.choices)
    )


def fail_refused(
    result: BatchResult, refused: list[OutRecord], control: bool = False
) -> list[OutRecord]:
    """The broker refused these outputs for themselves (too large for the topic): their
    requests fail (`core.fail`). Returns one `error` output per refused output, in its
    place (the same request, seq and part headers), and turns each request's state write
    into the failed state, so its later records are skipped. With `control`, a request
    still live gets its control output too (once: not if the batch already stopped it)."""
    errors_out: list[OutRecord] = []
    stopped = {o.key for o in result.outputs if o.kind == CONTROL} if control else set()
    for rec in refused:
        err = DerenderError(
            f"an output of {len(rec.value)} bytes was refused by the broker (larger than "
            "the output topic's max.message.bytes?)",
            errors.INVALID_REQUEST,
        )
        w = result.writes.get(rec.key)
        seq = w.seq if w is not None else int(dict(rec.headers).get(H_SEQ, b"0"))
        st = derender.fail(None, seq, err, closes=w is not None and w.done, reply=rec.partition)
        (error,) = [o for o in st.outputs if o.kind == ERROR]
        headers = [(k, v) for k, v in rec.headers if k != H_KIND] + [(H_KIND, ERROR.encode())]
        errors_out.append(
            OutRecord(rec.key, error.value, headers, ERROR, rec.source_partition, rec.partition)
        )
        if control and w is not None and not w.done and rec.key not in stopped:
            stopped.add(rec.key)
            before = load_state(w.blob)
            c = control_output(rec.key, "chunk", False, before, st.state, seq, st.error)
            if c is not None:
                headers = [(k, v) for k, v in headers if k != H_KIND] + [(H_KIND, c.kind.encode())]
                errors_out.append(
                    OutRecord(rec.key, c.value, headers, CONTROL, rec.source_partition)
                )
        if w is not None and st.blob is not None:
            result.writes[rec.key] = StateWrite(
                w.request_id,
                w.seq,
                st.blob,
                w.done,
                w.expected_seq,
                w.epoch,
                w.first_offset,
                w.last_offset,
                since_offset=w.since_offset,
            )
    return errors_out
