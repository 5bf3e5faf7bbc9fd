"""The Kafka sink: a batch's outputs and dead letters produced in per-partition batches.

Why batches and not one `await producer.send()` per output: each send is a coroutine with
a metadata check, the partitioner and an accumulator append, ~12 µs of CPU per record,
about a fifth of the worker's whole per-record cost. Filling one record batch per
partition and handing it over with `send_batch` costs ~6 µs (bench/README.md). Partitions
are the ones `send` would pick (the default partitioner: murmur2 of the key), so every
output of a request still goes to one partition, in order. An output whose request names a
reply partition (`OutRecord.partition`) goes to that partition of the output topic instead;
one the topic does not have is written to the key's partition (never lost, never a failed
batch), with a warning naming the request and the partition, once per request.

An output the broker refuses for itself (larger than the topic's `max.message.bytes`) is
a data error, not an outage: the sink sends that partition's records again one per batch,
so every other record is delivered, and raises `OutputsRefused` naming the refused ones.
(The batches are kept under the topics' limit (`kafka.within_limit`), so a refused batch
holds that one record: sending others again would put them after later outputs.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.partitioner import DefaultPartitioner

from worker.adapters.broker.outputs import Misrouted
from worker.constants import CONTROL
from worker.failures import Kind, classify
from worker.ports import OutputsRefused, OutRecord

# Output keys whose partition is remembered (per topic), about 100 bytes each.
PARTITION_CACHE_MAX = 100_000

_Record = tuple[bytes | None, bytes, list[tuple[str, bytes]]]


class KafkaSink:
    """`Sink` over an aiokafka producer (started and stopped by its owner)."""

    def __init__(
        self,
        producer: AIOKafkaProducer,
        output_topic: str,
        dlq_topic: str,
        control_topic: str | None = None,
        on_misrouted: Callable[[], object] | None = None,
    ) -> None:
        self.producer = producer
        self.output_topic = output_topic
        self.dlq_topic = dlq_topic
        # `control` outputs go here (`--control-topic`), in the same send (and under
        # exactly-once the same transaction) as the outputs.
        self.control_topic = control_topic
        self._partitioner = DefaultPartitioner()
        # topic → (its partitions, key → partition): see _partition.
        self._cache: dict[str, tuple[list[int], dict[bytes | None, int]]] = {}
        # Outputs that named a reply partition the output topic lacks (sent by key instead).
        self.misrouted = Misrouted(on_misrouted)

    async def send(self, outputs: list[OutRecord], dead_letters: list[OutRecord]) -> None:
        controls: list[OutRecord] = []
        if self.control_topic is not None:
            controls = [o for o in outputs if o.kind == CONTROL]
            if controls:
                outputs = [o for o in outputs if o.kind != CONTROL]
        pending = await self._send_all(
            self.output_topic, outputs, lambda o: o.key.encode(), routed=True
        )
        if controls:
            assert self.control_topic is not None
            pending += await self._send_all(self.control_topic, controls, lambda o: o.key.encode())
        pending += await self._send_all(
            self.dlq_topic, dead_letters, lambda d: d.key.encode() or None
        )
        if not pending:
            return
        results = await asyncio.gather(*(f for f, _ in pending), return_exceptions=True)
        refused: list[tuple[OutRecord, BaseException]] = []
        for (_, (topic, partition, records)), result in zip(pending, results, strict=True):
            if not isinstance(result, BaseException):
                continue
            if classify(result) is not Kind.DATA:
                raise result
            refused += await self._one_by_one(topic, partition, records)
        if refused:
            raise OutputsRefused(refused)

    async def _send_all(
        self, topic: str, records: list[OutRecord], key_of: Any, routed: bool = False
    ) -> list[tuple[asyncio.Future[Any], tuple[str, int, list[OutRecord]]]]:
        """Append records to one batch per partition (a full batch is sent and replaced);
        returns each sent batch's delivery future with what it held. `routed`: a record's
        own `partition` (its request's reply partition) wins over its key's."""
        if not records:
            return []
        producer = self.producer
        partition_of = await self._partitions(topic)
        partitions = self._cache[topic][0]
        batches: dict[int, tuple[Any, list[OutRecord]]] = {}
        sent = []
        for rec in records:
            key = key_of(rec)
            partition = rec.partition if routed else None
            # (Kafka numbers a topic's partitions 0…N-1.)
            if partition is not None and partition >= len(partitions):
                self.misrouted(rec, topic, len(partitions))
                partition = None
            if partition is None:
                partition = partition_of.get(key)
            if partition is None:
                partition = self._partitioner(key, partitions, partitions)
                partition_of[key] = partition
            entry = batches.get(partition)
            if entry is None:
                entry = batches[partition] = (producer.create_batch(), [])
            batch, held = entry
            if batch.append(key=key, value=rec.value, timestamp=None, headers=rec.headers) is None:
                future = await producer.send_batch(batch, topic, partition=partition)
                sent.append((future, (topic, partition, held)))
                # A fresh batch always takes its first record, whatever its size.
                batch, held = batches[partition] = (producer.create_batch(), [])
                batch.append(key=key, value=rec.value, timestamp=None, headers=rec.headers)
            held.append(rec)
        for partition, (batch, held) in batches.items():
            future = await producer.send_batch(batch, topic, partition=partition)
            sent.append((future, (topic, partition, held)))
        return sent

    async def _partitions(self, topic: str) -> dict[bytes | None, int]:
        partitions = sorted(await self.producer.partitions_for(topic))
        # aiokafka's partitioner hashes in pure Python (~1 µs a key); a request's key
        # recurs in batch after batch, so its partition is kept while the topic's
        # partitions stay the same (the cache is dropped when it grows past its bound).
        cached = self._cache.get(topic)
        if cached is None or cached[0] != partitions or len(cached[1]) > PARTITION_CACHE_MAX:
            cached = self._cache[topic] = (partitions, {})
        return cached[1]

    async def _one_by_one(
        self, topic: str, partition: int, records: list[OutRecord]
    ) -> list[tuple[OutRecord, BaseException]]:
        """Send a refused batch's records again, each alone, in order: which ones are
        refused for themselves? (A redelivered one is dropped downstream by its headers.)"""
        refused: list[tuple[OutRecord, BaseException]] = []
        for rec in records:
            batch = self.producer.create_batch()
            key = rec.key.encode() or None
            batch.append(key=key, value=rec.value, timestamp=None, headers=rec.headers)
            future = await self.producer.send_batch(batch, topic, partition=partition)
            try:
                await future
            except Exception as exc:
                if classify(exc) is not Kind.DATA:
                    raise
                refused.append((rec, exc))
        return refused
