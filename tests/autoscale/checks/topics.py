"""Group offsets and the input topic read back."""

from __future__ import annotations

from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, TopicPartition

from tests.autoscale.config import PARTITIONS


async def final_lag(bootstrap: str, group: str, topic: str) -> dict[int, tuple[int, int]]:
    """{partition: (end offset, committed offset)}."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        ends = await consumer.end_offsets(tps)
        return {tp.partition: (ends[tp], await consumer.committed(tp) or 0) for tp in tps}
    finally:
        await consumer.stop()


async def records_in(bootstrap: str, topic: str) -> int:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        parts = consumer.partitions_for_topic(topic) or set()
        if not parts:
            await consumer.topics()  # refresh the metadata
            parts = consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in parts]
        ends = await consumer.end_offsets(tps)
        starts = await consumer.beginning_offsets(tps)
        return sum(ends[tp] - starts[tp] for tp in tps)
    finally:
        await consumer.stop()


@dataclass
class InputRecord:
    partition: int
    offset: int
    key: str
    value: bytes
    timestamp: int


async def read_input(bootstrap: str, topic: str) -> list[InputRecord]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        out: list[InputRecord] = []
        remaining = {tp for tp in tps if ends[tp] > 0}
        while remaining:
            batch = await consumer.getmany(timeout_ms=500, max_records=10000)
            for tp, msgs in batch.items():
                for m in msgs:
                    out.append(
                        InputRecord(tp.partition, m.offset, m.key.decode(), m.value, m.timestamp)
                    )
            remaining = {tp for tp in remaining if await consumer.position(tp) < ends[tp]}
        return out
    finally:
        await consumer.stop()
