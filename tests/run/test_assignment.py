"""Rebalances against the batches in flight, with the interleavings driven
step by step: a poll that spans a revocation, records drained just before one, a batch
that outlives its revocation while its partition comes back to another lane, a step that
never returns, a SIGTERM while a batch hangs. The chaos suites run the real thing; these
pin each interleaving exactly."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Mapping
from typing import Any

import pytest
from aiokafka import TopicPartition

from tests.batch.test_loop import REGISTRY
from tests.support.helpers import ListSink, ListSource, chunk
from worker.adapters.broker import kafka_txn
from worker.adapters.broker.kafka_txn import Transactions
from worker.adapters.state.memory_store import MemoryStore
from worker.batch.checkpoint import Checkpoint
from worker.batch.loop import run_batch
from worker.batch.steps import StepTimeout
from worker.batch.transactional import TransactionalCheckpoint
from worker.config import load_registry
from worker.failures import Kind, classify
from worker.ports import Batch, Fenced, InRecord, OutRecord, Partition
from worker.run.assignment import Assignment
from worker.run.runner import Runner
from worker.settings import add_flags, from_args

TP = TopicPartition("in", 2)


def encode_record(rec: dict[str, Any]) -> bytes:
    return json.dumps(rec).encode()


def _records(rid: str, n: int, partition: Partition = None) -> list[InRecord]:
    return [
        InRecord(encode_record(chunk(rid, seq, [100 + seq])), rid, 0, "", partition)
        for seq in range(n)
    ]


# -- polls ----------------------------------------------------------------------------


def test_a_poll_waiting_when_partitions_are_revoked_is_cancelled_before_it_drains() -> None:
    """The path of the repeats a rebalance once caused: a lane's getmany, waiting with its
    old share, woke up under the new assignment and drained a partition that had come back."""

    async def body() -> None:
        a = Assignment()
        drained: list[Batch] = []
        records_arrive: asyncio.Future[Batch] = asyncio.get_running_loop().create_future()

        async def getmany() -> Batch:
            batch = await records_arrive  # the consumer waits for records
            drained.append(batch)  # (what aiokafka does when it hands them over)
            return batch

        lane = asyncio.create_task(a.poll(getmany))
        await asyncio.sleep(0.01)
        await a.revoke(wait_s=1.0)
        assert not a.settled
        assert await lane is None
        assert records_arrive.cancelled()  # nothing was drained: nothing lost
        assert drained == []
        a.assigned()
        assert a.settled

    asyncio.run(body())


def test_records_drained_just_before_a_revocation_are_dropped_not_processed() -> None:
    async def body() -> None:
        drops: list[int] = []
        a = Assignment(on_drop=lambda: drops.append(1))
        batch = ListSource().batch(_records("r", 2))
        revocation: list[asyncio.Future[None]] = []

        async def getmany() -> Batch:
            # The revocation starts after the records were handed over, before the lane
            # runs again: it is queued ahead of the lane's wake-up.
            revocation.append(asyncio.ensure_future(a.revoke(wait_s=1.0)))
            return batch

        assert await a.poll(getmany) is None
        await revocation[0]
        assert drops == [1]
        # After the new assignment, a poll is stamped with the new lease.
        a.assigned()

        async def again() -> Batch:
            return ListSource().batch(_records("r", 2))

        fresh = await a.poll(again)
        assert fresh is not None and fresh.generation == 1 == a.lease.generation

    asyncio.run(body())


def test_a_revocation_waits_for_the_batch_in_flight_then_fences_it() -> None:
    async def body() -> None:
        a = Assignment()
        release = asyncio.Event()

        async def batch() -> str:
            with a.processing():
                await release.wait()
            return "done"

        running = asyncio.create_task(batch())
        await asyncio.sleep(0)
        started = time.monotonic()
        await a.revoke(wait_s=0.2)  # the batch does not finish in time
        assert 0.15 < time.monotonic() - started < 1.0
        assert a.lease.generation == 1
        release.set()
        assert await running == "done"
        assert not a.in_flight

    asyncio.run(body())


# -- a batch that outlives its revocation ---------------------------------------------


class StrictProducer:
    """A transactional producer with the state checks of aiokafka's TransactionManager."""

    def __init__(self, transactional_id: str) -> None:
        self.transactional_id = transactional_id
        self.state = "READY"
        self.calls: list[str] = []
        self._txn_manager = self

    def is_in_transaction(self) -> bool:
        return self.state == "IN_TRANSACTION"

    async def start(self) -> None:
        self.calls.append("start")

    async def stop(self) -> None:
        self.calls.append("stop")
        self.state = "CLOSED"

    async def begin_transaction(self) -> None:
        self.calls.append("begin")
        assert self.state == "READY", f"Invalid state transition {self.state} -> IN_TRANSACTION"
        self.state = "IN_TRANSACTION"

    async def send_offsets_to_transaction(self, offsets: Any, group_id: str) -> None:
        self.calls.append(f"offsets {sorted(o for o in offsets.values())}")
        assert self.state == "IN_TRANSACTION"

    async def commit_transaction(self) -> None:
        self.calls.append("commit")
        assert self.state == "IN_TRANSACTION"
        self.state = "READY"

    async def abort_transaction(self) -> None:
        self.calls.append("abort")
        assert self.state == "IN_TRANSACTION"
        self.state = "READY"


