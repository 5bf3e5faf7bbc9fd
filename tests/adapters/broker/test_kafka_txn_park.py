"""Transactions across a revocation: a partition that comes back reuses its producer; one
that goes elsewhere, or whose producer was busy, gets it stopped."""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import TopicPartition

from tests.run.test_assignment import FakeConsumer, StrictProducer
from worker.adapters.broker.kafka_txn import Transactions

A, B = TopicPartition("in", 0), TopicPartition("in", 1)


def _transactions() -> tuple[Transactions, list[StrictProducer]]:
    made: list[StrictProducer] = []

    def make(tid: str) -> Any:
        made.append(StrictProducer(tid))
        return made[-1]

    txns = Transactions(
        make, FakeConsumer(), group_id="g", id_prefix="p-", output_topic="o", dlq_topic="d"
    )  # type: ignore[arg-type]
    return txns, made


def test_a_partition_that_comes_back_reuses_its_producer_and_one_that_leaves_stops() -> None:
    async def body() -> None:
        txns, made = _transactions()
        await txns.open([A, B], "earliest")
        await txns.begin([A, B])
        await txns.close([A, B])  # an eager rebalance revokes both
        pa, pb = made
        # What was open is aborted, nothing is stopped yet, and nobody may poll them.
        assert pa.calls == pb.calls == ["start", "begin", "abort"]
        assert not txns.ready(A) and not txns.ready(B)
        await txns.open([A], "earliest")  # A comes back, B went to another member
        assert len(made) == 2  # no new producer, no InitProducerId
        assert txns.ready(A) and not txns.ready(B)
        for _ in range(100):  # (B's is stopped in the background: A need not wait for it)
            if pb.calls[-1] == "stop":
                break
            await asyncio.sleep(0)
        assert pb.calls[-1] == "stop" and "stop" not in pa.calls
        await txns.begin([A])
        assert await txns.commit({A: 5}) == []
        assert pa.calls[-3:] == ["begin", "offsets [5]", "commit"]
        await txns.close_all()
        assert pa.calls[-1] == "stop"

    asyncio.run(body())


def test_a_producer_busy_at_the_revocation_is_stopped_not_parked() -> None:
    async def body() -> None:
        txns, made = _transactions()
        await txns.open([A], "earliest")
        await txns.begin([A])
        release, entered = asyncio.Event(), asyncio.Event()
        pa = made[0]
        real_commit = pa.commit_transaction

        async def slow_commit() -> None:
            entered.set()
            await release.wait()
            await real_commit()

        pa.commit_transaction = slow_commit  # type: ignore[method-assign]
        committing = asyncio.create_task(txns.commit({A: 3}))
        await entered.wait()
        await txns.close([A])  # a batch outlived the revocation: its commit is under way
        await txns.open([A], "earliest")
        assert len(made) == 2 and made[1].calls == ["start"]  # a fresh producer
        release.set()
        await committing
        assert "stop" in pa.calls and txns.ready(A)

    asyncio.run(body())


def test_close_all_stops_the_parked_producers_too() -> None:
    async def body() -> None:
        txns, made = _transactions()
        await txns.open([A], "earliest")
        await txns.close([A])
        await txns.close_all()
        assert made[0].calls == ["start", "stop"]

    asyncio.run(body())


def test_a_partition_that_comes_back_starts_no_earlier_than_its_own_last_commit() -> None:
    # (The offset fetch can run before the commit's markers are written, and aiokafka's
    # cannot ask for stable offsets: this consumer's answer stays at 0, the offset from
    # before the commit. Seeking there would do the committed batch again.)
    async def body() -> None:
        txns, _ = _transactions()
        consumer = txns.consumer
        await txns.open([A], "earliest")
        assert consumer.positions[A] == 0
        await txns.begin([A])
        assert await txns.commit({A: 5}) == []
        await txns.close([A])  # revoked after the commit; it comes straight back
        await txns.open([A], "earliest")
        assert consumer.positions[A] == 5
        await txns.close_all()

    asyncio.run(body())
