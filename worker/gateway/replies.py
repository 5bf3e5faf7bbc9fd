"""The reply side: this replica's partitions of the output topic, read once, each output
handed to the request that waits for it.

A gateway replica owns a fixed set of output-topic partitions (`--reply-partitions`) and
names one of them, round-robin, as `reply_partition` in each request's seq-0 record; the
worker writes every output of that request there. So a replica reads only its own
partitions, by assignment (no consumer group: readers that overlap are harmless, each
follows only its own request ids), and a request never moves when partitions are added
(docs/integrate/gateway.md, "Routing a request's outputs to its client").
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Iterator, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer

from worker.errors import ConfigError
from worker.tools.output_reader import OutputReader
from worker.wire.output import Output

log = logging.getLogger("derender.gateway")

START_TIMEOUT_S = 30.0


def parse_partitions(spec: str | None) -> tuple[int, ...] | None:
    """`--reply-partitions`: "0-7", "0,2,4", "0-3,8" (None, "" or "all": every partition)."""
    if spec is None or spec.strip() in ("", "all"):
        return None
    out: list[int] = []
    for item in spec.split(","):
        first, dash, last = item.strip().partition("-")
        try:
            lo = int(first)
            hi = int(last) if dash else lo
        except ValueError:
            raise ConfigError(
                f"--reply-partitions: {item.strip()!r} is not a partition or a range "
                "(expected e.g. 0-7 or 0,2,4)"
            ) from None
        if lo < 0 or hi < lo:
            raise ConfigError(f"--reply-partitions: {item.strip()!r} is not a range")
        out += range(lo, hi + 1)
    return tuple(sorted(set(out)))


async def topic_partitions(bootstrap: str, topic: str, **client: Any) -> set[int]:
    """The partitions of a topic (ConfigError when it does not exist)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, **client)
    try:
        async with asyncio.timeout(START_TIMEOUT_S):
            await consumer.start()
            if topic not in await consumer.topics():
                raise ConfigError(f"topic {topic!r} does not exist")
            consumer.subscribe([topic])  # (without a group: every partition, once known)
            while not consumer.assignment():
                await asyncio.sleep(0.05)
            return {tp.partition for tp in consumer.assignment()}
    finally:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(consumer.stop(), 5.0)


class Reply:
    """One request's mailbox: its outputs, in order, and what the exchange adds to them."""

    def __init__(self, request_id: str, partition: int | None) -> None:
        self.request_id = request_id
        self.partition = partition
        self.queue: asyncio.Queue[Any] = asyncio.Queue()

    def put(self, item: Any) -> None:
        self.queue.put_nowait(item)

    async def get(self, timeout_s: float) -> Any:
        """The next item; TimeoutError after `timeout_s` without one."""
        if not self.queue.empty():  # (no timer and no task for an item already there)
            return self.queue.get_nowait()
        async with asyncio.timeout(timeout_s):
            return await self.queue.get()


class Replies:
    """The output topic's partitions this replica owns, followed from when `start`
    returns; `open(request_id)` before the request's first record is published."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: Sequence[int] | None = None,
        **client: Any,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.wanted = partitions
        self.client = client
        self.owned: tuple[int, ...] = ()
        self._waiting: dict[str, Reply] = {}
        self._next: Iterator[int] | None = None
        self._reader: OutputReader | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        known = await topic_partitions(self.bootstrap, self.topic, **self.client)
        if self.wanted is None:
            self.owned = tuple(sorted(known))
        else:
            missing = sorted(set(self.wanted) - known)
            if missing:
                raise ConfigError(
                    f"--reply-partitions: {', '.join(map(str, missing))} not in topic "
                    f"{self.topic!r} ({len(known)} partitions)"
                )
            self.owned = tuple(self.wanted)
        self._next = itertools.cycle(self.owned)
        self._reader = OutputReader(
            self.bootstrap, self.topic, request_ids=[], partitions=list(self.owned), **self.client
        )
        await self._reader.start()
        self._task = asyncio.create_task(self._pump())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._reader is not None:
            await self._reader.stop()

    @property
    def healthy(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def in_flight(self) -> int:
        return len(self._waiting)

    def open(self, request_id: str) -> Reply:
        assert self._reader is not None and self._next is not None, "start first"
        reply = self._waiting[request_id] = Reply(request_id, next(self._next))
        self._reader.follow(request_id)
        return reply

    def close(self, request_id: str) -> None:
        """The request is over (answered or given up): its later outputs are dropped."""
        self._waiting.pop(request_id, None)
        if self._reader is not None:
            self._reader.forget(request_id)

    async def _pump(self) -> None:
        reader = self._reader
        assert reader is not None
        try:
            while True:
                out: Output | None = await reader.read()
                if out is None:
                    return  # (stopped)
                reply = self._waiting.get(out.request_id)
                if reply is not None:
                    reply.put(out)
        except asyncio.CancelledError:
            raise
        except Exception:
            # (/health turns 503; requests in flight time out.)
            log.exception("the output topic reader stopped")