class FakeConsumer:
    def __init__(self) -> None:
        self.positions: dict[TopicPartition, int] = {}

    async def committed(self, tp: TopicPartition) -> int:
        return 0

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.positions[tp] = offset

    async def position(self, tp: TopicPartition) -> int:
        return self.positions.get(tp, 0)


def _transactions() -> tuple[Transactions, list[StrictProducer]]:
    made: list[StrictProducer] = []

    def make(tid: str) -> Any:
        made.append(StrictProducer(tid))
        return made[-1]

    txns = Transactions(
        make, FakeConsumer(), group_id="g", id_prefix="p-", output_topic="o", dlq_topic="d"
    )  # type: ignore[arg-type]
    return txns, made


def test_a_stale_batch_never_begins_a_transaction_on_the_new_assignments_producer() -> None:
    """Issue #24's crash: `Invalid state transition IN_TRANSACTION -> IN_TRANSACTION`."""

    async def body() -> None:
        txns, made = _transactions()
        a = Assignment()
        checkpoint = TransactionalCheckpoint(ListSource(), MemoryStore(), txns, a.lease)
        await txns.open([TP], "earliest")
        stale = Batch(_records("x", 1, TP), {TP: 10}, {TP: 10}, a.lease.generation)
        # The rebalance outlasts the batch; the partition comes back, to another lane.
        await a.revoke(wait_s=0)
        await txns.close([TP])
        await txns.open([TP], "earliest")
        a.assigned()
        fresh = Batch(_records("y", 1, TP), {TP: 10}, {TP: 10}, a.lease.generation)
        await checkpoint.claim(fresh)  # the other lane's batch begins its transaction
        with pytest.raises(Fenced, match="begin"):
            await checkpoint.claim(stale)
        # (The partition came back to this worker: its producer was kept for it.)
        (producer,) = made
        assert producer.calls == ["start", "begin"]
        # Its commit and its abort are fenced too, and the new transaction is untouched.
        with pytest.raises(Fenced, match="commit"):
            await checkpoint.commit(stale, [], {})
        await checkpoint.abort(stale)
        assert producer.calls == ["start", "begin"]
        assert await checkpoint.commit(fresh, [], {}) == []
        assert producer.calls == ["start", "begin", "offsets [11]", "commit"]

    asyncio.run(body())


def test_a_failed_commit_drops_only_its_own_producer() -> None:
    """A commit that fails after the partition was reopened must not close the producer
    of the new assignment."""

    async def body() -> None:
        txns, made = _transactions()
        await txns.open([TP], "earliest")
        await txns.begin([TP])
        old = made[0]

        async def fenced_commit() -> None:
            # Meanwhile: revoked, reopened (a new producer), and this one fenced.
            await txns.close([TP])
            await txns.open([TP], "earliest")
            raise RuntimeError("ProducerFenced")

        old.commit_transaction = fenced_commit  # type: ignore[method-assign]
        assert await txns.commit({TP: 11}) == [TP]
        assert txns.ready(TP)  # the new producer stays
        assert made[1].calls == ["start"]

    asyncio.run(body())


class RevokingSink(ListSink):
    """Acknowledges the outputs, but a rebalance moves the lease on meanwhile."""

    def __init__(self, assignment: Assignment) -> None:
        super().__init__()
        self.assignment = assignment

    async def send(self, outputs: list[OutRecord], dead_letters: list[OutRecord]) -> None:
        await super().send(outputs, dead_letters)
        await self.assignment.revoke(wait_s=0)


