"""The batch: decode → (load states) → step each record in order → outputs + state writes.

`process_batch` is synchronous and does no I/O: the shell around it (Kafka + Redis in
`run`, files + memory in `replay`) loads the states it names before, and produces,
saves and commits after. Both shells therefore publish byte-identical records.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field

import msgspec

from worker.core import derender
from worker.core.derender import Output, Step
from worker.core.errors import DerenderError
from worker.core.model import Registry
from worker.core.state import DONE, FAILED, RequestState, decode_state, encode_state
from worker.wire.inbound import BadRecord, ChunkRecord, decode_record, read_head
from worker.wire.outbound import DONE as DONE_BYTES

log = logging.getLogger("derender.pipeline")

# The error code of a record the core itself failed on (a bug, not bad input).
INTERNAL_ERROR = "internal_error"

# Output record headers (CONTRACT.md §3).
H_REQUEST_ID = "derender-request-id"
H_SEQ = "derender-seq"
H_PART = "derender-part"
H_KIND = "derender-kind"
# Dead-letter headers.
H_ERROR = "derender-error"
H_SOURCE = "derender-source"
# `derender-seq` of outputs for a record whose seq could not be read.
UNKNOWN_SEQ = "-1"

# A record larger than this is refused before it is parsed (CONTRACT.md §5 bounds).
# Kafka's default max.message.bytes is 1 MiB; a whole non-streaming response with
# logprobs can be larger, so the default leaves headroom. Configurable.
DEFAULT_MAX_RECORD_BYTES = 8 * 1024 * 1024


@dataclass(slots=True)
class InRecord:
    value: bytes
    key: str | None = None
    timestamp_ms: int | None = None
    source: str = ""  # topic/partition/offset, or file:line, for dead letters and logs


@dataclass(slots=True)
class OutRecord:
    key: str
    value: bytes
    headers: list[tuple[str, bytes]]
    kind: str


@dataclass(slots=True)
class Stored:
    """A state as read from the store: its seq (kept beside the blob for compare-and-set)."""

    seq: int
    blob: bytes


@dataclass(slots=True)
class StateWrite:
    request_id: str
    seq: int
    blob: bytes
    done: bool  # a tombstone: short TTL
    expected_seq: int | None  # the seq it was loaded at (None: there was none)
    epoch: int = 0  # the writer's owner epoch for the record's partition (set by the shell)


@dataclass(slots=True)
class Decoded:
    record: InRecord
    chunk: ChunkRecord | None
    bad: BadRecord | None

    @property
    def request_id(self) -> str | None:
        if self.chunk is not None:
            return self.chunk.request_id
        return self.bad.request_id if self.bad is not None else None


@dataclass
class BatchResult:
    outputs: list[OutRecord] = field(default_factory=list)
    dead_letters: list[OutRecord] = field(default_factory=list)
    writes: dict[str, StateWrite] = field(default_factory=dict)
    results: Counter[str] = field(default_factory=Counter)
    tokens: int = 0


def decode_batch(records: list[InRecord], max_record_bytes: int) -> list[Decoded]:
    decoded: list[Decoded] = []
    for rec in records:
        if len(rec.value) > max_record_bytes:
            rid, seq = read_head(rec.value)
            bad = BadRecord(
                f"record of {len(rec.value)} bytes exceeds the record size limit "
                f"({max_record_bytes} bytes)",
                rid if rid is not None else rec.key,
                seq,
                dead_letter=False,
            )
            decoded.append(Decoded(rec, None, bad))
            continue
        try:
            decoded.append(Decoded(rec, decode_record(rec.value, rec.key), None))
        except BadRecord as bad:
            decoded.append(Decoded(rec, None, bad))
    return decoded


def batch_request_ids(decoded: list[Decoded]) -> list[str]:
    """The state keys a batch needs, in first-seen order (one load round trip)."""
    seen: dict[str, None] = {}
    for d in decoded:
        rid = d.request_id
        if rid is not None:
            seen.setdefault(rid, None)
    return list(seen)


def _headers(request_id: str, seq: str, part: int, kind: str) -> list[tuple[str, bytes]]:
    return [
        (H_REQUEST_ID, request_id.encode()),
        (H_SEQ, seq.encode()),
        (H_PART, str(part).encode()),
        (H_KIND, kind.encode()),
    ]


def _emit(result: BatchResult, request_id: str, seq: str, outputs: list[Output]) -> None:
    for part, o in enumerate(outputs):
        result.outputs.append(
            OutRecord(request_id, o.value, _headers(request_id, seq, part, o.kind), o.kind)
        )


def process_batch(
    decoded: list[Decoded], stored: dict[str, Stored | None], registry: Registry
) -> BatchResult:
    """Step every record in order against the loaded states; nothing here does I/O."""
    result = BatchResult()
    # request_id → (current state, loaded seq, stored blob undecodable)
    live: dict[str, tuple[RequestState | None, int | None, bool]] = {}
    touched: set[str] = set()

    def current(rid: str) -> tuple[RequestState | None, int | None, bool]:
        if rid in live:
            return live[rid]
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
                        "dlq",
                    )
                )
                result.results["dlq"] += 1
            if bad.request_id is None:
                continue
            state, loaded, _ = current(bad.request_id)
            st = derender.step_invalid(state, bad.request_id, bad.seq, bad.reason)
            seq = str(bad.seq) if bad.seq is not None else UNKNOWN_SEQ
            _record(result, live, touched, bad.request_id, st, loaded, seq)
            continue
        rec = d.chunk
        assert rec is not None
        state, loaded, corrupt = current(rec.request_id)
        try:
            st = derender.step(state, rec, registry, d.record.timestamp_ms, corrupt)
        except Exception as exc:  # a bug or a tokenizer failure: fail this request only
            st = _internal_error(state, rec, exc)
        if rec.generate_chunk is not None:
            for c in rec.generate_chunk.choices:
                result.tokens += len(c.token_ids or ())
        _record(result, live, touched, rec.request_id, st, loaded, str(rec.seq))
    # One encode per request, however many of its records the batch held.
    for rid in touched:
        state, loaded, _ = live[rid]
        assert state is not None
        result.writes[rid] = StateWrite(
            rid, state.seq, encode_state(state), state.status == DONE, loaded
        )
    return result


def _internal_error(state: RequestState | None, rec: ChunkRecord, exc: Exception) -> Step:
    """One poison record must not stop its partition: report it and fail the request."""
    log.exception("record %s/%s failed inside the core", rec.request_id, rec.seq)
    err = DerenderError(f"internal error: {type(exc).__name__}: {exc}", INTERNAL_ERROR)
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
) -> None:
    result.results[st.result] += 1
    _emit(result, rid, seq, st.outputs)
    live[rid] = (st.state, loaded, False)
    if st.state is not None and st.result != derender.DUPLICATE:
        touched.add(rid)
