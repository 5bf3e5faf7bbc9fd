"""Exactly-once on confluent-kafka: one transactional producer per owned input partition,
its offsets sent with the consumer's group metadata.

Two fences stop a zombie (a worker that lost a partition but still runs):

- **the group (KIP-447).** `send_offsets_to_transaction` sends the consumer's group
  metadata, member id and member epoch included; the group coordinator refuses the
  offsets of a member that no longer owns the partition, and the transaction fails. A
  new owner's offset fetch (read_committed) waits for a transaction still carrying
  offsets, so it never reads an offset about to move.
- **the transactional id**, as on aiokafka (`kafka_txn`): it follows the partition, so
  the new owner's `init_transactions` bumps the epoch and settles whatever the old owner
  left open at once, instead of holding read_committed readers back until the
  transaction timeout.

Why one producer per partition, not one per worker as KIP-447 allows: the checkpoint
(`batch.transactional`) keeps a transaction per partition, each committed when its own
interval is up and aborted (rewound) on its own. One producer has one transaction at a
time, so partitions sharing it would commit and abort together.

So the order on assignment is: start the producers (fencing and settling the old
owner's transactions), then read the committed offsets; the fetcher starts each
partition there (`Fetcher.starts`). With KIP-848 a revocation takes only the partitions
that move, so no producer is kept across one: a revoked partition's is closed.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import confluent_kafka
from aiokafka import TopicPartition
from aiokafka.errors import KafkaError, TransactionalIdAuthorizationFailed

from worker.adapters.broker.confluent_clients import Blocking, translated
from worker.adapters.broker.confluent_sink import ConfluentSink
from worker.adapters.broker.confluent_source import Fetcher
from worker.adapters.broker.kafka_txn import ABORT_TIMEOUT_S, PartitionGone, transactional_id
from worker.ports import OutputsRefused, OutRecord, Partition

log = logging.getLogger("derender.worker")
T = TypeVar("T")

# After a partition's transaction failed, how long before its producer is started again
# (when the partition is still ours): a fenced zombie hears of it from the group first.
REOPEN_AFTER_S = 1.0


class ConfluentTransactions:
    """The producers of the owned input partitions, and their transactions (`ports.
    Transactions`). `make_producer(transactional_id)` builds a librdkafka producer."""

    def __init__(
        self,
        make_producer: Callable[[str], Any],
        fetcher: Fetcher,
        blocking: Blocking,
        *,
        group_id: str,
        id_prefix: str,
        output_topic: str,
        dlq_topic: str,
        control_topic: str | None = None,
        on_misrouted: Callable[[], object] | None = None,
        timeout_s: float = 30.0,
        reset: str = "earliest",
    ) -> None:
        self._make = make_producer
        self.fetcher = fetcher
        self.blocking = blocking
        self.group_id = group_id
        self.id_prefix = id_prefix
        self.sink_args = (output_topic, dlq_topic, control_topic, on_misrouted)
        self.timeout_s = timeout_s
        self.reset = reset
        self._sinks: dict[TopicPartition, ConfluentSink] = {}
        self._open: set[TopicPartition] = set()  # partitions with a transaction begun
        self._busy: Counter[int] = Counter()  # calls under way, per producer (by id)
        self._retiring: dict[int, Any] = {}  # producers closed once no call uses them
        self._tasks: set[asyncio.Task[None]] = set()
        self.lost: set[TopicPartition] = set()
        self.refused: TransactionalIdAuthorizationFailed | None = None

    def ready(self, tp: TopicPartition) -> bool:
        if self.refused is not None:
            raise self.refused
        return tp in self._sinks

    # -- assignment -----------------------------------------------------------------

    async def open(self, partitions: list[TopicPartition], reset: str | None = None) -> None:
        """Start a producer per partition (fencing the old owner, settling its
        transactions), then note each partition's committed offset for the fetcher."""
        todo = [tp for tp in partitions if tp not in self._sinks]
        if not todo:
            return
        made = await asyncio.gather(*(self._start(tp) for tp in todo), return_exceptions=True)
        started = {
            tp: p for tp, p in zip(todo, made, strict=True) if not isinstance(p, BaseException)
        }
        failed = next((p for p in made if isinstance(p, BaseException)), None)
        try:
            committed = await self.fetcher.committed(list(started), self.timeout_s)
        except BaseException:
            for producer in started.values():
                self._retire(producer)
            raise
        for tp, producer in started.items():
            if (offset := committed.get(tp, -1)) >= 0:
                self.fetcher.starts[tp] = offset
            self._sinks[tp] = ConfluentSink(
                producer, self.blocking, *self.sink_args, timeout_s=self.timeout_s
            )
        self.lost.difference_update(started)
        if isinstance(failed, TransactionalIdAuthorizationFailed):
            self.refused = failed  # (the lanes' next `ready` ends the worker with it)
            return
        if failed is not None:
            raise failed

    async def _start(self, tp: TopicPartition) -> Any:
        producer = await self.blocking.run(
            self._make, transactional_id(self.id_prefix, self.group_id, tp), timeout_s=10
        )
        try:
            await self.blocking.run(
                producer.init_transactions, self.timeout_s, timeout_s=self.timeout_s + 1
            )
        except BaseException:
            self._retire(producer)
            raise
        return producer

    async def close(self, partitions: list[TopicPartition], abort: bool = True) -> None:
        """Partitions leave us: abort what is open (unless a call still uses the
        producer, or `abort` is False) and close their producers."""
        sinks = [(tp, self._sinks.pop(tp)) for tp in partitions if tp in self._sinks]
        aborts = [
            asyncio.wait_for(self._abort(tp, s.producer), ABORT_TIMEOUT_S)
            for tp, s in sinks
            if abort and tp in self._open and not self._busy[id(s.producer)]
        ]
        if aborts:
            await asyncio.gather(*aborts, return_exceptions=True)
        for tp, s in sinks:
            self._open.discard(tp)
            self._retire(s.producer)

    async def close_all(self) -> None:
        await self.close(list(self._sinks))
        for task in self._tasks:
            task.cancel()
        # Give the retiring producers a moment to close (each bounded on its thread).
        await asyncio.sleep(0)

    # -- one batch ------------------------------------------------------------------

    async def begin(self, partitions: list[Partition]) -> None:
        for p in partitions:
            producer = self._sink(p).producer
            try:
                producer.begin_transaction()  # (local: no round trip)
            except Exception as exc:
                raise translated(exc) from exc
            self._open.add(p)

    async def send(self, outputs: list[OutRecord], dead_letters: list[OutRecord]) -> None:
        outs: dict[Partition, list[OutRecord]] = {}
        dls: dict[Partition, list[OutRecord]] = {}
        for rec in outputs:
            outs.setdefault(rec.source_partition, []).append(rec)
        for rec in dead_letters:
            dls.setdefault(rec.source_partition, []).append(rec)
        parts = list(outs.keys() | dls.keys())
        sinks = [self._sink(p) for p in parts]
        results = await asyncio.gather(
            *(
                self._use(s.producer, s.send(outs.get(p, []), dls.get(p, [])))
                for p, s in zip(parts, sinks, strict=True)
            ),
            return_exceptions=True,
        )
        refused: list[tuple[OutRecord, BaseException]] = []
        for result in results:
            if isinstance(result, OutputsRefused):
                refused += result.refused
            elif isinstance(result, BaseException):
                raise result
        if refused:
            raise OutputsRefused(refused)

    async def commit(self, offsets: Mapping[Partition, int]) -> list[Partition]:
        parts = list(offsets)
        # (Taken now, in the caller's synchronous stretch after its fence check.)
        producers = [self._sink(p).producer for p in parts]
        ends = self.fetcher.past_markers(offsets)
        results = await asyncio.gather(
            *(
                self._use(pr, self._commit_one(pr, p, ends[p]))
                for pr, p in zip(producers, parts, strict=True)
            ),
            return_exceptions=True,
        )
        failed: list[Partition] = []
        failed_producers = []
        for p, pr, result in zip(parts, producers, results, strict=True):
            self._open.discard(p)
            if isinstance(result, BaseException):
                log.warning(
                    "the transaction of %s failed (%s: %s): dropping its producer",
                    _name(p),
                    type(result).__name__,
                    result,
                )
                failed.append(p)
                failed_producers.append(pr)
        if failed:
            await self.drop(failed, failed_producers)
        return failed

    async def _commit_one(self, producer: Any, p: Partition, offset: int) -> None:
        assert isinstance(p, TopicPartition)
        at = [confluent_kafka.TopicPartition(p.topic, p.partition, offset)]
        run, t = self.blocking.run, self.timeout_s
        metadata = await self.fetcher.group_metadata(t)  # (this member, as of now: KIP-447)
        await run(producer.send_offsets_to_transaction, at, metadata, t, timeout_s=t + 1)
        await run(producer.commit_transaction, t, timeout_s=t + 1)

    async def abort(self, partitions: list[Partition]) -> None:
        todo = [(p, self._sinks[p]) for p in partitions if p in self._sinks and p in self._open]
        results = await asyncio.gather(
            *(
                self._use(s.producer, asyncio.wait_for(self._abort(p, s.producer), ABORT_TIMEOUT_S))
                for p, s in todo
            ),
            return_exceptions=True,
        )
        bad = [
            (p, s.producer)
            for (p, s), r in zip(todo, results, strict=True)
            if isinstance(r, BaseException)
        ]
        if bad:
            await self.drop([p for p, _ in bad], [pr for _, pr in bad])

    async def _abort(self, tp: TopicPartition, producer: Any) -> None:
        self._open.discard(tp)
        t = self.timeout_s
        await self.blocking.run(producer.abort_transaction, t, timeout_s=t + 1)

    async def drop(self, partitions: list[Partition], producers: list[Any] | None = None) -> None:
        """Give the partitions up for now: their producers closed (a failed commit or
        abort left them in an unknown state). Still ours after `REOPEN_AFTER_S`, a
        partition gets a new producer (which fences the old one and settles what it left
        open) and is read again from its committed offset."""
        if producers is not None:
            partitions = [
                p
                for p, pr in zip(partitions, producers, strict=True)
                if (sink := self._sinks.get(p)) is None or sink.producer is pr
            ]
        tps = [p for p in partitions if isinstance(p, TopicPartition)]
        self.lost.update(tps)
        await self.close(tps, abort=False)
        task = asyncio.create_task(self._reopen(tps))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _reopen(self, tps: list[TopicPartition]) -> None:
        await asyncio.sleep(REOPEN_AFTER_S)
        f = self.fetcher
        again = [tp for tp in tps if tp in self.lost and tp in f.owned and tp not in f.revoking]
        if not again:
            return
        try:
            await self.open(again)
        except KafkaError as exc:
            log.warning(
                "restarting the producers of %s failed: %s", ", ".join(map(_name, again)), exc
            )
            task = asyncio.create_task(self._reopen(again))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return
        for tp in again:
            start = f.starts.pop(tp, None)
            # (No committed offset: the group's reset policy, as on a first assignment.)
            f.seek(tp, start if start is not None else (-1 if self.reset == "latest" else -2))

    async def _use(self, producer: Any, call: Awaitable[T]) -> T:
        key = id(producer)
        self._busy[key] += 1
        try:
            return await call
        finally:
            self._busy[key] -= 1
            if not self._busy[key]:
                del self._busy[key]
                if (retired := self._retiring.pop(key, None)) is not None:
                    self._close_later(retired)

    def _retire(self, producer: Any) -> None:
        if self._busy[id(producer)]:
            self._retiring[id(producer)] = producer  # (closed when its last call ends)
        else:
            self._close_later(producer)

    def _close_later(self, producer: Any) -> None:
        """Close on a pool thread: closing a handle waits for librdkafka's threads."""
        task = asyncio.ensure_future(self.blocking.run(_close, producer, timeout_s=10))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    def _sink(self, p: Partition) -> ConfluentSink:
        sink = self._sinks.get(p)
        if sink is None:
            raise PartitionGone(f"no transactional producer for {_name(p)} (any more)")
        return sink


def _close(producer: Any) -> None:
    producer.purge()
    producer.close()


def _name(p: Partition) -> str:
    return f"{p.topic}/{p.partition}" if isinstance(p, TopicPartition) else str(p)