def test_a_batch_revoked_during_its_produce_saves_and_commits_nothing() -> None:
    async def body() -> None:
        a = Assignment()
        source, store = ListSource(), MemoryStore()
        checkpoint = Checkpoint(source, store, a.lease)
        batch = source.batch(_records("r", 3))
        sink = RevokingSink(a)
        with pytest.raises(Fenced, match="save"):
            await run_batch(
                batch, registry=REGISTRY, sink=sink, checkpoint=checkpoint, max_record_bytes=1 << 20
            )
        assert sink.outputs  # produced (at-least-once: the next owner's redo repeats them)
        assert await store.load_many(["r"]) == {"r": None}
        assert source.committed == {}
        await checkpoint.abort(batch)
        assert source.rewound == []  # its positions are the new assignment's now

    asyncio.run(body())


# -- bounds ----------------------------------------------------------------------------


class SilentSink(ListSink):
    """A broker that takes the records and never acknowledges them."""

    async def send(self, outputs: list[OutRecord], dead_letters: list[OutRecord]) -> None:
        await asyncio.Event().wait()


def test_a_step_that_never_returns_is_an_outage_within_the_step_timeout() -> None:
    async def body() -> None:
        source, store = ListSource(), MemoryStore()
        checkpoint = Checkpoint(source, store, Assignment().lease)
        batch = source.batch(_records("r", 2))
        started = time.monotonic()
        with pytest.raises(StepTimeout, match=r"produce took longer than 0\.1s") as err:
            await run_batch(
                batch,
                registry=REGISTRY,
                sink=SilentSink(),
                checkpoint=checkpoint,
                max_record_bytes=1 << 20,
                step_timeout_s=0.1,
            )
        assert time.monotonic() - started < 1.0
        assert classify(err.value) is Kind.TRANSIENT  # retried, rewound, outage limit
        assert await store.load_many(["r"]) == {"r": None} and source.committed == {}

    asyncio.run(body())


def test_an_abort_that_never_returns_drops_its_producer_within_the_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seen after a broker restart: a failed batch's abort waited on its transaction
    coordinator for minutes, silently, holding its lane and the SIGTERM after it."""
    monkeypatch.setattr(kafka_txn, "ABORT_TIMEOUT_S", 0.1)

    async def body() -> None:
        txns, made = _transactions()
        await txns.open([TP], "earliest")
        await txns.begin([TP])

        async def hang() -> None:
            await asyncio.Event().wait()

        made[0].abort_transaction = hang  # type: ignore[method-assign]
        started = time.monotonic()
        await txns.abort([TP])
        assert time.monotonic() - started < 1.0
        assert not txns.ready(TP) and TP in txns.lost  # its state unknown: given up

    asyncio.run(body())


class OneBatchConsumer:
    """A consumer with one partition and one record to hand out, then nothing."""

    def __init__(self, value: bytes) -> None:
        self.value = value
        self.given = False
        self.committed: dict[TopicPartition, int] = {}

    def assignment(self) -> set[TopicPartition]:
        return {TP}

    async def getmany(
        self, *tps: TopicPartition, timeout_ms: int, max_records: int
    ) -> Mapping[TopicPartition, list[Any]]:
        if self.given:
            await asyncio.sleep(timeout_ms / 1000)
            return {}
        self.given = True
        msg = argparse.Namespace(key=b"r", value=self.value, timestamp=0, offset=0, headers=())
        return {TP: [msg]}

    async def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        self.committed.update(offsets)


def test_sigterm_abandons_a_hung_batch_after_the_shutdown_timeout() -> None:
    async def body() -> None:
        parser = argparse.ArgumentParser()
        add_flags(parser, environ={})
        s = from_args(parser.parse_args(["--shutdown-timeout-s", "0.3", "--lanes", "1"]))
        runner = Runner(s, load_registry(None), MemoryStore())
        consumer = OneBatchConsumer(encode_record(chunk("r", 0, [100])))
        runner.consumer = consumer  # type: ignore[assignment]
        runner.sinks = [SilentSink()]
        loop = asyncio.create_task(runner._loop())
        while not runner.assignment.in_flight:  # the batch hangs in its produce
            await asyncio.sleep(0.01)
        started = time.monotonic()
        runner.request_stop()
        await asyncio.wait_for(loop, 5)
        assert 0.25 < time.monotonic() - started < 1.5
        assert consumer.committed == {}  # abandoned: the next owner does it again
        assert not runner.assignment.in_flight

    asyncio.run(body())
