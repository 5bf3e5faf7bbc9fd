"""librdkafka's incremental rebalance callbacks, run on the `Fetcher`'s thread: a
revocation handed to the worker and bounded, an assignment opened before it is fetched,
and the partitions' leaders woken after either (docs/design/rebalancing.md)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

import confluent_kafka
from aiokafka import TopicPartition

log = logging.getLogger("derender.worker")

# How often the fetch thread looks for queued calls while a rebalance callback waits.
CALLBACK_TICK_S = 0.005
# The longest a rebalance callback waits for the worker (its batches finish within half
# the session timeout, then the producers' calls are bounded by the step timeout).
CALLBACK_TIMEOUT_S = 30.0
# How long the revocation callback waits for the moved partitions' batches and commits
# before it gives them up anyway: the fetch thread fetches nothing for the unmoved
# partitions meanwhile (their lanes work on what is buffered), and what it cuts short is
# aborted and redone by the new owner (docs/design/rebalancing.md).
REVOKE_WAIT_S = 1.0
# After a rebalance callback, when the fetch thread wakes the partitions' leaders (see
# `_wake_leaders`): soon after librdkafka has resumed them, and again in case its main
# thread ran late.
WAKE_AFTER_S = (0.02, 0.25)
WAKE_TIMEOUT_S = 0.5

Rebalance = Callable[[list[TopicPartition]], Coroutine[Any, Any, Any]]


def tp_of(p: Any) -> TopicPartition:
    return TopicPartition(p.topic, p.partition)


def lib_parts(tps: tuple[TopicPartition, ...]) -> list[Any]:
    return [confluent_kafka.TopicPartition(tp.topic, tp.partition) for tp in tps]


def part_names(parts: list[Any]) -> str:
    return ", ".join(f"{p.topic}/{p.partition}" for p in parts) or "none"


def logged(what: str, future: concurrent.futures.Future[Any]) -> None:
    if not future.cancelled() and (exc := future.exception()) is not None:
        log.warning("%s: %s: %s", what, type(exc).__name__, exc)


class RebalanceCallbacks:
    """The callbacks' half of `fetch.Fetcher`: what they read and change of it."""

    loop: asyncio.AbstractEventLoop | None
    on_revoked: Rebalance | None
    on_assigned: Rebalance | None
    revoking: set[TopicPartition]
    callbacks: int
    callback_timeout_s: float
    revoke_wait_s: float
    # librdkafka's assignment as of the fetch thread's last callback (read and written
    # on that thread only), and the revocations still running on the event loop.
    _assigned: set[TopicPartition]
    _lib_paused: set[TopicPartition]
    _revocations: dict[TopicPartition, concurrent.futures.Future[Any]]
    _wakes: list[float]  # when to wake the leaders next (fetch thread only)
    _run_ops: Callable[[float], None]
    _forget: Callable[[list[TopicPartition]], None]
    _own: Callable[[list[TopicPartition]], None]

    def _wake_leaders(self, consumer: Any) -> None:
        """Send the assigned partitions' leaders a request, so that their broker threads
        fetch again now. librdkafka pauses every assigned partition while a rebalance
        callback runs; a broker thread left with nothing to fetch then sleeps up to a
        second, and resuming a partition does not wake it (docs/design/rebalancing.md)."""
        if not self._assigned:
            return
        latest = [
            confluent_kafka.TopicPartition(tp.topic, tp.partition, confluent_kafka.OFFSET_END)
            for tp in self._assigned
        ]
        try:  # (a ListOffsets request per leader: on its broker thread's queue, it wakes it)
            consumer.offsets_for_times(latest, WAKE_TIMEOUT_S)
        except Exception as exc:  # (the fetch goes on at librdkafka's next wake anyway)
            log.debug("waking the leaders: %s", exc)

    def _call(self, what: str, coro: Coroutine[Any, Any, Any]) -> None:
        """Run `coro` on the event loop and wait for it here."""
        assert self.loop is not None
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        if not self._wait(future, self.callback_timeout_s):
            future.cancel()
            log.warning("%s: not done within %.0fs, going on", what, self.callback_timeout_s)
        else:
            logged(what, future)

    def _wait(self, future: concurrent.futures.Future[Any], timeout_s: float) -> bool:
        """Wait up to `timeout_s` for `future`, running the consumer calls the event loop
        queues meanwhile (librdkafka admits them from inside its callback)."""
        deadline = time.monotonic() + timeout_s
        while not future.done() and (left := deadline - time.monotonic()) > 0:
            self._run_ops(min(CALLBACK_TICK_S, left))
        return future.done()

    def _cb_revoke(self, consumer: Any, parts: list[Any]) -> None:
        tps = [tp_of(p) for p in parts]
        if not tps:
            return
        self.callbacks += 1
        assert self.loop is not None and self.on_revoked is not None
        self.loop.call_soon_threadsafe(self.revoking.update, tps)
        began = time.monotonic()
        future = asyncio.run_coroutine_threadsafe(self.on_revoked(tps), self.loop)
        # (Not cancelled past the wait: it fences and aborts what the wait cut short.)
        done = self._wait(future, self.revoke_wait_s)
        # (How long the other partitions got no new records: the rebalance's cost to them.)
        log.info(
            "gave %s up after %.3fs%s",
            part_names(parts),
            time.monotonic() - began,
            "" if done else ", its revocation still under way",
        )
        future.add_done_callback(lambda f: logged("handling a revocation", f))
        for tp in tps:
            self._revocations[tp] = future
        consumer.incremental_unassign(parts)
        self._assigned.difference_update(tps)
        self._lib_paused.difference_update(tps)
        self._wake_soon()
        self.loop.call_soon_threadsafe(self._forget, tps)

    def _wake_soon(self) -> None:
        now = time.monotonic()
        self._wakes = [now + after for after in WAKE_AFTER_S]

    def _cb_lost(self, consumer: Any, parts: list[Any]) -> None:
        log.warning("partitions lost (this member was fenced): %s", part_names(parts))
        self._cb_revoke(consumer, parts)

    def _cb_assign(self, consumer: Any, parts: list[Any]) -> None:
        tps = [tp_of(p) for p in parts]
        if not tps:
            return
        self.callbacks += 1
        assert self.loop is not None and self.on_assigned is not None
        # A partition back before its revocation here is over: that one first (it would
        # close the producer the assignment opens).
        for tp in tps:
            if (earlier := self._revocations.pop(tp, None)) is not None:
                self._wait(earlier, self.callback_timeout_s)
        self._revocations = {tp: f for tp, f in self._revocations.items() if not f.done()}
        self._call("opening assigned partitions", self.on_assigned(tps))
        # (Each from its committed offset: librdkafka's read_committed fetch of it waits
        # for a transaction still carrying offsets, KIP-447's stable offsets.)
        consumer.incremental_assign(lib_parts(tuple(tps)))
        # (A pause of an earlier assignment would hold them: librdkafka keeps it.)
        consumer.resume(lib_parts(tuple(tps)))
        self._assigned.update(tps)
        self._wake_soon()
        self.loop.call_soon_threadsafe(self._own, tps)
