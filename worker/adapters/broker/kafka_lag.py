"""The consumer group's lag, per partition, equal to what KEDA's Kafka scaler reports.

Per partition: the partition's end offset minus the group's COMMITTED offset (OffsetFetch
for the group, ListOffsets "latest" for the end). It is not this worker's in-memory
position (`kafka_source.lag`): it is what the autoscaler sees, whichever worker owns the
partition, and it only falls when offsets are committed.

The rules are KEDA v2.21's (`getLagForPartition` and `getTotalLag` in
`pkg/scalers/kafka_scaler.go`; the `apache-kafka` scaler gives the same numbers), so that
`derender_group_lag{partition}` is KEDA's per-partition value and `derender_group_lag_sum`
is the total KEDA computes, at the same moment, for the same group:

- The end is the HIGH WATERMARK, under either guarantee: ListOffsets(latest) at
  `read_uncommitted`, which is what KEDA's request (v0/v1, no isolation level) answers.
  Records of a transaction still open count, as they do for KEDA. `read_committed` (the
  constructor's argument) is accepted for the runner's call and ignored. There is no
  second, last-stable-offset series: the input topic's producers are the engines, and
  the gap between the two ends is only the records of their transactions still open
  (none at all when they do not write transactionally). Such records are readable as
  soon as the transaction commits. A transaction left hanging shows as
  `derender_consumer_lag` that keeps rising while the worker processes nothing, since
  its consumer reads up to the last stable offset.
- A committed offset is used as given: lag = end − committed, NOT clamped at 0, as KEDA
  does. It is negative only if the group committed past the high watermark, e.g. after
  an unclean leader election truncated the log. KEDA sums it as it is.
- A partition the group never committed (OffsetFetch answers -1) is counted by the reset
  policy, as KEDA's `offsetResetPolicy` counts it (with `scaleToZeroOnInvalidOffset:
  false`, its default):
  - `"latest"`: 1, so that one replica is kept to commit;
  - `"earliest"`: end − log start (ListOffsets "earliest"), clamped at 0: the records a
    new owner would really read.
  Pass the worker's own `--reset` here and set the ScaledObject's `offsetResetPolicy` to
  the same value, or the two disagree on such partitions.
- KEDA's cap is not applied: unless `allowIdleConsumers` is true, KEDA lowers its total
  so that `total / lagThreshold` never exceeds the partition count (or the partitions
  with lag, under `limitToPartitionsWithLag`). That is the scaler's policy on the sum,
  not a fact about the group, and `lagThreshold` is not the worker's to know. Compare
  `derender_group_lag_sum` with KEDA's metric below the cap, or cap it the same way in
  the query. `excludePersistentLag` (lag left out while a committed offset stands still
  between polls) is not modelled either.
- Transaction markers take offsets. A group under exactly-once must commit its consumer's
  `position()`, which steps over the commit marker. If it commits `last offset + 1`, a
  lag of 1 per partition stays for ever (KAFKA-6607, librdkafka#2539), for KEDA as much
  as here. This module only reports that lag; it does not hide it.

How it is read:

- aiokafka's admin client has no ListOffsets, but `AIOKafkaConsumer.end_offsets` sends
  one request per leader at the consumer's `isolation_level`. We keep a consumer of our
  own for it, at `read_uncommitted`: no group, no subscription, it never fetches. The
  worker's consumer would not do: Kafka answers a connection's requests in order, so a
  ListOffsets sent on it would wait behind the long-poll Fetch (`fetch_max_wait_ms`), and
  under exactly-once it is at `read_committed`, whose end is the last stable offset.
- The committed offsets: `AIOKafkaAdminClient.list_consumer_group_offsets` for the
  topic's partitions, one OffsetFetch to the group coordinator. The coordinator's id is
  cached, so a sample skips the FindCoordinator round trip. It is looked up again after
  any failure, for example NOT_COORDINATOR after the coordinator moved.
- The partitions: one Metadata request (`describe_topics`), cached for
  `PARTITIONS_EVERY_S`. KEDA describes the topic on every poll, but partitions are only
  ever added, and a minute's delay in seeing a new one is harmless. The request asks for
  all topics: Metadata that names a topic creates it where `auto.create.topics.enable`
  is on, and aiokafka's admin client always sets `allow_auto_topic_creation`. A missing
  topic therefore stays missing, and its sample is None.
- Both clients are long-lived, created at the first sample and closed by `close()`. A
  steady sample is therefore two requests sent at once: the OffsetFetch and one
  ListOffsets per leader. A third request (ListOffsets "earliest") goes out only while
  some partition has no committed offset and `reset="earliest"`.
- Errors never leave a sample. A broker that is away, a timeout, a coordinator that
  moved, or an answer missing partitions all give `None` ("nothing known this time"),
  within `timeout_s`, where KEDA reports an error for that poll. The clients reconnect
  by themselves. Clients that failed to start, or that failed `RECONNECT_AFTER` samples
  in a row, are dropped and made again at the next sample.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any, Literal

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError, UnknownTopicOrPartitionError, for_code

log = logging.getLogger("derender.worker")

Reset = Literal["earliest", "latest"]

# How long the topic's partition list is trusted (partitions are only ever added).
PARTITIONS_EVERY_S = 60.0
# Failed samples in a row after which both clients are made anew.
RECONNECT_AFTER = 3
# What OffsetFetch answers for a partition the group never committed.
NO_OFFSET = -1


def lag_from(
    ends: Mapping[int, int],
    committed: Mapping[int, int],
    starts: Mapping[int, int],
    reset: Reset = "earliest",
) -> dict[int, int]:
    """Lag per partition of `ends` (high watermarks), by KEDA's rules. `committed` is the
    group's offset (missing or -1: never committed), and `starts` is the log start of such
    partitions (used when `reset` is "earliest"). A committed offset past the end gives a
    negative lag, as in KEDA."""
    out: dict[int, int] = {}
    for p, end in ends.items():
        c = committed.get(p, NO_OFFSET)
        if c >= 0:
            out[p] = end - c
        elif reset == "latest":
            out[p] = 1
        else:
            out[p] = max(end - starts.get(p, 0), 0)
    return out


class GroupLag:
    """Samples `group_id`'s lag on `topic` (see the module docstring).

    `reset`: the worker's `--reset`, which must be the ScaledObject's `offsetResetPolicy`.
    `read_committed` is accepted and ignored: the end is the high watermark under either
    guarantee, as for KEDA. `client_options` go to both aiokafka clients (security_protocol,
    ssl_context, sasl_*: `worker.adapters.broker.kafka.security_kwargs`). Not thread-safe: use it
    from one event loop, one sample at a time."""

    def __init__(
        self,
        bootstrap_servers: str | list[str],
        group_id: str,
        topic: str,
        *,
        read_committed: bool = False,
        reset: Reset = "earliest",
        timeout_s: float = 5.0,
        **client_options: Any,
    ) -> None:
        if reset not in ("earliest", "latest"):
            raise ValueError(f"reset must be 'earliest' or 'latest', not {reset!r}")
        self.bootstrap_servers = bootstrap_servers
        self.group_id = group_id
        self.topic = topic
        del read_committed  # (the runner passes it; see the module docstring)
        self.reset: Reset = reset
        self.timeout_s = timeout_s
        self._options = client_options
        self._admin: Any = None  # AIOKafkaAdminClient, once started
        self._ends: Any = None  # AIOKafkaConsumer (no group), once started
        self._coordinator: int | None = None
        self._partitions: list[int] | None = None
        self._partitions_at = 0.0
        self._failing = False
        self._failures = 0  # in a row

    async def sample(self, partitions: Collection[int] | None = None) -> dict[int, int] | None:
        """{partition: lag} for the topic's partitions (only those in `partitions`, when
        given), or None when nothing could be learnt this time. It never raises, except
        for cancellation, and returns within about `timeout_s`."""
        try:
            async with asyncio.timeout(self.timeout_s):
                lags = await self._sample(partitions)
        except Exception as exc:  # a sample must not take the worker down
            self._coordinator = None
            self._partitions = None
            self._failures += 1
            if self._failures >= RECONNECT_AFTER:
                # The clients reconnect by themselves. Fresh ones are a last resort in
                # case either is stuck in a state it does not leave.
                await self._drop_clients()
                self._failures = 0
            if not self._failing:
                log.warning(
                    "group lag of %s on %s unavailable: %s",
                    self.group_id,
                    self.topic,
                    _describe(exc),
                )
                self._failing = True
            return None
        self._failures = 0
        if self._failing:
            log.info("group lag of %s on %s available again", self.group_id, self.topic)
            self._failing = False
        return lags

    async def export(
        self, every_s: float, to: Callable[[Mapping[int, int]], None], stopping: asyncio.Event
    ) -> None:
        """Every `every_s` until `stopping`, pass a sample of every partition to `to` (a
        failed sample passes nothing: the last known values stay)."""
        while not stopping.is_set():
            lags = await self.sample()
            if lags is not None:
                to(lags)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), every_s)

    async def close(self) -> None:
        await self._drop_clients()

    async def __aenter__(self) -> GroupLag:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- one sample -----------------------------------------------------------------

    async def _sample(self, only: Collection[int] | None) -> dict[int, int]:
        await self._connect()
        admin, ends = self._admin, self._ends
        parts = await self._topic_partitions(admin)
        if only is not None:
            wanted = set(only)
            parts = [p for p in parts if p in wanted]
        if not parts:
            return {}
        tps = [TopicPartition(self.topic, p) for p in parts]
        if self._coordinator is None:
            self._coordinator = int(await admin.find_coordinator(self.group_id))
        # One OffsetFetch and the ListOffsets at once. A TaskGroup cancels the other one
        # when either fails.
        async with asyncio.TaskGroup() as tg:
            fetched = tg.create_task(
                admin.list_consumer_group_offsets(
                    self.group_id, group_coordinator_id=self._coordinator, partitions=tps
                )
            )
            listed = tg.create_task(ends.end_offsets(tps))
        committed = {tp.partition: int(om.offset) for tp, om in fetched.result().items()}
        end = {tp.partition: int(off) for tp, off in listed.result().items()}
        missing = [p for p in parts if p not in committed or p not in end]
        if missing:
            # OffsetFetch v2+ reports a coordinator error (NOT_COORDINATOR, loading)
            # only at the top level, which aiokafka does not check: the answer is just
            # empty. Counting such partitions as never committed would be a false spike.
            raise KafkaError(f"no offsets answered for partitions {missing}")
        fresh = [
            TopicPartition(self.topic, p)
            for p in parts
            if committed[p] < 0 and self.reset == "earliest"
        ]
        starts: dict[int, int] = {}
        if fresh:
            found = await ends.beginning_offsets(fresh)
            starts = {tp.partition: int(off) for tp, off in found.items()}
        return lag_from(end, committed, starts, self.reset)

    async def _topic_partitions(self, admin: Any) -> list[int]:
        now = time.monotonic()
        if self._partitions is not None and now - self._partitions_at < PARTITIONS_EVERY_S:
            return self._partitions
        # All topics (a null list), not [topic]: Metadata for a named topic creates it on
        # brokers with auto.create.topics.enable, and a lag probe must create nothing.
        described = await admin.describe_topics(None)
        entry = next((t for t in described if t["topic"] == self.topic), None)
        if entry is None:
            raise UnknownTopicOrPartitionError(f"no topic {self.topic!r}")
        if entry["error_code"]:
            raise for_code(entry["error_code"])(f"describing topic {self.topic!r}")
        self._partitions = sorted(int(p["partition"]) for p in entry["partitions"])
        self._partitions_at = now
        return self._partitions

    # -- clients --------------------------------------------------------------------

    async def _connect(self) -> None:
        if self._admin is not None and self._ends is not None:
            return
        await self._drop_clients()
        timeout_ms = max(int(self.timeout_s * 1000), 1)
        client_id = f"derender-lag-{self.group_id}"
        admin = AIOKafkaAdminClient(
            bootstrap_servers=self.bootstrap_servers,
            client_id=client_id,
            request_timeout_ms=timeout_ms,
            **self._options,
        )
        ends = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap_servers,
            group_id=None,
            client_id=client_id,
            enable_auto_commit=False,
            isolation_level="read_uncommitted",  # the high watermark, as KEDA
            request_timeout_ms=timeout_ms,
            **self._options,
        )
        try:
            await admin.start()
            await ends.start()
        except BaseException:
            await _stop(admin, ends)
            raise
        self._admin, self._ends = admin, ends

    async def _drop_clients(self) -> None:
        admin, ends = self._admin, self._ends
        self._admin = self._ends = None
        self._coordinator = None
        await _stop(admin, ends)


async def _stop(admin: Any, ends: Any) -> None:
    """Close whichever of the two clients exists. This never raises."""
    if ends is not None:
        with contextlib.suppress(Exception):
            await ends.stop()
    if admin is not None:
        with contextlib.suppress(Exception):
            await admin.close()


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError) and not str(exc):
        return "timed out"
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"
