"""`wait_longer_when_whole` (`--fetch-whole-wait-ms`): a fetch that asks for every
partition long-polls longer, so an idle consumer fetches seldom, and Apache Kafka still
answers it as soon as a record arrives."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from worker.adapters.broker.kafka import fetch_each_partition, wait_longer_when_whole

SHORT_MS = 10  # the worker's --fetch-max-wait-ms
IDLE_S = 1.0
ROUNDS = 5
FAST_S = 0.05


async def _measure(bootstrap: str, topic: str, whole_wait_ms: int) -> tuple[int, list[float]]:
    """(fetches sent while idle for IDLE_S, how long each of ROUNDS records took to be
    polled after its send was acknowledged)."""
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=SHORT_MS
    )
    await producer.start()
    await consumer.start()
    try:
        fetch_each_partition(consumer)
        wait_longer_when_whole(consumer, whole_wait_ms)
        fetcher: Any = consumer._fetcher
        sent = 0
        proc = fetcher._proc_fetch_request

        async def counted(*args: Any) -> Any:
            nonlocal sent
            sent += 1
            return await proc(*args)

        fetcher._proc_fetch_request = counted
        consumer.assign(tps)
        await consumer.seek_to_end(*tps)
        for tp in tps:
            await consumer.position(tp)
        await asyncio.sleep(0.2)  # (the first fetches out)
        before = sent
        await asyncio.sleep(IDLE_S)
        idle_fetches = sent - before
        waits = []
        for i in range(ROUNDS):
            await (await producer.send(topic, b"r%d" % i, partition=i % 2))
            began = time.monotonic()
            got = await consumer.getmany(timeout_ms=10_000)
            waits.append(time.monotonic() - began)
            assert [m.value for ms in got.values() for m in ms] == [b"r%d" % i]
        return idle_fetches, waits
    finally:
        await consumer.stop()
        await producer.stop()


@pytest.mark.integration
@pytest.mark.parametrize("whole_wait_ms", [0, 2000], ids=["off", "on"])
def test_an_idle_consumer_fetches_seldom_and_records_still_come_at_once(
    kafka_bootstrap: str, new_topic: Callable[..., str], whole_wait_ms: int
) -> None:
    topic = new_topic(partitions=2, prefix="whole")
    idle_fetches, waits = asyncio.run(_measure(kafka_bootstrap, topic, whole_wait_ms))
    assert statistics.median(waits) < FAST_S, [round(w * 1000, 1) for w in waits]
    if whole_wait_ms:
        assert idle_fetches <= 2, idle_fetches
    else:  # (one fetch per SHORT_MS: the cost the flag removes)
        assert idle_fetches >= 20, idle_fetches
