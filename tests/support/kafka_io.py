"""Producing and reading a few records with plain aiokafka clients: what the tests of the
local Kafka servers check them with."""

from __future__ import annotations

import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

CONSUME_TIMEOUT_S = 30.0


async def produce(bootstrap: str, topic: str, values: list[bytes], **options: object) -> None:
    """Each value sent and acknowledged in turn (`options`: the producer's, e.g. acks)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **options)
    await producer.start()
    try:
        for value in values:
            await producer.send_and_wait(topic, value)
    finally:
        await producer.stop()


async def consume(
    bootstrap: str,
    topic: str,
    count: int,
    group_id: str | None = None,
    isolation_level: str = "read_uncommitted",
) -> list[bytes]:
    """The first `count` values a consumer gets (in a group: from its committed offsets,
    which it commits after), failing if fewer arrive in time."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group_id,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        isolation_level=isolation_level,
    )
    await consumer.start()
    values: list[bytes] = []
    try:
        deadline = time.monotonic() + CONSUME_TIMEOUT_S
        while len(values) < count and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            for records in batches.values():
                values.extend(r.value for r in records if r.value is not None)
        if group_id is not None:
            await consumer.commit()
    finally:
        await consumer.stop()
    assert len(values) >= count, f"got {len(values)} of {count} records from {topic}"
    return values
