"""The gateway's and the archiver's end of the output topic: each output once, in order.

`OutputReader` follows every partition of the output topic, or the ones given (a gateway
replica's reply partitions), by assignment (no consumer group: readers may overlap, each
keeps the requests it asked for), drops the repeats a redelivery writes
(`worker.wire.output.Seen`) and yields `Output`s, a request's in the order the worker wrote
them, its last one marked `end`.

    async with OutputReader("localhost:9092", request_ids=["chatcmpl-1"]) as reader:
        async for out in reader:
            client.write(out.sse())
            if out.end:
                break
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Iterable
from types import TracebackType
from typing import Any, Literal

from aiokafka import AIOKafkaConsumer, TopicPartition

from worker.constants import OUTPUT_TOPIC
from worker.wire.output import DEFAULT_REMEMBER, Output, Seen, from_record

Isolation = Literal["read_uncommitted", "read_committed"]
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")

# A poll waits at most this long, so a deadline or a stop is noticed between polls.
POLL_MS = 200
START_TIMEOUT_S = 30.0
CLOSE_TIMEOUT_S = 5.0


class OutputReader:
    """Reads the output topic: every output once, each request's in order, its end marked.

    `request_ids`: only these requests (more with `follow`); None (the default): every
    request. A followed request leaves the set at its end. `partitions`: only these
    partitions of the topic (a gateway's reply partitions, which its requests name as
    `reply_partition`); None (the default): every partition. `from_beginning`: read the
    topic from its start, else from the moment `start` returns. `isolation_level`:
    "read_committed" for a worker running `--guarantee exactly-once` (an aborted
    transaction's outputs are never seen), "read_uncommitted" otherwise (Kafka's default).
    `idle_timeout_s`: iteration ends after this long without a new output. `remember`: how
    many requests' dedupe records are kept (`worker.wire.output.Seen`). Other keyword
    arguments go to aiokafka's consumer (`security_protocol`, `ssl_context`, `sasl_*`, …).
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str = OUTPUT_TOPIC,
        *,
        request_ids: Iterable[str] | None = None,
        partitions: Iterable[int] | None = None,
        from_beginning: bool = False,
        isolation_level: Isolation = "read_uncommitted",
        idle_timeout_s: float | None = None,
        remember: int = DEFAULT_REMEMBER,
        **consumer: Any,
    ) -> None:
        if isolation_level not in ISOLATION_LEVELS:
            raise ValueError(
                f"isolation_level must be one of {', '.join(ISOLATION_LEVELS)}, "
                f"not {isolation_level!r}"
            )
        if isinstance(request_ids, str | bytes):
            raise TypeError("request_ids is a collection of request ids, not one id")
        self.partitions = None if partitions is None else _partition_set(partitions)
        self.topic = topic
        self.idle_timeout_s = idle_timeout_s
        self.duplicates = 0  # repeated outputs dropped
        self.ended = 0  # requests whose end was read
        self._only = None if request_ids is None else set(request_ids)
        self._seen = Seen(remember)
        self._ready: deque[Output] = deque()
        self._stopped = False
        self._client = {
            "bootstrap_servers": bootstrap_servers,
            "group_id": None,
            "enable_auto_commit": False,
            "auto_offset_reset": "earliest" if from_beginning else "latest",
            "isolation_level": isolation_level,
            **consumer,
        }
        self._consumer: AIOKafkaConsumer | None = None  # (made by `start`, in its loop)

    async def start(self) -> None:
        """Connect and fix the position on every partition read: an output written after
        this returns is read. Raises ValueError when the topic does not exist, or lacks
        one of `partitions`."""
        if self._consumer is not None or self._stopped:
            raise RuntimeError("an OutputReader starts once")
        consumer = self._consumer = AIOKafkaConsumer(**self._client)
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                await consumer.start()
                # (Subscribed after `start`, which would wait out a missing topic. The
                # metadata is what `consumer.topics()` fetches, kept for the partitions:
                # aiokafka's consumer has no public call for them.)
                cluster = await consumer._client.fetch_all_metadata()
                if self.topic not in cluster.topics():
                    raise ValueError(f"output topic {self.topic!r} does not exist")
                if self.partitions is None:
                    consumer.subscribe([self.topic])
                    while not consumer.assignment():  # (every partition, once known)
                        await asyncio.sleep(0.05)
                else:
                    has = cluster.partitions_for_topic(self.topic) or set()
                    missing = sorted(self.partitions - has)
                    if missing:
                        raise ValueError(
                            f"output topic {self.topic!r} has no partition "
                            f"{', '.join(map(str, missing))} (it has {len(has)}: "
                            f"0-{len(has) - 1})"
                        )
                    consumer.assign(
                        [TopicPartition(self.topic, p) for p in sorted(self.partitions)]
                    )
                for tp in consumer.assignment():
                    await consumer.position(tp)
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        """Close the consumer (within a few seconds); a `read` waiting returns None."""
        if self._stopped:
            return
        self._stopped = True
        self._ready.clear()
        if self._consumer is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._consumer.stop(), CLOSE_TIMEOUT_S)

    async def __aenter__(self) -> OutputReader:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    def follow(self, request_id: str) -> None:
        """Read this request too (a reader made with `request_ids`; follow a request before
        its records are published, so none of its outputs passes unseen)."""
        if self._only is not None:
            self._only.add(request_id)

    def forget(self, request_id: str) -> None:
        """Stop following a request and drop what was kept for it: for a request given up
        on (its client left, or its whole response failed: an `error` with no end)."""
        if self._only is not None:
            self._only.discard(request_id)
        self._seen.forget(request_id)

    @property
    def following(self) -> frozenset[str] | None:
        """The request ids followed (None: every request)."""
        return None if self._only is None else frozenset(self._only)

    @property
    def remembered(self) -> int:
        """How many requests' dedupe records are held (at most `remember`)."""
        return len(self._seen)

    async def read(self, timeout_s: float | None = None) -> Output | None:
        """The next output; None after `timeout_s` without one (None: wait until one comes),
        or once the reader is stopped. One task reads at a time."""
        consumer = self._consumer
        if consumer is None:
            raise RuntimeError("start the reader first (`await reader.start()` or `async with`)")
        loop = asyncio.get_running_loop()
        deadline = None if timeout_s is None else loop.time() + timeout_s
        while not self._ready:
            if self._stopped:
                return None
            wait_ms = POLL_MS
            if deadline is not None:
                left = deadline - loop.time()
                if left <= 0:
                    return None
                wait_ms = min(POLL_MS, max(1, int(left * 1000)))
            batches = await consumer.getmany(timeout_ms=wait_ms)
            for tp, records in batches.items():
                for r in records:
                    self._take(r.key, r.value, r.headers, tp.partition, r.offset)
        return self._ready.popleft()

    def __aiter__(self) -> OutputReader:
        return self

    async def __anext__(self) -> Output:
        out = await self.read(self.idle_timeout_s)
        if out is None:
            raise StopAsyncIteration
        return out

    def _take(
        self,
        key: bytes | None,
        value: bytes | None,
        headers: Any,
        partition: int,
        offset: int,
    ) -> None:
        out = from_record(key, value, headers, partition, offset)
        if out is None or (self._only is not None and out.request_id not in self._only):
            return
        if not self._seen.first(out):
            self.duplicates += 1
            return
        if out.end:
            self.ended += 1
            if self._only is not None:  # (its repeats are now filtered out)
                self.forget(out.request_id)
        self._ready.append(out)


def _partition_set(partitions: Iterable[int]) -> frozenset[int]:
    """The partition numbers, checked: at least one, each an int ≥ 0."""
    if isinstance(partitions, str | bytes):
        raise TypeError("partitions is a collection of partition numbers, like [0, 2]")
    chosen = frozenset(partitions)
    bad = [p for p in chosen if type(p) is not int or p < 0]
    if bad:
        raise ValueError(f"partitions are numbers >= 0, not {bad[0]!r}")
    if not chosen:
        raise ValueError("partitions names no partition (None reads every partition)")
    return chosen
