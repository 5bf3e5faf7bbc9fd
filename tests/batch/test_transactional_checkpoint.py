"""Exactly-once's checkpoint through the one loop, with a fake of the Kafka transactions
(outputs become visible only when their partition's transaction commits) and the real
MemoryStore with its two state versions. The broker-level proof is
tests/chaos/test_exactly_once.py; this pins the protocol and the state rule exactly,
including transactions that span batches (`--commit-interval-ms`, on a fake clock)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from tests.batch.test_loop import REGISTRY, Recorder, RecordingSink, RecordingSource, _batch
from tests.support.helpers import chunk, end
from worker.adapters.state.memory_store import MemoryStore
from worker.batch.checkpoint import Checkpoint
from worker.batch.loop import BatchReport, run_batch
from worker.batch.transactional import TransactionalCheckpoint
from worker.ports import Batch, OutRecord, Partition, StateWrite, Stored
from worker.run.assignment import PartitionLease


class FakeTransactions:
    """One transaction per partition: `send` adds to it, `commit` makes it visible (or
    fails it, for the partitions in `fail`), `abort` discards it."""

    def __init__(self, log: Recorder, fail: set[Partition] | None = None) -> None:
        self.log = log
        self.fail = fail or set()
        self.open: dict[Partition, list[OutRecord]] = {}
        self.visible: list[OutRecord] = []
        self.committed: dict[Partition, int] = {}
        self.dropped: list[Partition] = []
        self.held: set[Partition] = set()
        # Per partition, an event its commit waits for (a slow broker), when set here.
        self.slow: dict[Partition, asyncio.Event] = {}

    def hold(self, partitions: list[Partition]) -> None:
        assert not self.held & set(partitions), "held twice"
        self.held.update(partitions)

    def release(self, partitions: list[Partition]) -> None:
        self.held.difference_update(partitions)

    async def begin(self, partitions: list[Partition]) -> None:
        self.log.events.append(f"begin {sorted(partitions)}")
        for p in partitions:
            assert p not in self.open, f"two transactions at once on {p}"
            self.open[p] = []

    async def send(self, outputs: list[OutRecord], dead_letters: list[OutRecord]) -> None:
        self.log.events.append(f"produce {len(outputs)}")
        for o in [*outputs, *dead_letters]:
            self.open[o.source_partition].append(o)

    async def commit(self, offsets: Mapping[Partition, int]) -> list[Partition]:
        self.log.events.append(f"commit {dict(sorted(offsets.items()))}")
        for p in offsets:
            if p in self.slow:
                await self.slow[p].wait()
        failed = []
        for p, offset in offsets.items():
            records = self.open.pop(p)
            if p in self.fail:
                failed.append(p)
                continue
            self.visible += records
            self.committed[p] = offset
        self.dropped += failed
        return failed

    async def abort(self, partitions: list[Partition]) -> None:
        self.log.events.append(f"abort {sorted(partitions)}")
        for p in partitions:
            self.open.pop(p, None)

    async def drop(self, partitions: list[Partition]) -> None:
        self.dropped += partitions


class VersionRecordingStore(MemoryStore):
    """A MemoryStore that logs the first offsets each load asks from."""

    def __init__(self, log: Recorder) -> None:
        super().__init__()
        self.log = log

    async def load_many(
        self,
        request_ids: list[str],
        first_offsets: list[int] | None = None,
        tables_for: AbstractSet[str] = frozenset(),
    ) -> dict[str, Stored | None]:
        self.log.events.append(f"load {first_offsets}")
        return await super().load_many(request_ids, first_offsets, tables_for)

    async def save_many(self, writes: list[StateWrite]) -> list[str]:
        self.log.events.append(
            "save " + ",".join(f"{w.first_offset}-{w.last_offset}" for w in writes)
        )
        return await super().save_many(writes)


def run(batch: Batch, checkpoint: Checkpoint, sink: Any) -> BatchReport:
    return asyncio.run(
        run_batch(
            batch, registry=REGISTRY, sink=sink, checkpoint=checkpoint, max_record_bytes=1 << 20
        )
    )


def triples(outputs: list[OutRecord]) -> list[tuple[str, bytes, bytes, bytes]]:
    return [
        (o.key, dict(o.headers)["derender-seq"], dict(o.headers)["derender-part"], o.value)
        for o in outputs
    ]


def test_begin_load_at_the_first_offsets_produce_save_versioned_commit() -> None:
    log, source_log = Recorder(), Recorder()
    store, txns = VersionRecordingStore(log), FakeTransactions(log)
    checkpoint = TransactionalCheckpoint(RecordingSource(source_log), store, txns)
    batch = _batch([(0, chunk("a", 0, [100, 101])), (1, chunk("b", 0, [102])), (0, end("a", 1))])
    report = run(batch, checkpoint, txns)
    assert log.events == [
        "begin [0, 1]",
        "load [10, 10]",  # each request's partition's first offset
        f"produce {len(report.result.outputs)}",
        "save 10-11,10-10",  # a: partition 0 (10..11), b: partition 1 (10..10)
        "commit {0: 12, 1: 11}",  # inside the transactions
    ]
    assert source_log.events == []  # nothing committed on the consumer
    assert txns.committed == {0: 12, 1: 11}
    assert sorted(triples(txns.visible)) == sorted(triples(report.result.outputs))


def test_a_transaction_that_fails_is_redone_from_the_state_before_it() -> None:
    """Partition 0's commit fails after its states were saved; the redo from the same
    offsets builds on the state before that batch, so the outputs that finally become
    visible are exactly a clean run's, with nothing twice."""
    first = _batch([(0, chunk("a", 0, [100])), (1, chunk("b", 0, [102]))])
    second = _batch(
        [(0, chunk("a", 1, [101, 103])), (1, chunk("b", 1, [104])), (0, end("a", 2))], first=11
    )
    # The clean run: at-least-once's checkpoint, nothing failing.
    clean_log = Recorder()
    clean = RecordingSink(clean_log)
    plain = Checkpoint(RecordingSource(clean_log), MemoryStore())
    expected = triples(
        run(first, plain, clean).result.outputs + run(second, plain, clean).result.outputs
    )

    log = Recorder()
    store, txns = MemoryStore(), FakeTransactions(log)
    checkpoint = TransactionalCheckpoint(RecordingSource(log), store, txns)
    run(first, checkpoint, txns)
    txns.fail = {0}
    report = run(second, checkpoint, txns)
    assert report.rewound == [0] and txns.dropped == [0]
    assert 0 not in checkpoint.epochs  # claimed anew when the partition is back
    # a's state in the store is the aborted batch's; a load from offset 11 passes it over.
    assert (await_(store.load_many(["a"])))["a"].seq == 2
    assert (await_(store.load_many(["a"], [11])))["a"].seq == 0
    txns.fail = set()
    redo = Batch([r for r in second.records if r.partition == 0], {0: 11}, {0: 12})
    run(redo, checkpoint, txns)
    assert sorted(triples(txns.visible)) == sorted(expected)
    assert len(triples(txns.visible)) == len(set(triples(txns.visible)))


