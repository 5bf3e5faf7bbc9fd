"""Exactly-once on confluent-kafka: a transactional producer per owned input partition,
taken from the worker's own warm ones, its offsets sent with the consumer's group
metadata.

The group fences a zombie (a worker that lost a partition but still runs), as KIP-447
has it: `send_offsets_to_transaction` sends the consumer's group metadata, member id and
member epoch included, and the group coordinator refuses the offsets of a member that no
longer owns the partition: the zombie's transaction fails and is aborted. A new owner
starts the partition where librdkafka's read_committed offset fetch says, which asks for
stable offsets: it waits for a transaction still carrying offsets of the partition, so it
never starts from an offset about to move.
(aiokafka sends the group id alone, so there the transactional id has to follow the
partition and do the fencing: `kafka_txn`.)

So the transactional ids are the worker's own (`<prefix><group>-<topic>-w<member>-<n>`),
not the partition's, and producers are made and initialized ahead of need
(`WARM_PRODUCERS`, before the group is joined): a partition that moves here takes one,
with no InitProducerId on its way. The price: a worker that dies with a transaction open
has it aborted by the broker at `--transaction-timeout-ms`, not by the next owner
(docs/design/rebalancing.md).

A producer per partition, not per worker: each partition's transaction commits and
aborts on its own (`batch.transactional`), and a producer has one at a time.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import confluent_kafka
from aiokafka import TopicPartition
from aiokafka.errors import (
    KafkaConnectionError,
    KafkaError,
    TransactionalIdAuthorizationFailed,
)

from worker.adapters.broker.confluent.clients import Blocking, translated
from worker.adapters.broker.confluent.fetch import Fetcher
from worker.adapters.broker.confluent.sink import ConfluentSink
from worker.adapters.broker.kafka_txn import ABORT_TIMEOUT_S, PartitionGone
from worker.adapters.broker.outputs import by_source, raise_refusals
from worker.ports import OutRecord, Partition

log = logging.getLogger("derender.worker")
T = TypeVar("T")

# Producers kept initialized ahead of need (and at most twice as many kept after
# revocations hand theirs back).
WARM_PRODUCERS = 8
# After a partition's transaction failed, how long before its producer is started again
# (when the partition is still ours): a fenced zombie hears of it from the group first.
REOPEN_AFTER_S = 1.0
# How long closing a producer waits for the abort of a transaction it left open, and
# before that for the calls still running on it (each ends within its own bound).
CLOSE_ABORT_S = 5.0
CLOSE_WAIT_S = 70.0


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
        input_topic: str,
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
        self.input_topic = input_topic
        self.id_prefix = id_prefix
        self.sink_args = (output_topic, dlq_topic, control_topic, on_misrouted)
        self.timeout_s = timeout_s
        self.reset = reset
        self._sinks: dict[TopicPartition, ConfluentSink] = {}
        self._open: set[TopicPartition] = set()  # partitions with a transaction begun
        self._busy: Counter[int] = Counter()  # calls under way, per producer (by id)
        self._retiring: dict[int, Any] = {}  # producers closed once no call uses them
        self._tasks: set[asyncio.Task[None]] = set()
        self._warm: list[Any] = []  # initialized producers, no partition yet
        self._member = uuid.uuid4().hex[:12]  # (this worker's transactional ids)
        self._ids = itertools.count()
        # Per producer (by id): its transactional id and how many broker outages had been
        # heard of when it was made (`brokers_lost`); per dropped partition, the id its
        # next producer takes over.
        self._made: dict[int, tuple[str, int]] = {}
        self._outages = 0
        self._outage = asyncio.Event()  # (set and replaced at each outage)
        self._heir: dict[TopicPartition, str] = {}
        self._filling: asyncio.Task[None] | None = None
        self.lost: set[TopicPartition] = set()
        self._held: set[Partition] = set()  # committing in the background (`hold`)
        # Partitions whose producer `open` is starting, each with the task starting it.
        self._opening: dict[TopicPartition, asyncio.Task[None]] = {}
        self.refused: TransactionalIdAuthorizationFailed | None = None

    def ready(self, tp: TopicPartition) -> bool:
        """As `kafka_txn.Transactions.ready`: producer ready, no commit running."""
        if self.refused is not None:
            raise self.refused
        return tp in self._sinks and tp not in self._held

    def hold(self, partitions: list[Partition]) -> None:
        self._held.update(partitions)

    def release(self, partitions: list[Partition]) -> None:
        self._held.difference_update(partitions)

    # -- assignment -----------------------------------------------------------------

    async def open(self, partitions: list[TopicPartition], reset: str | None = None) -> None:
        """A producer for each new partition: a warm one at once, else one started in the
        background (`opened` waits), so no partition waits for another's InitProducerId;
        no lane takes a partition before its producer is ready. One failing to start is
        tried again as `drop` does. librdkafka starts each partition at its committed
        offset, asked for as stable (waiting for a transaction carrying offsets)."""
        todo = [tp for tp in partitions if tp not in self._sinks and tp not in self._opening]
        if not todo:
            return
        cold = []
        for tp in todo:
            if tp in self._heir or not self._warm:
                cold.append(tp)
                continue
            producer = self._warm.pop()
            if self._stale(producer):  # (made again under its own id: `_stale` says why)
                self._heir[tp] = self._made[id(producer)][0]
                self._retire(producer)
                cold.append(tp)
            else:
                self._ready(tp, producer)
        if cold:
            task = asyncio.create_task(self._open_cold(cold))
            for tp in cold:
                self._opening[tp] = task
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self._refill()

    async def opened(self) -> None:
        """Wait for the producers `open` is still starting."""
        await asyncio.gather(*set(self._opening.values()), return_exceptions=True)

    def _ready(self, tp: TopicPartition, producer: Any) -> None:
        self._sinks[tp] = ConfluentSink(
            producer, self.blocking, *self.sink_args, timeout_s=self.timeout_s
        )
        self.lost.discard(tp)

    async def _open_cold(self, tps: list[TopicPartition]) -> None:
        me = asyncio.current_task()
        # (One taking over a dropped producer's id fences it: `drop`.)
        starts = (self._new(self._heir.pop(tp, None)) for tp in tps)
        made = await asyncio.gather(*starts, return_exceptions=True)
        failed = []
        for tp, producer in zip(tps, made, strict=True):
            if self._opening.get(tp) is not me:  # (revoked meanwhile: not ours to use)
                if not isinstance(producer, BaseException):
                    self._shelve(producer)
                continue
            del self._opening[tp]
            if isinstance(producer, TransactionalIdAuthorizationFailed):
                self.refused = producer  # (the lanes' next `ready` ends the worker with it)
            elif isinstance(producer, BaseException):
                failed.append(tp)
                log.warning("starting the producer of %s failed: %s", _name(tp), producer)
            else:
                self._ready(tp, producer)
        if failed:
            self.lost.update(failed)
            self._reopen_later(failed)

    async def warm(self) -> None:
        """Make and initialize the warm producers (before the group is joined)."""
        need = WARM_PRODUCERS - len(self._warm)
        if need <= 0:
            return
        made = await asyncio.gather(*(self._new() for _ in range(need)), return_exceptions=True)
        for producer in made:
            if isinstance(producer, BaseException):
                log.warning("starting a transactional producer failed: %s", producer)
            else:
                self._warm.append(producer)

    def _refill(self) -> None:
        if self._filling is None or self._filling.done():
            self._filling = task = asyncio.create_task(self.warm())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _new(self, tid: str | None = None) -> Any:
        # (Under the same prefix as aiokafka's per-partition ids: one prefixed ACL.)
        if tid is None:
            tid = f"{self.id_prefix}{self.group_id}-{self.input_topic}-w{self._member}-"
            tid += str(next(self._ids))
        producer = await self.blocking.run(self._make, tid, timeout_s=10)
        self._made[id(producer)] = (tid, self._outages)
        try:
            await self.blocking.run(
                producer.init_transactions, self.timeout_s, timeout_s=self.timeout_s + 1
            )
        except BaseException:
            self._retire(producer)
            raise
        return producer

    def brokers_lost(self) -> None:
        """Every broker was unreachable (the consumer's librdkafka said so). librdkafka
        then bootstraps anew, and a producer may keep a retired broker as its group
        coordinator: its next `send_offsets_to_transaction` would wait for it for ever.
        So each producer made before now is made again before its next transaction
        (`_stale`), and a commit under way gives its offsets up (`_commit_one`)."""
        self._outages += 1
        self._outage.set()
        self._outage = asyncio.Event()

    def _stale(self, producer: Any) -> bool:
        """Made before the last outage: it is made again under its own transactional id
        before its next transaction. The new one's InitProducerId fences it, and the new
        one's next commit also settles offsets its last commit left pending, should the
        restarted broker have skipped that commit's marker."""
        made = self._made.get(id(producer))
        return made is not None and made[1] < self._outages

    async def close(self, partitions: list[TopicPartition], abort: bool = True) -> None:
        """Partitions leave us: abort what is open (unless a call still uses the
        producer, or `abort` is False) and close their producers."""
        for tp in partitions:  # (a producer still starting for one is shelved when done)
            self._opening.pop(tp, None)
        sinks = [(tp, self._sinks.pop(tp)) for tp in partitions if tp in self._sinks]
        idle = [(tp, s) for tp, s in sinks if abort and not self._busy[id(s.producer)]]
        opened = [(tp, s) for tp, s in idle if tp in self._open]
        results = await asyncio.gather(
            *(asyncio.wait_for(self._abort(tp, s.producer), ABORT_TIMEOUT_S) for tp, s in opened),
            return_exceptions=True,
        )
        # A producer whose transaction ended (committed before the revocation, or
        # aborted now) is clean: kept warm for the next partition. Any other is closed.
        clean = {id(s.producer) for _, s in idle} - {
            id(s.producer)
            for (_, s), r in zip(opened, results, strict=True)
            if isinstance(r, BaseException)
        }
        for tp, s in sinks:
            self._open.discard(tp)
            if id(s.producer) in clean:
                self._shelve(s.producer)
            else:
                self._retire(s.producer)

    def _shelve(self, producer: Any) -> None:
        """A producer with no transaction open: kept warm, or closed if enough are."""
        if len(self._warm) < 2 * WARM_PRODUCERS:
            self._warm.append(producer)
        else:
            self._retire(producer)

    async def close_all(self) -> None:
        await self.close(list(self._sinks))
        warm, self._warm = self._warm, []
        for producer in warm:
            self._retire(producer)
        for task in self._tasks:
            task.cancel()
        # Give the retiring producers a moment to close (each bounded on its thread).
        await asyncio.sleep(0)

    # -- one batch ------------------------------------------------------------------

    async def begin(self, partitions: list[Partition]) -> None:
        for p in partitions:
            sink = self._sink(p)
            if self._stale(sink.producer):
                try:
                    producer = await self._new(self._made[id(sink.producer)][0])
                except (KafkaError, TimeoutError):
                    # (Still unreachable: the partition waits for its producer, as after
                    # a failed commit.)
                    await self.drop([p], [sink.producer])
                    raise
                if self._sinks.get(p) is not sink:
                    # Revoked (its old producer maybe kept warm) or dropped meanwhile: the
                    # new one is not the partition's, nor is the old one ours to close.
                    self._retire(producer)
                    raise PartitionGone(f"{_name(p)} given up as its producer was made again")
                log.info("%s: its transactional producer made again after an outage", _name(p))
                self._retire(sink.producer)
                self._sinks[p] = sink = ConfluentSink(
                    producer, self.blocking, *self.sink_args, timeout_s=self.timeout_s
                )
            producer = sink.producer
            try:
                producer.begin_transaction()  # (local: no round trip)
            except Exception as exc:
                raise translated(exc) from exc
            self._open.add(p)

    async def send(self, outputs: list[OutRecord], dead_letters: list[OutRecord]) -> None:
        parts, outs, dls = by_source(outputs, dead_letters)
        sinks = [self._sink(p) for p in parts]
        results = await asyncio.gather(
            *(
                self._use(s.producer, s.send(outs.get(p, []), dls.get(p, [])))
                for p, s in zip(parts, sinks, strict=True)
            ),
            return_exceptions=True,
        )
        raise_refusals(results)

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
        # (This member as of now, KIP-447; PartitionGone if a rebalance took `p`.)
        metadata = await self.fetcher.assigned_metadata([p], t)
        # A producer from before an outage would send its offsets to a retired broker
        # and wait for ever (`brokers_lost`): the batch is done again on a new one.
        if self._stale(producer):
            raise KafkaConnectionError(f"{_name(p)}: its producer predates a broker outage")
        outage = asyncio.ensure_future(self._outage.wait())
        send = asyncio.ensure_future(
            run(producer.send_offsets_to_transaction, at, metadata, t, timeout_s=t + 1)
        )
        await asyncio.wait((send, outage), return_when=asyncio.FIRST_COMPLETED)
        outage.cancel()
        if not send.done():
            send.add_done_callback(lambda f: f.cancelled() or f.exception())
            raise KafkaConnectionError(f"{_name(p)}: every broker was lost as it sent offsets")
        await send
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
        for tp in tps:  # (the next producer takes the id over, and so fences this one)
            if (sink := self._sinks.get(tp)) is not None and id(sink.producer) in self._made:
                self._heir[tp] = self._made[id(sink.producer)][0]
        self.lost.update(tps)
        await self.close(tps, abort=False)
        self._reopen_later(tps)

    def _reopen_later(self, tps: list[TopicPartition]) -> None:
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
            # Sought before a producer makes them ready: a lane would otherwise take records
            # buffered past the failed transaction, and its states would build on that one's.
            committed = await f.committed(again, self.timeout_s)
            for tp in again:
                # (No committed offset: the group's reset policy, as on a first assignment.)
                start = committed.get(tp, -1001)
                f.seek(tp, start if start >= 0 else (-1 if self.reset == "latest" else -2))
            await self.open(again)
        except (KafkaError, TimeoutError) as exc:  # (the partitions stay unready until done)
            log.warning(
                "restarting the producers of %s failed: %s", ", ".join(map(_name, again)), exc
            )
            self._reopen_later(again)

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
        self._made.pop(id(producer), None)
        self._warm = [w for w in self._warm if w is not producer]  # (never handed out)
        task = asyncio.ensure_future(
            self.blocking.run(_close, producer, self.blocking, timeout_s=CLOSE_WAIT_S + 10)
        )
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    def _sink(self, p: Partition) -> ConfluentSink:
        sink = self._sinks.get(p)
        if sink is None:
            raise PartitionGone(f"no transactional producer for {_name(p)} (any more)")
        return sink


def _close(producer: Any, blocking: Blocking) -> None:
    if not blocking.wait_idle(producer, CLOSE_WAIT_S):
        log.warning("a transactional producer still busy after %.0fs: left open", CLOSE_WAIT_S)
        return
    # A transaction left open holds every read_committed reader of the partitions it
    # wrote until the broker times it out: abort it (no transaction open: refused at once).
    try:
        producer.abort_transaction(CLOSE_ABORT_S)
    except Exception:  # (none open, or the producer is fenced: nothing to abort here)
        producer.purge()
    producer.close()


def _name(p: Partition) -> str:
    return f"{p.topic}/{p.partition}" if isinstance(p, TopicPartition) else str(p)
