"""The consumer of `--kafka-client confluent` (KIP-848's group protocol), read by one
thread that files each record under its partition for the lanes (`source.ConfluentSource`)
and runs librdkafka's incremental rebalance callbacks. Why it is built so (one queue for
all partitions, bounded revocations, fencing on this thread): docs/design/rebalancing.md.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import confluent_kafka
from aiokafka import TopicPartition

from worker.adapters.broker.confluent.clients import Blocking, ConfluentError, settle, translated
from worker.adapters.broker.confluent.rebalance import (
    CALLBACK_TIMEOUT_S,
    REVOKE_WAIT_S,
    Rebalance,
    RebalanceCallbacks,
    lib_parts,
    part_names,
    tp_of,
)
from worker.adapters.broker.kafka_txn import PartitionGone
from worker.failures import Kind, classify
from worker.ports import Partition

log = logging.getLogger("derender.worker")

# How long one consume of the fetch thread waits: the longest a queued consumer call
# (a commit, a seek) waits for it, when no records come.
CONSUME_WAIT_S = 0.01
# How often the high watermarks are read (the lag gauge).
HIGHS_EVERY_S = 1.0
# Records taken per consume call.
CONSUME_MAX = 500
# A partition with this many batches' records buffered is paused until its lane drains it.
PAUSE_AT = 4

T = TypeVar("T")


class Fetcher(RebalanceCallbacks):
    """The consumer, the one thread that calls it, and the records fetched but not yet
    polled.

    confluent-kafka serializes the calls on a consumer: a call from another thread waits
    until a `consume` under way returns, and one consume after another starves it. So the
    fetch thread makes every call: between two short consumes it runs what the event loop
    queued (`call`, `seek`: commits, seeks, offset reads) in order, and pauses or resumes
    partitions as their files fill and drain (`_apply_pauses`)."""

    def __init__(self, conf: dict[str, Any], blocking: Blocking, max_records: int) -> None:
        self.conf = conf
        self.blocking = blocking
        self.max_records = max_records
        self.consumer: Any = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.owned: set[TopicPartition] = set()
        self._owned_now: tuple[TopicPartition, ...] = ()  # (a copy the fetch thread reads)
        # Partitions being revoked: no lane takes their records any more.
        self.revoking: set[TopicPartition] = set()
        self._files: dict[TopicPartition, deque[Any]] = {}
        self._turn = 0  # which partition `take` serves first
        # Partitions to keep paused (their files are full), as the event loop wants it,
        # and as the fetch thread last applied it to librdkafka (`_apply_pauses`).
        self._paused: set[TopicPartition] = set()
        self._paused_now: frozenset[TopicPartition] = frozenset()
        self._lib_paused: set[TopicPartition] = set()
        # Per partition: the last offset handed to a lane, and the consumer's position
        # as of the records filed (what a commit may step to over transaction markers).
        self.handed: dict[TopicPartition, int] = {}
        self._position: dict[TopicPartition, int] = {}
        self._high: dict[TopicPartition, int] = {}  # high watermarks, for the lag gauge
        # Seeks, numbered when asked (`_seeks`) and when done on the fetch thread
        # (`_applied`): records of a consume that began before a partition's last seek
        # was done were fetched from the old position and are dropped.
        self._seeks = 0
        self._applied = 0
        self._sought: dict[TopicPartition, int] = {}
        self._waiters: list[asyncio.Future[None]] = []
        self._ops: queue.SimpleQueue[Callable[[Any], None]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._running = False
        self._closed: asyncio.Future[None] | None = None
        self.on_revoked: Rebalance | None = None
        self.on_assigned: Rebalance | None = None
        self.topic = ""
        self.callbacks = 0  # rebalance callbacks run (`group_watch`)
        self.callback_timeout_s = CALLBACK_TIMEOUT_S
        self.revoke_wait_s = REVOKE_WAIT_S
        # librdkafka's assignment as of the fetch thread's last callback (read and written
        # on that thread only), and the revocations still running on the event loop.
        self._assigned: set[TopicPartition] = set()
        self._revocations: dict[TopicPartition, concurrent.futures.Future[Any]] = {}
        self._wakes: list[float] = []  # when to wake the leaders next (fetch thread only)
        # A refusal no retry mends (READ on the input revoked), raised by the next poll;
        # librdkafka retries everything else itself.
        self.failure: BaseException | None = None

    # -- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        # (Construction resolves the bootstrap servers: off the event loop.)
        self.consumer = await self.blocking.run(confluent_kafka.Consumer, self.conf, timeout_s=10)

    def subscribe(self, topic: str, on_revoked: Rebalance, on_assigned: Rebalance) -> None:
        self.on_revoked, self.on_assigned, self.topic = on_revoked, on_assigned, topic
        self._subscribe(self.consumer)
        assert self.loop is not None
        self._closed = self.loop.create_future()
        self._running = True
        self._thread = threading.Thread(target=self._fetch, name="librdkafka-fetch", daemon=True)
        self._thread.start()

    def _subscribe(self, consumer: Any) -> None:
        consumer.subscribe(
            [self.topic],
            on_assign=self._cb_assign,
            on_revoke=self._cb_revoke,
            on_lost=self._cb_lost,
        )

    def rejoin(self) -> None:
        """Leave the group and join it again, on the fetch thread: every partition is
        revoked (the callbacks run in the next consumes) and the join asks the
        coordinator for this member's whole assignment (`group_watch`)."""

        def rejoin(consumer: Any) -> None:
            consumer.unsubscribe()
            self._subscribe(consumer)

        self._ops.put(rejoin)

    def held(self) -> set[int]:
        """The partitions this member holds (revocations under way included)."""
        return {tp.partition for tp in self.owned}

    async def stop(self) -> None:
        """Leave the group (its partitions move at once) and close the consumer, on the
        fetch thread."""
        self._running = False
        if self._closed is not None:
            await self._closed
        elif self.consumer is not None:
            await self.blocking.run(self.consumer.close, timeout_s=10)
        self._wake()

    async def call(self, fn: Callable[[Any], T], timeout_s: float) -> T:
        """`fn(consumer)` on the fetch thread, awaited within `timeout_s`."""
        assert self.loop is not None
        if not self._running:
            raise ConfluentError("the consumer is closed")
        loop, future = self.loop, self.loop.create_future()

        def op(consumer: Any) -> None:
            try:
                result, error = fn(consumer), None
            except BaseException as exc:
                result, error = None, exc
            loop.call_soon_threadsafe(settle, future, result, error)

        self._ops.put(op)
        try:
            return await asyncio.wait_for(future, timeout_s)
        except Exception as exc:
            raise translated(exc) from exc

    def _run_ops(self, wait_s: float = 0.0) -> None:
        try:
            op = self._ops.get(timeout=wait_s) if wait_s > 0 else self._ops.get_nowait()
        except queue.Empty:
            return
        while True:
            op(self.consumer)
            try:
                op = self._ops.get_nowait()
            except queue.Empty:
                return

    def _fetch(self) -> None:
        consumer, loop = self.consumer, self.loop
        assert loop is not None
        highs_at = 0.0
        try:
            while self._running:
                self._run_ops()
                self._apply_pauses(consumer)
                began = self._applied
                try:
                    msgs = consumer.consume(CONSUME_MAX, CONSUME_WAIT_S)
                except Exception as exc:  # (a closed handle; logged, the loop ends)
                    log.warning("consuming failed: %s", translated(exc))
                    break
                # The positions as of these records (past markers and aborted records
                # too), read on this thread before another consume moves them.
                owned = self._owned_now
                positions = consumer.position(lib_parts(owned)) if owned else []
                highs = None
                if owned and (now := time.monotonic()) - highs_at >= HIGHS_EVERY_S:
                    highs_at, highs = now, _highs(consumer, owned)
                if msgs or positions:
                    loop.call_soon_threadsafe(self._file, msgs, positions, began, highs)
                if self._wakes and time.monotonic() >= self._wakes[0]:
                    del self._wakes[0]
                    self._wake_leaders(consumer)
        finally:
            self._run_ops()
            try:
                consumer.close()
            except Exception as exc:
                log.debug("closing the consumer: %s", exc)
            if self._closed is not None:
                loop.call_soon_threadsafe(_done, self._closed)

    def _apply_pauses(self, consumer: Any) -> None:
        """Pause and resume the assigned partitions as the event loop wants them. Decided
        here, against the assignment as of now: a pause asked for under an earlier
        assignment must not outlive it (librdkafka keeps a partition's pause across
        its unassignment, so a partition back later would never be fetched again)."""
        want = self._paused_now & self._assigned
        if want == self._lib_paused:
            return
        if pause := want - self._lib_paused:
            consumer.pause(lib_parts(tuple(pause)))
        if resume := self._lib_paused - want:
            consumer.resume(lib_parts(tuple(resume)))
        self._lib_paused = set(want)

    # -- on the event loop -----------------------------------------------------------

    def _own(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            self.owned.add(tp)
            self.revoking.discard(tp)
            self._files[tp] = deque()
            self.handed.pop(tp, None)
            self._position.pop(tp, None)
        self._owned_now = tuple(self.owned)
        self._wake()

    def _forget(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            self.owned.discard(tp)
            self.revoking.discard(tp)
            self._files.pop(tp, None)
            self._paused.discard(tp)
            self.handed.pop(tp, None)
            self._position.pop(tp, None)
            self._high.pop(tp, None)
        self._owned_now = tuple(self.owned)
        self._paused_now = frozenset(self._paused)

    def _file(
        self, msgs: list[Any], positions: list[Any], began: int, highs: dict[Any, int] | None
    ) -> None:
        sought = self._sought
        for p in positions:
            if p.error is None and p.offset >= 0:
                tp = tp_of(p)
                if sought.get(tp, -1) <= began:
                    self._position[tp] = p.offset
        if highs is not None:
            self._high.update(highs)
        full = []
        for m in msgs:
            if m.error() is not None:
                err = translated(m.error())
                # (Named with its topic: a refused right's line names the topic's ACL.)
                err = type(err)(f"{m.topic()}/{m.partition()}: {err}")
                if classify(err) is Kind.CONFIG:  # (a right refused: the lanes raise it)
                    self.failure = err
                log.warning("consume error: %s", err)
                continue
            tp = TopicPartition(m.topic(), m.partition())
            file = self._files.get(tp)
            if file is None or sought.get(tp, -1) > began:
                continue  # (revoked, or fetched from before a seek)
            file.append(m)
            if len(file) >= PAUSE_AT * self.max_records and tp not in self._paused:
                full.append(tp)
        if full:
            self._paused.update(full)
            self._paused_now = frozenset(self._paused)
        if msgs:
            self._wake()

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    async def wait(self, timeout_s: float) -> None:
        assert self.loop is not None
        w = self.loop.create_future()
        self._waiters.append(w)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(w, timeout_s)

    def take(self, tps: list[TopicPartition], max_records: int) -> list[tuple[TopicPartition, Any]]:
        """Up to `max_records` records of `tps`, each partition's in order, shared out
        among the partitions: each gets an equal share first, starting one partition
        further on each call, then the rest fill what is left. (Taken in order, the first
        partition with a backlog would fill every batch while the others waited.)"""
        out: list[tuple[TopicPartition, Any]] = []
        files = [(tp, f) for tp in tps if (f := self._files.get(tp))]
        if files:
            turn = self._turn % len(files)
            self._turn = turn + 1
            files = files[turn:] + files[:turn]
            share = -(-max_records // len(files))  # (rounded up)
            for limit in (share, max_records):
                for tp, file in files:
                    n = min(limit, max_records - len(out))
                    while file and n > 0:
                        out.append((tp, file.popleft()))
                        n -= 1
        resumed = False
        for tp in tps:
            left = self._files.get(tp)
            if left is not None and tp in self._paused and len(left) < self.max_records:
                self._paused.discard(tp)
                resumed = True
        if resumed:
            self._paused_now = frozenset(self._paused)
        return out

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Read `tp` again from `offset`: its buffered records are dropped, and so are
        those of a consume that began before the seek was done."""
        if tp not in self.owned or tp in self.revoking:
            return
        self._seeks += 1
        n = self._seeks
        self._sought[tp] = n
        self._files[tp] = deque()
        self.handed.pop(tp, None)
        self._position.pop(tp, None)
        if tp in self._paused:
            self._paused.discard(tp)
            self._paused_now = frozenset(self._paused)
        at = confluent_kafka.TopicPartition(tp.topic, tp.partition, offset)

        def seek(consumer: Any) -> None:
            try:
                consumer.seek(at)
            except Exception as exc:
                log.warning("seeking %s/%d to %d: %s", tp.topic, tp.partition, offset, exc)
            self._applied = n

        self._ops.put(seek)

    def past_markers(self, offsets: Mapping[Partition, int]) -> dict[TopicPartition, int]:
        """`last + 1`, or further where everything up to the consumer's position was
        handed out and all that lies between is transaction markers (a commit there
        leaves no lag for ever; see kafka_source.past_markers)."""
        out: dict[TopicPartition, int] = {}
        for p, offset in offsets.items():
            assert isinstance(p, TopicPartition)
            pos = self._position.get(p)
            done = self.handed.get(p) == offset - 1 and not self._files.get(p)
            out[p] = max(offset, pos) if done and pos is not None else offset
        return out

    def lag(self) -> dict[int, int]:
        """Records behind the high watermark, per owned partition with both known."""
        out: dict[int, int] = {}
        for tp in self.owned:
            high, nxt = self._high.get(tp), self._position.get(tp)
            if high is not None and nxt is not None:
                out[tp.partition] = max(high - nxt + len(self._files.get(tp) or ()), 0)
        return out

    async def committed(
        self, tps: list[TopicPartition], timeout_s: float
    ) -> dict[TopicPartition, int]:
        """The group's committed offsets of `tps` (-1001: none), waiting for offsets a
        pending transaction carries (read_committed: KIP-447's stable offsets)."""
        if not tps:
            return {}
        parts = lib_parts(tuple(tps))
        found = await self.call(lambda c: c.committed(parts, timeout_s), timeout_s + 1)
        return {tp_of(p): p.offset for p in found}

    async def assigned_metadata(self, tps: list[TopicPartition], timeout_s: float) -> Any:
        """The consumer's group metadata (member id and epoch), for offsets of `tps`;
        PartitionGone if one of them is no longer assigned. Read on the fetch thread, so
        either the partitions were still ours at that epoch (and the coordinator refuses
        it once the revocation is acknowledged), or the commit goes no further."""

        def read(consumer: Any) -> Any:
            if gone := [tp for tp in tps if tp not in self._assigned]:
                raise PartitionGone(f"{part_names(lib_parts(tuple(gone)))} given up in a rebalance")
            return consumer.consumer_group_metadata()

        return await self.call(read, timeout_s)

    async def commit(self, parts: list[Any], timeout_s: float) -> None:
        """Commit `parts` (librdkafka TopicPartitions with offsets), leaving out those no
        longer assigned: their new owner may have started from an older offset already."""

        def commit(consumer: Any) -> None:
            mine = [p for p in parts if tp_of(p) in self._assigned]
            if mine:
                consumer.commit(offsets=mine, asynchronous=False)

        await self.call(commit, timeout_s)


def _highs(consumer: Any, tps: tuple[TopicPartition, ...]) -> dict[Any, int]:
    out = {}
    for tp in tps:
        try:
            _, high = consumer.get_watermark_offsets(
                confluent_kafka.TopicPartition(tp.topic, tp.partition), cached=True
            )
        except Exception:  # (not known yet)
            continue
        if high >= 0:
            out[tp] = high
    return out


def _done(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
