"""The one batch loop: `run` (per lane), `replay` and the tests all call `run_batch`.

Per batch, in this order (docs/integrate/contract.md, "Guarantees", "State"):
  1. decode every record (bad ones are dead-lettered, never crash the partition);
  2. claim owner epochs for partitions new to us (`Checkpoint.claim`), then load every
     state the batch needs: one store round trip;
  3. step the core over the records, in order (pure, no I/O: `pipeline.process_batch`);
  4. produce all outputs and dead letters, and await every ack; an output the broker
     refuses for itself fails its request (an `error` output takes its place);
  5. save every state: one round trip, compare-and-set on seq and owner epoch;
  6. commit `offset + 1` per partition (`Checkpoint.commit`; in `run` the commit runs in
     the background while the lane polls on: `checkpoint.Behind` at-least-once, the
     transactions' `track` exactly-once).
A crash anywhere before 6 redelivers the batch; the seq check then turns what was already
applied into no-ops and the rest produces the same bytes again. Errors are raised to the
driver, which decides (`failures.classify`) whether to rewind and retry or to stop.

Only the adapters differ between drivers: Kafka and Redis in `run`, files and
`MemoryStore` in `replay`, lists and `MemoryStore` in the tests.

In `run` every step that waits on a server is bounded (`step_timeout_s`): a client that
stalls (seen for two minutes after a broker restart) raises `StepTimeout`, an outage like
any other, instead of holding the batch, its lane and a SIGTERM for as long as it likes.
Before each step that touches something shared, the checkpoint checks that the batch's
partitions were not revoked meanwhile (`Checkpoint.fence`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from worker.batch.checkpoint import Checkpoint
from worker.batch.pipeline import (
    BatchResult,
    batch_requests,
    decode_batch,
    fail_refused,
    process_batch,
)
from worker.batch.steps import within
from worker.batch.warm import WarmStates
from worker.constants import DLQ
from worker.core.model import Registry
from worker.core.tables import Tables
from worker.ports import (
    Batch,
    InRecord,
    OutputsRefused,
    Partition,
    Sink,
    StateWrite,
)

log = logging.getLogger("derender.worker")

T = TypeVar("T")


class Observer(Protocol):
    """What the loop reports as it goes (the worker's metrics; nothing in replay)."""

    def stage(self, name: str, seconds: float) -> None: ...
    def round_trip(self, kind: str, count: int = 1) -> None: ...
    def delivered(self, records: list[InRecord]) -> None: ...
    def saved(self, writes: list[StateWrite], refused: int) -> None: ...


class Silent:
    def stage(self, name: str, seconds: float) -> None:
        pass

    def round_trip(self, kind: str, count: int = 1) -> None:
        pass

    def delivered(self, records: list[InRecord]) -> None:
        pass

    def saved(self, writes: list[StateWrite], refused: int) -> None:
        pass


SILENT = Silent()


def _no_clock() -> float:
    return 0.0


def _round_trips(store: object) -> int:
    """Round trips of the store's last call in this task (RedisStore.last_round_trips:
    per task, as lanes share the store), else 1."""
    return int(getattr(store, "last_round_trips", 1)) or 1


@dataclass(slots=True)
class BatchReport:
    result: BatchResult
    writes: list[StateWrite]
    refused: list[str]  # request ids whose state write was refused
    rewound: list[Partition]  # partitions not committed because of them
    records: int


async def run_batch(
    batch: Batch,
    *,
    registry: Registry,
    sink: Sink,
    checkpoint: Checkpoint,
    max_record_bytes: int,
    observer: Observer = SILENT,
    step_timeout_s: float | None = None,
    control: bool = False,
    warm: WarmStates | None = None,
) -> BatchReport:
    """Steps 1–6 above for one batch. `control`: requests ended early also get a
    `control` output (`--control-topic`; the sink routes it). `warm`: the decoded states
    to reuse (batch/warm.py; None: the process's own)."""
    limit = step_timeout_s
    # Nothing is reported to SILENT (serve, replay), so nothing is measured for it either:
    # seven clock reads and ten calls were ~5 % of the loop's own cost in a one-record batch.
    observed = observer is not SILENT
    clock = time.perf_counter if observed else _no_clock
    t0 = clock()
    # 1) decode
    decoded = decode_batch(batch.records, max_record_bytes)
    t1 = clock()
    if observed:
        observer.stage("decode", t1 - t0)
    # 2) owner epochs (only after an assignment), then every state: one round trip
    epochs, claimed = await within(checkpoint.claim(batch), limit, "claim")
    if observed:
        for _ in range(claimed):
            observer.round_trip("claim_epoch")
    requests = batch_requests(decoded)
    # The requests' tables ride along only where this process does not hold them (those
    # it holds are kept for the batch: the cache may evict while the batch runs).
    held: dict[str, Tables] = {}
    unheld: set[str] = set()
    for rid in requests:
        if (t := registry.tables.held(rid)) is not None:
            held[rid] = t
        else:
            unheld.add(rid)
    stored = await within(checkpoint.load(batch, requests, unheld), limit, "load")
    if observed:
        # One per batch on one Redis; in a cluster one per master the batch's keys live on.
        observer.round_trip("load", _round_trips(checkpoint.store))
    t2 = clock()
    if observed:
        observer.stage("redis_load", t2 - t1)
    # 3) the core
    # (A store that waits for replicas confirms every touched state: process_batch says why.)
    confirm = getattr(checkpoint.store, "wait_replicas", 0) > 0
    result = process_batch(
        decoded, stored, registry, epochs, checkpoint.offsets(batch), held, confirm, control, warm
    )
    t3 = clock()
    if observed:
        observer.stage("core", t3 - t2)
    # 4) produce and await every ack
    checkpoint.fence(batch, "produce")
    try:
        await within(sink.send(result.outputs, result.dead_letters), limit, "produce")
    except OutputsRefused as exc:
        # Everything else was delivered: the refused outputs' requests fail, with an
        # `error` output in each refused output's place (same request, seq and part).
        for rec, why in exc.refused:
            log.error("output %s/%s refused by the broker: %s", rec.kind, rec.key, why)
        errors = fail_refused(result, [rec for rec, _ in exc.refused if rec.kind != DLQ], control)
        checkpoint.fence(batch, "produce")
        await within(sink.send(errors, []), limit, "produce")
    t4 = clock()
    if observed:
        observer.stage("produce", t4 - t3)
        observer.delivered(batch.records)
    # 5) save states: one round trip, compare-and-set
    writes = list(result.writes.values())
    checkpoint.fence(batch, "save")
    refused = await within(checkpoint.save(writes), limit, "save")
    if observed:
        if writes:
            observer.round_trip("save", _round_trips(checkpoint.store))
        observer.saved(writes, len(refused))
    t5 = clock()
    if observed:
        observer.stage("redis_save", t5 - t4)
    # 6) commit what was saved
    rewound = await within(checkpoint.commit(batch, refused, result.partitions), limit, "commit")
    if observed:
        observer.stage("commit", clock() - t5)
    return BatchReport(result, writes, refused, rewound, len(batch.records))


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never waits (memory store, list sink) without an event loop:
    the tests drive the real loop thousands of times, and `asyncio.run` costs ~1 ms each."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("run_sync: the coroutine waited on I/O")