def test_a_refused_state_write_aborts_its_partition_and_gives_it_up() -> None:
    log = Recorder()
    store, txns = MemoryStore(), FakeTransactions(log)
    checkpoint = TransactionalCheckpoint(RecordingSource(log), store, txns)
    batch = _batch([(0, chunk("a", 0, [100])), (1, chunk("b", 0, [102]))])
    # Another owner (a newer epoch) wrote b first.
    await_(store.save_many([StateWrite("b", 0, b"x", False, None, 99, 10, 10)]))
    report = run(batch, checkpoint, txns)
    assert report.refused == ["b"] and report.rewound == [1]
    assert "abort [1]" in log.events and txns.dropped == [1]
    assert txns.committed == {0: 11}
    assert {o.key for o in txns.visible} == {"a"}  # b's outputs were aborted with it


def await_(coro: Any) -> Any:
    return asyncio.run(coro)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class RewindingSource(RecordingSource):
    """Logs where each rewind seeks to."""

    def rewind(self, batch: Batch, partitions: list[Partition] | None = None) -> None:
        self.log.events.append(f"rewind {dict(sorted(batch.first.items()))}")
        self.rewound.append(sorted(partitions if partitions is not None else batch.first))

    def __init__(self, log: Recorder) -> None:
        super().__init__(log)
        self.rewound: list[list[Partition]] = []


class FailingSink:
    async def send(self, outputs: list[OutRecord], dead_letters: list[OutRecord]) -> None:
        raise ConnectionError("the broker went away")


# Three batches of one conversation per partition, offsets 10.. (a on 0, b on 1).
SPAN = [
    _batch([(0, chunk("a", 0, [100])), (1, chunk("b", 0, [102]))]),
    _batch([(0, chunk("a", 1, [101, 103])), (1, chunk("b", 1, [104]))], first=11),
    _batch([(0, end("a", 2)), (1, end("b", 2))], first=12),
]


def _clean_outputs() -> list[tuple[str, bytes, bytes, bytes]]:
    log = Recorder()
    sink, plain = RecordingSink(log), Checkpoint(RecordingSource(log), MemoryStore())
    return sorted(t for b in SPAN for t in triples(run(b, plain, sink).result.outputs))


