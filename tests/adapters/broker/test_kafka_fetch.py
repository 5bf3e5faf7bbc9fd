"""`fetch_each_partition`: records waiting in one partition do not hold back the fetches of
another partition of the same broker (the lanes of one consumer).

Without it, aiokafka sends no fetch to a broker for 100 ms (`prefetch_backoff`) after any
of its partitions got records that were not consumed yet: a lane polling its partition
while another lane's records wait got its new records only after that.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import AsyncIterator, Callable

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from worker.adapters.broker.kafka import fetch_each_partition

ROUNDS = 7
# aiokafka's prefetch_backoff is 100 ms: without the fix every round waits about that long.
FAST_S = 0.05
DEADLINE_S = 10.0


async def _buffered(consumer: AIOKafkaConsumer, tp: TopicPartition, offset: int) -> None:
    """Until the consumer has fetched the record at `offset` of `tp` (its high watermark,
    from a fetch response, is past it): it now waits in the consumer, not consumed."""
    deadline = time.monotonic() + DEADLINE_S
    while (consumer.highwater(tp) or 0) <= offset:
        assert time.monotonic() < deadline, (
            f"{tp} never fetched offset {offset}: {_view(consumer, tp)}"
        )
        await asyncio.sleep(0.002)


def _view(consumer: AIOKafkaConsumer, tp: TopicPartition) -> dict[str, object]:
    """What the consumer knew of `tp` (aiokafka's internals: no public call tells), so that a
    failure says whether it lacked the leader, a position, or a fetch answer."""
    state = consumer._subscription.subscription.assignment.state_value(tp)
    return {
        "leader": consumer._client.cluster.leader_for_partition(tp),
        "brokers": sorted(b.nodeId for b in consumer._client.cluster.brokers()),
        "position": state.position if state.has_valid_position else None,
        "highwater": state.highwater,
        "buffered": tp in consumer._fetcher._records,
        "fetches in flight": sorted(consumer._fetcher._in_flight),
    }


@contextlib.asynccontextmanager
async def _clients(
    bootstrap: str, mine: TopicPartition, other: TopicPartition
) -> AsyncIterator[tuple[AIOKafkaProducer, AIOKafkaConsumer]]:
    """A producer, and a consumer of both partitions from their start with the lanes'
    fetch settings (long polls of 500 ms, to make a missed fetch plain)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=500
    )
    await producer.start()
    await consumer.start()
    try:
        fetch_each_partition(consumer)
        consumer.assign([mine, other])
        await consumer.seek_to_beginning(mine, other)
        yield producer, consumer
    finally:
        await consumer.stop()
        await producer.stop()


@pytest.mark.integration
def test_waiting_records_of_one_partition_hold_back_no_other_fetch(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=2, prefix="fetch")
    mine, other = TopicPartition(topic, 0), TopicPartition(topic, 1)

    async def scenario() -> list[float]:
        async with _clients(kafka_bootstrap, mine, other) as (producer, consumer):
            waits = []
            for _ in range(ROUNDS):
                # A record of the other lane's partition is fetched and left waiting...
                sent = await (await producer.send(topic, b"theirs", partition=1))
                await _buffered(consumer, other, sent.offset)
                # ...while this lane's next record arrives: how long until it is polled?
                began = time.monotonic()
                await (await producer.send(topic, b"mine", partition=0))
                got = await consumer.getmany(mine, timeout_ms=int(DEADLINE_S * 1000))
                waits.append(time.monotonic() - began)
                assert [m.value for m in got.get(mine, [])] == [b"mine"]
                # (The other lane's record is consumed: the next round starts alike.)
                assert (await consumer.getmany(other, timeout_ms=1000)).get(other)
            return waits

    waits = asyncio.run(scenario())
    # The median: one round slowed by the shared machine does not fail the test.
    assert statistics.median(waits) < FAST_S, [round(w * 1000, 1) for w in waits]


@pytest.mark.integration
def test_a_partition_just_consumed_is_fetched_again_at_once(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """An idle lane takes its record as soon as it is fetched; its partition's next
    record must not wait for a fetch on the other partitions (each a long poll of
    `fetch_max_wait_ms`, here 500 ms) that left it out because its record was still
    buffered when that fetch was sent."""
    topic = new_topic(partitions=2, prefix="refetch")
    mine, other = TopicPartition(topic, 0), TopicPartition(topic, 1)

    async def scenario() -> list[float]:
        async with _clients(kafka_bootstrap, mine, other) as (producer, consumer):
            waits = []
            for _ in range(ROUNDS):
                await (await producer.send(topic, b"first", partition=0))
                got = await consumer.getmany(mine, timeout_ms=int(DEADLINE_S * 1000))
                assert [m.value for m in got.get(mine, [])] == [b"first"]
                # (No record on the other partition: a fetch there waits its full time.)
                began = time.monotonic()
                await (await producer.send(topic, b"next", partition=0))
                got = await consumer.getmany(mine, timeout_ms=int(DEADLINE_S * 1000))
                waits.append(time.monotonic() - began)
                assert [m.value for m in got.get(mine, [])] == [b"next"]
            return waits

    waits = asyncio.run(scenario())
    assert statistics.median(waits) < FAST_S, [round(w * 1000, 1) for w in waits]
