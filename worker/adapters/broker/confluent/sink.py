"""The Kafka sink on confluent-kafka: a batch's outputs and dead letters handed to
librdkafka, then one flush on a pool thread that returns when every record is acked.

`produce` only queues (librdkafka batches per partition in C), so it runs on the event
loop; the flush waits for the acks and runs the delivery callbacks on its own thread.
Partitions are chosen as aiokafka and the Java client do (murmur2 of the key,
`partitioner=murmur2_random`), so a request's outputs land where either client puts them.
A record's reply partition (`OutRecord.partition`) wins if the topic has it; else the
key's partition, with a warning once per request. A record refused for itself (too large)
is a data error: the rest is delivered and `OutputsRefused` names it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from worker.adapters.broker.confluent.clients import Blocking, translated
from worker.adapters.broker.outputs import Misrouted
from worker.constants import CONTROL
from worker.failures import Kind, classify
from worker.ports import OutputsRefused, OutRecord

# How often a topic's partition count is read again when a record names a partition past
# the one known (partitions added to the output topic).
PARTITIONS_REFRESH_S = 10.0

# A record librdkafka could not deliver: it, where it went (topic, key, partition), why.
_Failed = tuple[OutRecord, str, bytes | None, int, BaseException]
_Delivered = Callable[[OutRecord, str, bytes | None, int], Callable[[Any, Any], None]]


class ConfluentSink:
    """`Sink` over a confluent-kafka Producer (made and closed by its owner)."""

    def __init__(
        self,
        producer: Any,
        blocking: Blocking,
        output_topic: str,
        dlq_topic: str,
        control_topic: str | None = None,
        on_misrouted: Callable[[], object] | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        self.producer = producer
        self.blocking = blocking
        self.output_topic = output_topic
        self.dlq_topic = dlq_topic
        self.control_topic = control_topic
        self.timeout_s = timeout_s
        self.misrouted = Misrouted(on_misrouted)
        self._counts: dict[str, tuple[int, float]] = {}  # topic → (partitions, read at)

    async def send(self, outputs: list[OutRecord], dead_letters: list[OutRecord]) -> None:
        refused: list[tuple[OutRecord, BaseException]] = []
        failed: list[_Failed] = []
        delivered = _collect(failed)

        controls = []
        if self.control_topic is not None:
            controls = [o for o in outputs if o.kind == CONTROL]
            if controls:
                outputs = [o for o in outputs if o.kind != CONTROL]
        count = await self._count(self.output_topic, outputs)
        for rec in outputs:
            partition = -1
            if rec.partition is not None:
                if rec.partition < count:
                    partition = rec.partition
                else:
                    self.misrouted(rec, self.output_topic, count)
            await self._produce(
                self.output_topic, rec, rec.key.encode(), partition, delivered, refused
            )
        if controls:
            assert self.control_topic is not None
            for rec in controls:
                await self._produce(
                    self.control_topic, rec, rec.key.encode(), -1, delivered, refused
                )
        for rec in dead_letters:
            await self._produce(
                self.dlq_topic, rec, rec.key.encode() or None, -1, delivered, refused
            )
        await self.flush()
        for *_, exc in failed:
            if classify(exc) is not Kind.DATA:
                raise exc
        # The broker refuses a whole record batch for one record too large: each record
        # of a refused batch is sent again alone, to find the ones refused for
        # themselves (a redelivered one is dropped downstream by its headers).
        for rec, topic, key, partition, _ in failed:
            again: list[_Failed] = []
            await self._produce(topic, rec, key, partition, _collect(again), refused)
            await self.flush()
            for r, *_, exc in again:
                if classify(exc) is not Kind.DATA:
                    raise exc
                refused.append((r, exc))
        if refused:
            raise OutputsRefused(refused)

    async def flush(self) -> None:
        left = await self.blocking.run(
            self.producer.flush, self.timeout_s, timeout_s=self.timeout_s + 1
        )
        if left:
            raise TimeoutError(f"{left} outputs not acknowledged within {self.timeout_s:.0f}s")

    async def _produce(
        self,
        topic: str,
        rec: OutRecord,
        key: bytes | None,
        partition: int,
        delivered: _Delivered,
        refused: list[tuple[OutRecord, BaseException]],
    ) -> None:
        while True:
            try:
                self.producer.produce(
                    topic,
                    rec.value,
                    key,
                    partition,
                    on_delivery=delivered(rec, topic, key, partition),
                    headers=rec.headers,
                )
                return
            except BufferError:  # librdkafka's queue is full: let some of it go out
                await self.blocking.run(self.producer.poll, 0.1, timeout_s=self.timeout_s)
            except Exception as exc:
                err = translated(exc)
                if classify(err) is not Kind.DATA:
                    raise err from exc
                refused.append((rec, err))
                return

    async def _count(self, topic: str, records: list[OutRecord]) -> int:
        """The topic's partition count, read when first needed and again (at most every
        PARTITIONS_REFRESH_S) when a record names a partition past it."""
        known = self._counts.get(topic)
        needed = max((r.partition for r in records if r.partition is not None), default=-1)
        now = time.monotonic()
        if known is not None and (needed < known[0] or now - known[1] < PARTITIONS_REFRESH_S):
            return known[0]
        if needed < 0 and known is None:
            return 0  # (no record names one: the key decides)
        meta = await self.blocking.run(
            self.producer.list_topics, topic, self.timeout_s, timeout_s=self.timeout_s + 1
        )
        count = len(meta.topics[topic].partitions) if topic in meta.topics else 0
        self._counts[topic] = (count, now)
        return count


def _collect(failed: list[_Failed]) -> _Delivered:
    """Delivery callbacks that note each record librdkafka failed to deliver, with where
    it was sent (a refused one is sent there again)."""

    def delivered(
        rec: OutRecord, topic: str, key: bytes | None, partition: int
    ) -> Callable[[Any, Any], None]:
        def cb(err: Any, _msg: Any) -> None:
            if err is not None:
                failed.append((rec, topic, key, partition, translated(err)))

        return cb

    return delivered
