"""The Kafka source: a consumer's `getmany` as `Batch`es, rewinds, commits, rebalances.

One consumer serves every lane: each lane's `KafkaSource` polls only its own share of the
assigned partitions (`getmany(*partitions)`), so its batches never hold another lane's
records. Rewinding is a seek back to the batch's first offsets: aiokafka does not rewind
by itself after a failed batch (aiokafka#1046), the next poll would move on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import CommitFailedError, IllegalStateError, KafkaError

from worker.observe.propagation import TRACE_HEADERS, carried
from worker.ports import Batch, InRecord, Partition

log = logging.getLogger("derender.worker")


class KafkaSource:
    """`Source` over one lane's share of a started consumer's partitions."""

    def __init__(
        self,
        consumer: AIOKafkaConsumer,
        group_id: str,
        share: Callable[[], list[TopicPartition]],
        *,
        timeout_ms: int,
        max_records: int,
        carry: frozenset[str] = TRACE_HEADERS,
    ) -> None:
        self.consumer = consumer
        # The input headers the outputs carry (`worker.observe.propagation`).
        self.carry = carry
        self.group_id = group_id
        self.share = share
        self.timeout_ms = timeout_ms
        self.max_records = max_records

    async def poll(self) -> Batch | None:
        mine = self.share()
        if not mine:  # fewer partitions than lanes (or none yet): wait for more
            await asyncio.sleep(self.timeout_ms / 1000)
            return None
        fetched = await self.consumer.getmany(
            *mine, timeout_ms=self.timeout_ms, max_records=self.max_records
        )
        if not fetched:
            return None
        records: list[InRecord] = []
        first: dict[Partition, int] = {}
        last: dict[Partition, int] = {}
        carry = self.carry
        for tp, msgs in fetched.items():
            first[tp] = msgs[0].offset
            last[tp] = msgs[-1].offset
            for m in msgs:
                key = m.key.decode("utf-8", errors="replace") if m.key is not None else None
                records.append(
                    InRecord(
                        m.value if m.value is not None else b"",
                        key,
                        m.timestamp,
                        (tp.topic, tp.partition, m.offset),
                        tp,
                        carried(m.headers, carry) if m.headers else None,
                    )
                )
        return Batch(records, first, last)

    def rewind(self, batch: Batch, partitions: list[Partition] | None = None) -> None:
        assigned = self.consumer.assignment()
        for tp, offset in batch.first.items():
            if (partitions is None or tp in partitions) and tp in assigned:
                self.consumer.seek(tp, offset)

    async def commit(self, offsets: Mapping[Partition, int]) -> None:
        await self.commit_ends(await self.ends(offsets))

    async def ends(self, offsets: Mapping[Partition, int]) -> Mapping[Partition, int]:
        """What committing `offsets` means now: past transaction markers (`past_markers`).
        Read before the lane polls on: the position then passes records not yet done."""
        return await past_markers(self.consumer, offsets)

    async def commit_ends(self, ends: Mapping[Partition, int]) -> None:
        """Commit what `ends` said, as it is."""
        try:
            await self.consumer.commit(dict(ends))
        except (CommitFailedError, IllegalStateError) as exc:
            # A rebalance took the partitions: the new owner redoes the batch.
            log.warning("commit refused after a rebalance: %s", exc)

    def scope(self, partition: Partition) -> str:
        assert isinstance(partition, TopicPartition)
        return f"{self.group_id}/{partition.topic}/{partition.partition}"


async def past_markers(
    consumer: AIOKafkaConsumer, offsets: Mapping[Partition, int]
) -> dict[TopicPartition, int]:
    """`last + 1`, or the consumer's position where that is further on: on a topic written
    with transactions, a commit marker takes the offset after a transaction's records, and
    the consumer steps over it. Committing `last + 1` would leave a lag of 1 per partition
    for ever, and an autoscaler on lag (KEDA) would never scale to zero. The position only
    passes records returned to us and markers, so nothing unprocessed is skipped."""
    out: dict[TopicPartition, int] = {}
    for tp, offset in offsets.items():
        assert isinstance(tp, TopicPartition)
        try:
            out[tp] = max(offset, await consumer.position(tp))
        except (KafkaError, IllegalStateError):  # (revoked meanwhile: the commit decides)
            out[tp] = offset
    return out


class Rebalances(ConsumerRebalanceListener):  # type: ignore[misc]
    """Forwards aiokafka's rebalance callbacks to two coroutines."""

    def __init__(
        self,
        revoked: Callable[[list[TopicPartition]], Any],
        assigned: Callable[[list[TopicPartition]], Any],
    ) -> None:
        self._revoked = revoked
        self._assigned = assigned

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        await self._revoked(list(revoked))

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        await self._assigned(list(assigned))


async def seek_to_time(
    consumer: AIOKafkaConsumer, assigned: list[TopicPartition], ts_ms: int
) -> None:
    """`--reset <epoch ms>`: a partition the group never committed starts at that time."""
    fresh = [tp for tp in assigned if await consumer.committed(tp) is None]
    if not fresh:
        return
    found = await consumer.offsets_for_times({tp: ts_ms for tp in fresh})
    for tp, ot in found.items():
        if ot is not None:
            consumer.seek(tp, ot.offset)
        else:
            await consumer.seek_to_end(tp)


async def lag(consumer: AIOKafkaConsumer) -> dict[int, int]:
    """Records behind the high watermark, per assigned partition (those with one known)."""
    out: dict[int, int] = {}
    for tp in consumer.assignment():
        hw = consumer.highwater(tp)
        if hw is None:
            continue
        try:
            pos = await consumer.position(tp)
        except (KafkaError, IllegalStateError):
            continue
        out[tp.partition] = max(hw - pos, 0)
    return out


def names(tps: list[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}/{tp.partition}" for tp in sorted(tps)) or "none"