def test_a_transaction_spans_batches_until_its_interval_is_up() -> None:
    log, clock = Recorder(), Clock()
    txns = FakeTransactions(log)
    checkpoint = TransactionalCheckpoint(
        RecordingSource(log), MemoryStore(), txns, interval_s=1.0, clock=clock
    )
    run(SPAN[0], checkpoint, txns)
    clock.now = 0.5
    run(SPAN[1], checkpoint, txns)
    # One begin, no commit: nothing visible yet.
    assert [e for e in log.events if e.startswith(("begin", "commit"))] == ["begin [0, 1]"]
    assert txns.visible == [] and checkpoint.due([0, 1]) == []
    clock.now = 1.0  # between batches, the lane asks what is due
    assert checkpoint.due([0, 1]) == [0, 1] and checkpoint.due([1]) == [1]
    assert await_(checkpoint.commit_due([0])) == []
    assert txns.committed == {0: 12} and 1 in txns.open
    # The next batch past the interval commits partition 1's transaction with it, and
    # begins partition 0's next one, which that batch's commit leaves open.
    run(SPAN[2], checkpoint, txns)
    assert txns.committed == {0: 12, 1: 13} and list(txns.open) == [0]
    assert checkpoint.due([0, 1]) == []
    await_(checkpoint.settle([0]))  # (the lane stops)
    assert txns.committed == {0: 13, 1: 13} and txns.open == {}
    assert sorted(triples(txns.visible)) == _clean_outputs()


def test_a_failed_batch_aborts_its_whole_transaction_and_rewinds_to_its_start() -> None:
    """The third batch of a transaction fails: the batches before it in the transaction
    are aborted with it, the partitions rewound to where it began, and the redo builds on
    the states from before the transaction (none: the requests began in it)."""
    log, clock = Recorder(), Clock()
    store, txns = MemoryStore(), FakeTransactions(log)
    checkpoint = TransactionalCheckpoint(
        RewindingSource(log), store, txns, interval_s=10.0, clock=clock
    )
    run(SPAN[0], checkpoint, txns)
    run(SPAN[1], checkpoint, txns)
    try:
        run(SPAN[2], checkpoint, FailingSink())
    except ConnectionError:
        await_(checkpoint.abort(SPAN[2]))
    assert log.events[-2:] == ["abort [0, 1]", "rewind {0: 10, 1: 10}"]
    assert txns.visible == [] and txns.open == {}
    assert await_(store.load_many(["a", "b"], [10, 10])) == {"a": None, "b": None}
    # The redo: the three batches' records from offset 10 as one batch.
    redo = Batch([r for b in SPAN for r in b.records], {0: 10, 1: 10}, {0: 12, 1: 12})
    run(redo, checkpoint, txns)
    await_(checkpoint.settle([0, 1]))
    assert txns.committed == {0: 13, 1: 13}
    assert sorted(triples(txns.visible)) == _clean_outputs()


def test_settle_leaves_a_transaction_with_a_batch_still_in_it() -> None:
    """A revocation (or a stop) commits the open transactions whose batches are done; one
    that a batch is still adding to (it outlived the revocation's wait) is left for its
    producer's close to abort."""
    log = Recorder()
    txns = FakeTransactions(log)
    checkpoint = TransactionalCheckpoint(RecordingSource(log), MemoryStore(), txns, interval_s=5)
    run(SPAN[0], checkpoint, txns)
    only_a = Batch([r for r in SPAN[1].records if r.partition == 0], {0: 11}, {0: 12})
    await_(checkpoint.claim(only_a))  # partition 0's next batch is under way
    await_(checkpoint.settle([0, 1]))
    assert txns.committed == {1: 11} and 0 in txns.open


def test_a_batch_fenced_by_an_incremental_revocation_is_redone_on_the_partitions_that_stay() -> (
    None
):
    """Partition 1 moves while a batch of partitions 0 and 1 runs (KIP-848): the batch is
    fenced, and nobody else does partition 0's part again. Its transaction, with what the
    batch began in it, is aborted and rewound to where it began; partition 1 is left to its
    producer's close and its new owner."""
    log, clock = Recorder(), Clock()
    lease = PartitionLease()
    txns, source = FakeTransactions(log), RewindingSource(log)
    checkpoint = TransactionalCheckpoint(
        source, MemoryStore(), txns, lease, interval_s=10.0, clock=clock
    )
    run(SPAN[0], checkpoint, txns)
    SPAN[1].generation = lease.generation
    await_(checkpoint.claim(SPAN[1]))  # (the batch is under way)
    lease.revoke([1])
    await_(checkpoint.abort(SPAN[1]))
    assert log.events[-2:] == ["abort [0]", "rewind {0: 10, 1: 11}"]
    assert source.rewound == [[0]]
    assert 0 not in txns.open and 1 in txns.open
    # Eager (everything revoked): the batch touches nothing.
    events = len(log.events)
    lease.revoke()
    await_(checkpoint.abort(SPAN[1]))
    assert len(log.events) == events and source.rewound == [[0]]


