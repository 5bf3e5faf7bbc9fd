"""The Kafka source on confluent-kafka (`--kafka-client confluent`): one lane's share of
the fetcher's partitions (`fetch.Fetcher`) as `Batch`es, its rewinds (seeks on
the fetch thread) and its commits."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

import confluent_kafka
from aiokafka import TopicPartition

from worker.adapters.broker.confluent.fetch import Fetcher
from worker.observe.propagation import TRACE_HEADERS, carried
from worker.ports import Batch, InRecord, Partition

log = logging.getLogger("derender.worker")


class ConfluentSource:
    """`Source` over one lane's share of the fetcher's partitions."""

    def __init__(
        self,
        fetcher: Fetcher,
        group_id: str,
        share: Callable[[], list[TopicPartition]],
        *,
        timeout_ms: int,
        max_records: int,
        commit_timeout_s: float,
        carry: frozenset[str] = TRACE_HEADERS,
    ) -> None:
        self.fetcher = fetcher
        self.group_id = group_id
        self.share = share
        self.timeout_ms = timeout_ms
        self.max_records = max_records
        self.commit_timeout_s = commit_timeout_s
        self.carry = carry

    async def poll(self) -> Batch | None:
        if (failure := self.fetcher.failure) is not None:
            raise failure
        mine = self.share()
        if not mine:
            await asyncio.sleep(self.timeout_ms / 1000)
            return None
        taken = self.fetcher.take(mine, self.max_records)
        if not taken:
            await self.fetcher.wait(self.timeout_ms / 1000)
            taken = self.fetcher.take(self.share(), self.max_records)
            if not taken:
                return None
        records: list[InRecord] = []
        first: dict[Partition, int] = {}
        last: dict[Partition, int] = {}
        carry, handed = self.carry, self.fetcher.handed
        for tp, m in taken:
            offset = m.offset()
            if tp not in first:
                first[tp] = offset
            last[tp] = handed[tp] = offset
            key = m.key()
            headers = m.headers()
            records.append(
                InRecord(
                    m.value() or b"",
                    key.decode("utf-8", errors="replace") if key is not None else None,
                    m.timestamp()[1],
                    (tp.topic, tp.partition, offset),
                    tp,
                    carried(headers, carry) if headers else None,
                )
            )
        return Batch(records, first, last)

    def rewind(self, batch: Batch, partitions: list[Partition] | None = None) -> None:
        for tp, offset in batch.first.items():
            if partitions is None or tp in partitions:
                assert isinstance(tp, TopicPartition)
                self.fetcher.seek(tp, offset)

    async def commit(self, offsets: Mapping[Partition, int]) -> None:
        await self.commit_ends(await self.ends(offsets))

    async def ends(self, offsets: Mapping[Partition, int]) -> Mapping[Partition, int]:
        return self.fetcher.past_markers(offsets)

    async def commit_ends(self, ends: Mapping[Partition, int]) -> None:
        parts = [
            confluent_kafka.TopicPartition(tp.topic, tp.partition, off)
            for tp, off in ends.items()
            if isinstance(tp, TopicPartition)
        ]
        if not parts:
            return
        try:
            await self.fetcher.commit(parts, self.commit_timeout_s)
        except Exception as exc:
            if _moved(exc):  # (a rebalance took them: the new owner redoes the batch)
                log.warning("commit refused after a rebalance: %s", exc)
                return
            raise

    def scope(self, partition: Partition) -> str:
        assert isinstance(partition, TopicPartition)
        return f"{self.group_id}/{partition.topic}/{partition.partition}"


def _moved(exc: BaseException) -> bool:
    text = str(exc)
    return any(
        code in text
        for code in (
            "UNKNOWN_MEMBER_ID",
            "FENCED_MEMBER_EPOCH",
            "STALE_MEMBER_EPOCH",
            "ILLEGAL_GENERATION",
            "_STATE",
        )
    )
