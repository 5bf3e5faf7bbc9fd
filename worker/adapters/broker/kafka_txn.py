"""Exactly-once's Kafka half: one transactional producer per owned input partition.

Why one per partition and not one per worker (what KIP-447 allows): aiokafka's
`send_offsets_to_transaction` sends `TxnOffsetCommit` v0 with the group id only, no
generation or member id, so the group coordinator cannot fence a zombie's offsets. Only
the transactional id can: it is derived from the input partition
(`<prefix><group>-<topic>-<partition>`), so the new owner of a partition starts a
producer with the same id, and its `InitProducerId` bumps the producer epoch (the old
owner's next transactional call fails with `ProducerFenced`) and finishes whatever
transaction the old owner left open (committing one it had asked to commit, aborting any
other) before it returns. Faust and Kafka Streams' first exactly-once mode work the same.

So the order on assignment is: start the producers (which fences and settles the old
owner's transactions), then read the committed offsets and seek there. Reading them first
could see an offset that a pending transaction was about to move, and the batch would be
done twice. Until both steps are done, a partition is not `ready` and no lane polls it.

A revocation parks the partitions' producers (their open transactions aborted) instead of
stopping them: aiokafka's rebalances are eager, every partition is revoked on every
rebalance, and with a sticky assignment (`kafka_assign`) most come straight back. A
partition that comes back reuses its parked producer: no InitProducerId, which was most
of a kept partition's pause. Nobody else can have owned it meanwhile (the parked ones not
reassigned are stopped when the assignment arrives); if somebody did (this member missed
a generation), the producer is fenced, its next commit fails and the partition is dropped
and rejoined, as after any fencing.

Each lane's batch then holds one transaction per partition it spans, run concurrently;
a partition is in one lane only, so a producer never has two transactions at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError, TransactionalIdAuthorizationFailed

from worker.adapters.broker.kafka_sink import KafkaSink
from worker.adapters.broker.kafka_source import past_markers
from worker.adapters.broker.outputs import by_source, raise_refusals
from worker.ports import OutRecord, Partition

log = logging.getLogger("derender.worker")
T = TypeVar("T")

# The longest closing a partition's producer may take (see _stop_quietly).
STOP_TIMEOUT_S = 5.0
# The longest aborting a failed batch's transaction may take. Past it the producer's state
# is unknown, so it is dropped like a failed commit. (Unbounded, an abort after a broker
# restart waited on its coordinator for minutes, holding its lane and any SIGTERM.)
ABORT_TIMEOUT_S = 10.0


class PartitionGone(KafkaError):  # type: ignore[misc]
    """A batch reached a partition whose producer was dropped (revoked, or its last
    transaction failed): the batch is aborted and rewound like after an outage."""


def transactional_id(prefix: str, group_id: str, tp: TopicPartition) -> str:
    return f"{prefix}{group_id}-{tp.topic}-{tp.partition}"


class Transactions:
    """The producers of the owned input partitions, and their transactions.

    `make_producer(transactional_id)` builds an unstarted producer; `consumer` is the
    worker's (read_committed) consumer, used to seek each new partition to its committed
    offset once its producer has settled the old owner's transactions."""

    def __init__(
        self,
        make_producer: Callable[[str], AIOKafkaProducer],
        consumer: AIOKafkaConsumer,
        *,
        group_id: str,
        id_prefix: str,
        output_topic: str,
        dlq_topic: str,
        control_topic: str | None = None,
        on_misrouted: Callable[[], object] | None = None,
    ) -> None:
        self._make = make_producer
        self.consumer = consumer
        self.group_id = group_id
        self.id_prefix = id_prefix
        self.output_topic = output_topic
        self.dlq_topic = dlq_topic
        self.control_topic = control_topic
        self.on_misrouted = on_misrouted
        self._sinks: dict[TopicPartition, KafkaSink] = {}
        # Producers of revoked partitions, until the next assignment says whether they
        # come back (reused) or not (stopped).
        self._parked: dict[TopicPartition, AIOKafkaProducer] = {}
        # The offset this member last committed per partition: the floor of its seek when
        # the partition comes back (`_seek`).
        self._committed: dict[TopicPartition, int] = {}
        # Calls under way on each producer: one a revocation finds busy (a batch that
        # outlived it) is stopped, not parked, so nothing late lands in a reused one.
        self._busy: Counter[AIOKafkaProducer] = Counter()
        self._stopping: set[asyncio.Task[None]] = set()
        # Partitions whose transaction failed: their producer is gone until the group is
        # rejoined (a zombie must not start a new one: that would fence the real owner).
        self.lost: set[TopicPartition] = set()
        # A transactional id the broker refuses (no WRITE ACL): see `open`.
        self.refused: TransactionalIdAuthorizationFailed | None = None
        self._held: set[Partition] = set()  # committing in the background (`hold`)

    def ready(self, tp: TopicPartition) -> bool:
        """Whether a lane may poll `tp` (its producer started, no commit of it running in
        the background); raises the broker's refusal of our transactional ids (`open`),
        which ends the worker with the ACL it lacks."""
        if self.refused is not None:
            raise self.refused
        return tp in self._sinks and tp not in self._held

    def hold(self, partitions: list[Partition]) -> None:
        self._held.update(partitions)

    def release(self, partitions: list[Partition]) -> None:
        self._held.difference_update(partitions)

    # -- assignment -----------------------------------------------------------------

    async def open(self, partitions: list[TopicPartition], reset: str) -> None:
        """Start a producer per partition (fencing the old owner and settling its
        transactions), or take back the one parked when it was revoked from us; stop the
        parked ones of partitions that went elsewhere; then seek each partition to its
        committed offset."""
        parked, self._parked = self._parked, {}
        reused = {tp: parked.pop(tp) for tp in partitions if tp in parked and tp not in self._sinks}
        todo = [tp for tp in partitions if tp not in self._sinks and tp not in reused]
        producers = [self._make(transactional_id(self.id_prefix, self.group_id, tp)) for tp in todo]
        # The parked producers of partitions gone elsewhere are stopped in the background:
        # the kept partitions need not wait for it (their new owners fence them anyway).
        for producer in parked.values():
            task = asyncio.create_task(_stop_quietly(producer))
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)
        try:
            results = await asyncio.gather(*(p.start() for p in producers), return_exceptions=True)
        except BaseException:  # cancelled (the step's time ran out): none may be left running
            await asyncio.gather(*map(_stop_quietly, [*producers, *reused.values()]))
            raise
        failed: BaseException | None = None
        started: dict[TopicPartition, AIOKafkaProducer] = dict(reused)
        for tp, producer, result in zip(todo, producers, results, strict=True):
            if isinstance(result, BaseException):
                failed = failed or result
                await _stop_quietly(producer)
            else:
                started[tp] = producer
        try:
            await asyncio.gather(*(self._seek(tp, reset) for tp in started))
        except BaseException:
            await asyncio.gather(*(_stop_quietly(p) for p in started.values()))
            raise
        # Only now may a lane poll them: a batch fetched before the seek would be done
        # from wherever the consumer happened to be.
        for tp, producer in started.items():
            self._sinks[tp] = KafkaSink(
                producer, self.output_topic, self.dlq_topic, self.control_topic, self.on_misrouted
            )
        self.lost.difference_update(partitions)
        if isinstance(failed, TransactionalIdAuthorizationFailed):
            # Neither waiting nor rejoining mends it, and the rebalance callback that
            # calls `open` could only log it (aiokafka swallows a listener's errors): it
            # is kept for the lanes, whose next poll asks `ready`.
            self.refused = failed
            return
        if failed is not None:
            raise failed

    async def _seek(self, tp: TopicPartition, reset: str) -> None:
        committed = await self.consumer.committed(tp)
        # A partition back with its parked producer (no InitProducerId to settle what it
        # left) can be read before its last commit's markers are written, and aiokafka's
        # OffsetFetch cannot ask for stable offsets: that read gives the offset before it.
        mine = self._committed.get(tp)
        if mine is not None and (committed is None or committed < mine):
            committed = mine
        if committed is not None:
            self.consumer.seek(tp, committed)
        elif reset == "latest":
            await self.consumer.seek_to_end(tp)
        else:
            await self.consumer.seek_to_beginning(tp)

    async def close(self, partitions: list[TopicPartition], abort: bool = True) -> None:
        """Partitions leave us (revoked): abort what is open and park their producers
        until the next assignment (`open`). With `abort` False (the producer already
        failed to), they are stopped instead."""
        sinks = [(tp, self._sinks.pop(tp)) for tp in partitions if tp in self._sinks]
        busy = [s for _, s in sinks if self._busy[s.producer]]
        sinks = [(tp, s) for tp, s in sinks if not self._busy[s.producer]]
        if not abort:
            busy += [s for _, s in sinks]
            sinks = []
        results, _ = await asyncio.gather(
            asyncio.gather(
                *(asyncio.wait_for(_abort_open(s.producer), ABORT_TIMEOUT_S) for _, s in sinks),
                return_exceptions=True,
            ),
            asyncio.gather(*(_stop_quietly(s.producer, abort) for s in busy)),
        )
        for (tp, sink), result in zip(sinks, results, strict=True):
            if isinstance(result, BaseException):  # its state is unknown: not reused
                log.debug("aborting before parking a transactional producer: %s", result)
                await _stop_quietly(sink.producer, False)
            else:
                self._parked[tp] = sink.producer

    async def close_all(self) -> None:
        parked, self._parked = self._parked, {}
        sinks = [self._sinks.pop(tp) for tp in list(self._sinks)]
        await asyncio.gather(
            *(_stop_quietly(s.producer) for s in sinks),
            *map(_stop_quietly, parked.values()),
            *self._stopping,
        )

    # -- one batch ------------------------------------------------------------------

    async def begin(self, partitions: list[Partition]) -> None:
        producers = [self._sink(p).producer for p in partitions]
        await asyncio.gather(*(self._use(pr, pr.begin_transaction()) for pr in producers))

    async def send(self, outputs: list[OutRecord], dead_letters: list[OutRecord]) -> None:
        """Each record through the transaction of the input partition it came from (to
        its request's reply partition of the output topic, if it names one: `KafkaSink`)."""
        parts, outs, dls = by_source(outputs, dead_letters)
        results = await asyncio.gather(
            *(
                self._use(sink.producer, sink.send(outs.get(p, []), dls.get(p, [])))
                for p, sink in zip(parts, [self._sink(p) for p in parts], strict=True)
            ),
            return_exceptions=True,
        )
        raise_refusals(results)

    async def commit(self, offsets: Mapping[Partition, int]) -> list[Partition]:
        """Add each partition's next offset to its transaction and commit it. Returns the
        partitions whose commit failed: fenced (another owner took over), timed out, or
        with an unknown outcome. Their producers are stopped and they are `lost` until
        the group is rejoined, which reads their committed offsets anew."""
        parts = list(offsets)
        # The producers are taken now, in the caller's synchronous stretch (after its
        # fence check), not when each coroutine starts: a rebalance in between could have
        # put another assignment's producer under the same partition.
        producers = [self._sink(p).producer for p in parts]
        results = await asyncio.gather(
            *(
                self._use(pr, self._commit_one(pr, p, offsets[p]))
                for pr, p in zip(producers, parts, strict=True)
            ),
            return_exceptions=True,
        )
        failed: list[Partition] = []
        failed_producers: list[AIOKafkaProducer] = []
        for p, pr, result in zip(parts, producers, results, strict=True):
            if isinstance(result, BaseException):
                log.warning(
                    "the transaction of %s failed (%s: %s): dropping its producer and "
                    "rejoining the group",
                    _name(p),
                    type(result).__name__,
                    result,
                )
                failed.append(p)
                failed_producers.append(pr)
        if failed:
            await self.drop(failed, failed_producers)
        return failed

    async def _commit_one(self, producer: AIOKafkaProducer, p: Partition, offset: int) -> None:
        offsets = await past_markers(self.consumer, {p: offset})
        await producer.send_offsets_to_transaction(offsets, self.group_id)
        await producer.commit_transaction()
        self._committed.update(offsets)

    async def abort(self, partitions: list[Partition]) -> None:
        """Abort the partitions' open transactions (a batch that failed before commit).
        A producer that cannot abort (within ABORT_TIMEOUT_S) is dropped like a failed
        commit."""
        open_ = [p for p in partitions if p in self._sinks]
        producers = [self._sink(p).producer for p in open_]  # (now: see commit)
        results = await asyncio.gather(
            *(
                self._use(pr, asyncio.wait_for(_abort_open(pr), ABORT_TIMEOUT_S))
                for pr in producers
            ),
            return_exceptions=True,
        )
        bad = [
            (p, pr)
            for p, pr, r in zip(open_, producers, results, strict=True)
            if isinstance(r, BaseException)
        ]
        if bad:
            await self.drop([p for p, _ in bad], [pr for _, pr in bad])

    async def drop(
        self, partitions: list[Partition], producers: list[AIOKafkaProducer] | None = None
    ) -> None:
        """Give up the partitions until the group is rejoined. With `producers` (one per
        partition: the ones that failed), a partition is dropped only if it still has that
        producer: one opened since by a new assignment is not the failed one's to close."""
        if producers is not None:
            partitions = [
                p
                for p, pr in zip(partitions, producers, strict=True)
                if (sink := self._sinks.get(p)) is None or sink.producer is pr
            ]
        tps = [p for p in partitions if isinstance(p, TopicPartition)]
        self.lost.update(tps)
        # (No abort: a dropped producer's commit or abort just failed, its state is unknown;
        # the broker aborts what it left open, at the latest at the transaction timeout.)
        await self.close(tps, abort=False)
        # A rejoin settles who owns them: back to us, `open` starts a producer again
        # (after fencing whatever is left); to another worker, that one does it.
        # (aiokafka has no public call for it: the coordinator's own is used.)
        coordinator = getattr(self.consumer, "_coordinator", None)
        if coordinator is not None:
            coordinator.request_rejoin()

    async def _use(self, producer: AIOKafkaProducer, call: Awaitable[T]) -> T:
        self._busy[producer] += 1
        try:
            return await call
        finally:
            self._busy[producer] -= 1
            if not self._busy[producer]:
                del self._busy[producer]

    def _sink(self, p: Partition) -> KafkaSink:
        assert isinstance(p, TopicPartition)
        sink = self._sinks.get(p)
        if sink is None:
            raise PartitionGone(f"no transactional producer for {_name(p)} (any more)")
        return sink


def _name(p: Partition) -> str:
    return f"{p.topic}/{p.partition}" if isinstance(p, TopicPartition) else str(p)


async def _abort_open(producer: AIOKafkaProducer) -> None:
    txn = producer._txn_manager  # (aiokafka has no public "is a transaction open")
    if txn is not None and txn.is_in_transaction():
        await producer.abort_transaction()


async def _stop_quietly(producer: AIOKafkaProducer, abort: bool = True) -> None:
    """Abort an open transaction (left open, it would hold read_committed readers back
    until the transaction timeout), then stop; within STOP_TIMEOUT_S, so that a producer
    that cannot finish (fenced mid-send, its coordinator gone) never holds up a rebalance:
    the broker aborts what it left open at the transaction timeout, or when the
    partition's next owner starts its producer."""
    try:
        if abort:
            await asyncio.wait_for(_abort_open(producer), STOP_TIMEOUT_S)
    except Exception as exc:
        log.debug("aborting before stopping a transactional producer: %s", exc)
    try:
        await asyncio.wait_for(producer.stop(), STOP_TIMEOUT_S)
    except Exception as exc:  # a fenced producer may fail to flush: it is gone anyway
        log.debug("stopping a transactional producer: %s", exc)