def test_at_least_once_a_fenced_batch_is_redone_on_the_partitions_that_stay() -> None:
    lease, source = PartitionLease(), RewindingSource(Recorder())
    checkpoint = Checkpoint(source, MemoryStore(), lease)
    SPAN[1].generation = lease.generation
    lease.revoke([1])
    await_(checkpoint.abort(SPAN[1]))
    assert source.rewound == [[0]]
    lease.revoke()
    await_(checkpoint.abort(SPAN[1]))
    assert source.rewound == [[0]]


# -- commits in the background (`track`, as `run` makes it) ------------------------------


async def _in_loop(batch: Batch, checkpoint: Checkpoint, txns: FakeTransactions) -> None:
    """One batch inside the scenario's own event loop (its background commits live on)."""
    await run_batch(
        batch, registry=REGISTRY, sink=txns, checkpoint=checkpoint, max_record_bytes=1 << 20
    )


def _background(
    log: Recorder, txns: FakeTransactions, timeout_s: float | None = None
) -> tuple[TransactionalCheckpoint, list[asyncio.Future[None]]]:
    tracked: list[asyncio.Future[None]] = []
    checkpoint = TransactionalCheckpoint(
        RecordingSource(log), MemoryStore(), txns, timeout_s=timeout_s, track=tracked.append
    )
    return checkpoint, tracked


def _only(partition: int, batch: Batch) -> Batch:
    return Batch(
        [r for r in batch.records if r.partition == partition],
        {partition: batch.first[partition]},
        {partition: batch.last[partition]},
    )


def test_in_the_background_a_commit_holds_its_partition_while_the_others_go_on() -> None:
    """Partition 0's commit waits on a slow broker: it is held (no lane polls it), and a
    batch of partition 1 runs, commits and is released meanwhile. When the broker answers,
    partition 0 is released and its outputs are visible, the same as committed inline."""
    clean = _clean_outputs()

    async def scenario() -> None:
        log = Recorder()
        txns = FakeTransactions(log)
        txns.slow[0] = asyncio.Event()
        checkpoint, tracked = _background(log, txns)
        for batch in SPAN:
            for p in (0, 1):
                if p == 0 and batch is not SPAN[0]:
                    continue  # (partition 0 is held: its next batches wait)
                await _in_loop(_only(p, batch), checkpoint, txns)
        await asyncio.sleep(0.01)  # (partition 1's last commit ends)
        assert txns.held == {0} and 0 not in txns.committed
        assert txns.committed == {1: 13} and 0 in txns.open and txns.visible != []
        txns.slow[0].set()
        await asyncio.wait(tracked)
        assert txns.held == set() and txns.committed == {0: 11, 1: 13}
        for batch in SPAN[1:]:
            await _in_loop(_only(0, batch), checkpoint, txns)
        await checkpoint.settle([0, 1])
        assert txns.committed == {0: 13, 1: 13} and txns.open == {} and not txns.held
        assert sorted(triples(txns.visible)) == clean

    asyncio.run(scenario())


def test_settle_waits_for_the_commits_in_the_background() -> None:
    """A revocation or a stop must not close a producer whose commit is still running."""

    async def scenario() -> None:
        log = Recorder()
        txns = FakeTransactions(log)
        txns.slow[1] = asyncio.Event()
        checkpoint, _ = _background(log, txns)
        await _in_loop(SPAN[0], checkpoint, txns)
        settling = asyncio.ensure_future(checkpoint.settle([0, 1]))
        await asyncio.sleep(0.01)
        assert not settling.done() and txns.held == {0, 1}
        txns.slow[1].set()
        await asyncio.wait_for(settling, 1)
        assert txns.committed == {0: 11, 1: 11} and not txns.held

    asyncio.run(scenario())


def test_a_commit_in_the_background_that_never_ends_gives_its_partitions_up() -> None:
    """Past its bound the commit's partitions are forgotten and dropped (their producers
    are in doubt), and released: their next assignment starts them afresh."""

    async def scenario() -> None:
        log = Recorder()
        txns = FakeTransactions(log)
        txns.slow[0] = asyncio.Event()  # (never set)
        checkpoint, tracked = _background(log, txns, 0.05)
        await _in_loop(SPAN[0], checkpoint, txns)
        assert checkpoint.epochs.keys() == {0, 1}
        await asyncio.wait(tracked)
        assert sorted(txns.dropped) == [0, 1] and not txns.held
        assert checkpoint.epochs == {} and txns.committed == {}

    asyncio.run(scenario())
