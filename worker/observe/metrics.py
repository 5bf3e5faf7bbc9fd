"""Prometheus metrics and the health endpoints, recorded only by the shell.

Each worker has its own `CollectorRegistry`, so tests can run several in one process.
They are served over the worker's one HTTP stack (`http_server`: uvicorn + Starlette, on
the worker's event loop, no thread): GET /metrics, /healthz (the loop turned recently) and
/readyz (partitions assigned, dependencies answering).
"""

from __future__ import annotations

import bisect
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response as StarletteResponse
from starlette.routing import Route

from worker.constants import RESULTS, STAGES
from worker.core.errors import CODES
from worker.observe import http_server
from worker.observe.http_server import HttpServer
from worker.ports import InRecord, StateWrite

# Buckets from 0.1 ms to ~10 s: a batch stage takes a fraction of a millisecond when
# idle and seconds during an outage.
_SECONDS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
_BATCH = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500)
_BYTES = (32, 64, 128, 256, 512, 1024, 4096, 16384)

# A /healthz probe fails when the loop has not turned for this long (a poll returns at
# least every poll-timeout, so only a stuck loop gets here).
HEALTH_STALE_S = 30.0


class BatchHistogram(Collector):
    """An unlabelled histogram that takes a whole batch of observations at once.

    prometheus-client's `Histogram.observe` costs ~1.5 µs (a lock, a bucket scan, exemplar
    checks); the worker observes every record's latency and every state's size, ~800
    calls per 500-record batch at peak. Here a batch is one bisect per value and one
    add per touched bucket. Exposed exactly like a `Histogram` (`_bucket`, `_count`,
    `_sum`, `_created`). Not thread-safe: the worker observes from its one event loop."""

    def __init__(
        self, name: str, documentation: str, buckets: Sequence[float], registry: CollectorRegistry
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.bounds = [float(b) for b in buckets]
        if self.bounds != sorted(set(self.bounds)):
            raise ValueError(f"histogram buckets must increase strictly: {buckets}")
        self._counts = [0] * (len(self.bounds) + 1)  # the last one is +Inf
        self._sum = 0.0
        self._created = time.time()
        registry.register(self)

    def observe(self, value: float) -> None:
        self._counts[bisect.bisect_left(self.bounds, value)] += 1
        self._sum += value

    def observe_many(self, values: Iterable[float]) -> None:
        counts, bounds, total = self._counts, self.bounds, self._sum
        for v in values:
            counts[bisect.bisect_left(bounds, v)] += 1
            total += v  # in order, as one observe at a time would add
        self._sum = total

    def describe(self) -> Iterator[HistogramMetricFamily]:
        yield HistogramMetricFamily(self.name, self.documentation)

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = HistogramMetricFamily(self.name, self.documentation)
        cumulative, buckets = 0, []
        for bound, n in zip([*self.bounds, float("inf")], self._counts, strict=True):
            cumulative += n
            buckets.append((_le(bound), float(cumulative)))
        family.add_metric([], buckets, self._sum)
        family.add_sample(f"{self.name}_created", {}, self._created)
        yield family


def _le(bound: float) -> str:
    """A bucket bound as prometheus-client writes it (`0.005`, `32.0`, `+Inf`)."""
    return "+Inf" if bound == float("inf") else repr(bound)


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.records = Counter(
            "derender_records", "input records by result", ["result"], registry=r
        )
        self.outputs = Counter("derender_outputs", "output records by kind", ["kind"], registry=r)
        self.errors = Counter(
            "derender_errors",
            "records that failed their request, by error code (docs/integrate/contract.md)",
            ["code"],
            registry=r,
        )
        self.tokens = Counter("derender_tokens", "generated token ids consumed", registry=r)
        self.batch_size = Histogram(
            "derender_batch_records", "records per batch", buckets=_BATCH, registry=r
        )
        self.stage_seconds = Histogram(
            "derender_stage_seconds",
            "seconds per batch stage",
            ["stage"],
            buckets=_SECONDS,
            registry=r,
        )
        self.latency = BatchHistogram(
            "derender_record_latency_seconds",
            "from the input record's timestamp to its outputs' broker ack",
            _SECONDS,
            r,
        )
        self.lag = Gauge(
            "derender_consumer_lag", "high-water mark minus position", ["partition"], registry=r
        )
        self.lag_sum = Gauge(
            "derender_consumer_lag_sum", "consumer lag over assigned partitions", registry=r
        )
        self.group_lag = Gauge(
            "derender_group_lag",
            "high watermark minus the group's committed offset (never committed: 1 under"
            " reset latest, high watermark minus log start under earliest), KEDA's Kafka"
            " scaler's per-partition lag before its cap",
            ["partition"],
            registry=r,
        )
        self.group_lag_sum = Gauge(
            "derender_group_lag_sum",
            "group lag (derender_group_lag) summed over the sampled partitions: KEDA's"
            " total before it caps total/lagThreshold at the partition count",
            registry=r,
        )
        self._group_lag_partitions: set[str] = set()
        self.state_bytes = BatchHistogram(
            "derender_state_bytes", "size of each state written", _BYTES, r
        )
        self.active_requests = Gauge(
            "derender_active_requests",
            "requests open on this worker (seen, not finished)",
            registry=r,
        )
        self.rebalances = Counter("derender_rebalances", "partition revocations", registry=r)
        self.client_rebuilds = Counter(
            "derender_client_rebuilds",
            "Kafka clients replaced after Kafka steps kept timing out (stalled clients)",
            registry=r,
        )
        self.group_rejoins = Counter(
            "derender_group_rejoins",
            "times the worker left its consumer group and joined again because its consumer "
            "missed a change of its assignment (--kafka-client confluent)",
            registry=r,
        )
        self.fenced = Counter(
            "derender_batches_fenced",
            "batches dropped because their partitions were revoked while they ran (a "
            "rebalance outlasted them, or they were fetched under the previous assignment)",
            registry=r,
        )
        self.outage_seconds = Counter(
            "derender_outage_seconds", "seconds spent waiting for Redis or the broker", registry=r
        )
        self.conflicts = Counter(
            "derender_state_conflicts",
            "state writes refused by the compare-and-set (another owner moved on)",
            registry=r,
        )
        self.redis_round_trips = Counter(
            "derender_redis_round_trips", "Redis round trips", ["op"], registry=r
        )
        self.misrouted = Counter(
            "derender_reply_partition_missing",
            "outputs whose request named a reply partition the output topic lacks (written"
            " to the key's partition instead)",
            registry=r,
        )
        self.assigned = Gauge(
            "derender_assigned_partitions", "partitions assigned to this worker", registry=r
        )
        for stage in STAGES:  # exported from the start, so dashboards see every series
            self.stage_seconds.labels(stage)
        for result in RESULTS:
            self.records.labels(result)
        for code in CODES:
            self.errors.labels(code)
        self._stages: dict[str, Histogram] = {}
        self._round_trips: dict[str, Counter] = {}
        self.last_turn = time.monotonic()
        self.ready = False
        # /readyz's answer as a series: an alert sees a worker that is up but not ready
        # (no assignment yet, a rebalance or a client rebuild that does not end).
        Gauge(
            "derender_ready", "1 while /readyz answers 200 (partitions assigned)", registry=r
        ).set_function(lambda: float(self.ready))

    # -- what the loop reports (loop.Observer) --------------------------------------

    # (A labelled child is looked up once: `labels()` takes a lock and checks its
    # arguments, and a batch reports eight of them.)

    def stage(self, name: str, seconds: float) -> None:
        child = self._stages.get(name)
        if child is None:
            child = self._stages[name] = self.stage_seconds.labels(name)
        child.observe(seconds)

    def round_trip(self, kind: str, count: int = 1) -> None:
        # In a Redis Cluster a batch's load or save is one round trip per master touched.
        child = self._round_trips.get(kind)
        if child is None:
            child = self._round_trips[kind] = self.redis_round_trips.labels(kind)
        child.inc(count)

    def delivered(self, records: list[InRecord]) -> None:
        """Every output of these records is acknowledged: their end-to-end latency."""
        now_ms = time.time() * 1000
        self.latency.observe_many(
            max(now_ms - r.timestamp_ms, 0.0) / 1000 for r in records if r.timestamp_ms is not None
        )

    def saved(self, writes: list[StateWrite], refused: int) -> None:
        self.state_bytes.observe_many(len(w.blob) for w in writes)
        if refused:
            self.conflicts.inc(refused)

    def forget_lag(self, partition: str) -> None:
        """Drop a partition's lag gauge (it was revoked), if it has one."""
        with contextlib.suppress(KeyError):
            self.lag.remove(partition)

    def set_group_lag(self, lags: Mapping[int, int]) -> None:
        """Export one sample from `kafka_lag.GroupLag.sample`: a series per partition in
        `lags`, and their sum. Partitions missing from this sample are dropped. A failed
        sample (None) is not passed here, so the last known values stay."""
        now = {str(p): n for p, n in lags.items()}
        for partition in self._group_lag_partitions - now.keys():
            self.forget_group_lag(partition)
        for partition, n in now.items():
            self.group_lag.labels(partition).set(n)
        self._group_lag_partitions = set(now)
        self.group_lag_sum.set(sum(now.values()))

    def forget_group_lag(self, partition: str) -> None:
        """Drop a partition's group-lag gauge, if it has one. The sum is left as it is: the
        next sample sets it."""
        self._group_lag_partitions.discard(partition)
        with contextlib.suppress(KeyError):
            self.group_lag.remove(partition)

    def exposition(self) -> bytes:
        return bytes(generate_latest(self.registry))


# What an HTTP endpoint answers for a path: status line, content type, body.
Response = tuple[str, str, bytes]


async def serve(
    metrics: Metrics, host: str, port: int, is_ready: Callable[[], bool] | None = None
) -> HttpServer:
    async def respond(path: str) -> Response:
        return route(metrics, path, is_ready)

    return await serve_http(respond, host, port)


def path_app(respond: Callable[[str], Awaitable[Response]]) -> Starlette:
    """A Starlette app answering GET/HEAD on every path with `respond(path)` (the path
    without its query string)."""

    async def endpoint(request: Request) -> StarletteResponse:
        status, ctype, body = await respond(request.url.path)
        return StarletteResponse(body, int(status.split(None, 1)[0]), media_type=ctype)

    return Starlette(routes=[Route("/{path:path}", endpoint, methods=["GET", "HEAD"])])


async def serve_http(
    respond: Callable[[str], Awaitable[Response]], host: str, port: int
) -> HttpServer:
    """GET `respond(path)` over the worker's HTTP stack (`http_server`: uvicorn +
    Starlette), enough for Prometheus and probes, on the running loop."""
    return await http_server.start(path_app(respond), host, port)


def route(metrics: Metrics, path: str, is_ready: Callable[[], bool] | None) -> Response:
    """`path` without its query string."""
    if path == "/metrics":
        return "200 OK", CONTENT_TYPE_LATEST, metrics.exposition()
    if path == "/healthz":
        alive = time.monotonic() - metrics.last_turn < HEALTH_STALE_S
        return (
            ("200 OK" if alive else "503 Service Unavailable"),
            "text/plain",
            (b"ok\n" if alive else b"loop stalled\n"),
        )
    if path == "/readyz":
        ready = metrics.ready and (is_ready() if is_ready else True)
        return (
            ("200 OK" if ready else "503 Service Unavailable"),
            "text/plain",
            (b"ready\n" if ready else b"not ready\n"),
        )
    return "404 Not Found", "text/plain", b"not found\n"
