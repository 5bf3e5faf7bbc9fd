"""`derender-worker servers`: a local Kafka broker and a redis-server for development, in
the foreground, until Ctrl-C or SIGTERM.

Once both accept connections it prints, on stdout and nothing else,

    KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:<port>
    REDIS_URL=redis://127.0.0.1:<port>/0

and what it started on stderr. The two names are the variables a test session reads
(tests/support/server_fixtures.py uses servers it is given as they are). It creates the worker's
default topics: `derender-worker run` exits 2 when its topics are missing, and Apache
Kafka here creates none implicitly.

The broker is Apache Kafka (worker/adapters/local/kafka_server.py) when java and mvn are
installed, else tansu; `--kafka` picks one. The first Apache run resolves Kafka's jars
from Maven Central into ~/.cache/derender-kafka (about a minute, with progress); later
runs start from that cache in seconds.

With `--data-dir DIR`, the broker's log (DIR/kafka) and Redis's append-only file
(DIR/redis) live there, so the next run on DIR finds its topics, records, committed
offsets and keys again, even after the broker was SIGKILLed. tansu keeps its topics in
memory only, so it refuses `--data-dir`.

If either server exits on its own, the other is stopped too and the command exits 1;
its data stays in DIR for the next run.

With `--redis-cluster N`, Redis is a real Redis Cluster instead: N masters with one replica
each, from the same redis-server binary (`cluster-enabled yes`, every slot assigned; no
Docker, no redis-cli needed), on 2N consecutive ports from `--redis-port` or on free ones.
`REDIS_URL` is then the seed list `redis://127.0.0.1:<p1>,127.0.0.1:<p2>,…` for
`derender-worker run --redis-mode cluster --redis-url "$REDIS_URL"` (and the test
session's `REDIS_CLUSTER_URL`). A cluster keeps its slot map in each node's own folder, so
it is not kept across runs: `--data-dir` with `--redis-cluster` is refused (exit 2). If a
node exits on its own, the command stops everything and exits 1, as for a single Redis.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO, TYPE_CHECKING

from worker.adapters.local.embedded import (
    LocalServer,
    RedisServer,
    ServerError,
    TansuBroker,
    create_topics,
)
from worker.adapters.local.local_cluster import LocalRedisCluster
from worker.constants import CONTROL_TOPIC, DLQ_TOPIC, INPUT_TOPIC, OUTPUT_TOPIC

if TYPE_CHECKING:  # imported where used: tansu alone needs none of Apache Kafka's code
    from worker.adapters.local.kafka_server import ApacheKafka

APACHE, TANSU = "apache", "tansu"
KINDS = (APACHE, TANSU)
# The worker's default topics: four partitions like the demo's, so a few workers (or
# `run --processes`) can share the input; dead letters are rare, one partition.
TOPICS = ((INPUT_TOPIC, 4), (OUTPUT_TOPIC, 4), (DLQ_TOPIC, 1), (CONTROL_TOPIC, 4))
# How often the foreground loop checks that both servers still run.
WATCH_EVERY_S = 0.5
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

Note = Callable[[str], object]  # one line of progress, to stderr


@dataclass(frozen=True)
class Options:
    kafka: str | None = None  # APACHE, TANSU, or None: apache when java and mvn exist
    data_dir: Path | None = None
    kafka_port: int | None = None
    redis_port: int | None = None
    # N: a Redis Cluster of N masters with a replica each instead of one redis-server.
    redis_cluster: int | None = None


class UsageError(ValueError):
    """Options that cannot work together (exit code 2)."""


class _Stopped(BaseException):
    """Raised by the SIGINT/SIGTERM handler, wherever the main thread is: in the middle of
    resolving Kafka's jars or waiting for a start, too. A BaseException, as
    KeyboardInterrupt is, so that no `except Exception` on the way mistakes it for a
    failure."""


def choose_kafka(requested: str | None) -> tuple[str, str]:
    """The broker to start and why."""
    from worker.adapters.local.kafka_jars import missing_tools

    if requested is not None:
        if requested not in KINDS:
            raise UsageError(f"--kafka must be one of {', '.join(KINDS)}, not {requested!r}")
        return requested, f"--kafka {requested}"
    missing = missing_tools()
    if missing:
        return TANSU, "; ".join(missing)
    return APACHE, "java and mvn found"


def demo_broker() -> tuple[TansuBroker | ApacheKafka, str]:
    """The broker `derender-worker demo` starts, and its name: Apache Kafka when it can
    start at once from the cache (a machine that ran the tests, `.ci/run` or `servers`
    once), else tansu. The demo must take seconds on any machine, a fresh one included,
    so it never waits a minute for Maven; both speak the protocol the worker uses."""
    from worker.adapters.local.kafka_server import DEFAULT_VERSION, ApacheKafka, starts_from_cache

    if starts_from_cache():
        return ApacheKafka(), f"kafka {DEFAULT_VERSION}"
    return TansuBroker(), TANSU


def run_servers(options: Options, out: IO[str] = sys.stdout, err: IO[str] = sys.stderr) -> int:
    """Start both servers, print their addresses, wait for a stop signal; the exit code."""

    def note(line: str) -> None:
        print(line, file=err, flush=True)

    if options.redis_cluster is not None:
        if options.redis_cluster < 1:
            note("derender-worker servers: --redis-cluster needs at least 1 master")
            return 2
        if options.data_dir is not None:
            note(
                "derender-worker servers: --redis-cluster keeps no data across runs, so it "
                "does not take --data-dir"
            )
            return 2
    try:
        kind, why = choose_kafka(options.kafka)
    except UsageError as e:
        note(f"derender-worker servers: {e}")
        return 2
    if kind == TANSU and options.data_dir is not None:
        note(
            f"derender-worker servers: tansu ({why}) keeps its topics in memory only, so "
            "--data-dir needs --kafka apache (a JDK 17+ and Maven)"
        )
        return 2
    redis_kind = (
        "redis-server"
        if options.redis_cluster is None
        else f"a Redis Cluster ({options.redis_cluster} masters with a replica each)"
    )
    note(f"derender-worker servers: {redis_kind} and {_describe(kind)} ({why})")
    if kind == TANSU:
        note(
            "derender-worker servers: tansu answers a fetch only at the end of its wait: "
            "run workers on it with --fetch-whole-wait-ms 0"
        )
    previous = {sig: signal.signal(sig, _on_stop_signal) for sig in STOP_SIGNALS}
    try:
        with ExitStack() as stack:
            return _serve(options, kind, stack, out, note)
    except _Stopped:
        # The `with` above stopped whatever had started, in reverse order.
        note("derender-worker servers: stopped the broker and redis")
        return 0
    except ServerError as e:
        note(f"derender-worker servers: {e}")
        return 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _serve(options: Options, kind: str, stack: ExitStack, out: IO[str], note: Note) -> int:
    data = options.data_dir.absolute() if options.data_dir is not None else None
    redis: RedisServer | LocalRedisCluster
    if options.redis_cluster is not None:
        redis = LocalRedisCluster(options.redis_cluster, 1, base_port=options.redis_port)
    else:
        redis = RedisServer(port=options.redis_port, data_dir=data / "redis" if data else None)
    _start(stack, redis)
    broker = _broker(kind, options, data, note)
    _start(stack, broker)
    bootstrap = f"{broker.host}:{broker.port}"
    for partitions in sorted({p for _, p in TOPICS}):
        names = [name for name, p in TOPICS if p == partitions]
        try:
            asyncio.run(create_topics(bootstrap, names, partitions))
        except Exception as e:  # aiokafka's errors: reported like a failed start
            raise ServerError(f"creating the topics {', '.join(names)} failed: {e!r}") from e
    kept = f"data in {data}" if data else "data discarded at exit (no --data-dir)"
    note(f"  kafka  {bootstrap}  pid {broker.pid}  {kept}  log {broker.log_path}")
    if isinstance(redis, LocalRedisCluster):
        for i, node in enumerate(redis.nodes):
            role = "master" if i < redis.masters_count else "replica"
            note(f"  redis  {node.addr}  {role}  pid {node.pid}  log {node.log_path}")
        note("  redis  a cluster: run the worker with --redis-mode cluster")
    else:
        note(f"  redis  {redis.url}  pid {redis.pid}  log {redis.log_path}")
    note("  topics " + ", ".join(f"{name} ({p} partition{'s' * (p > 1)})" for name, p in TOPICS))
    print(f"KAFKA_BOOTSTRAP_SERVERS={bootstrap}", file=out, flush=True)
    print(f"REDIS_URL={redis.url}", file=out, flush=True)
    note("derender-worker servers: ready; Ctrl-C or SIGTERM stops both")
    watched: tuple[LocalServer | LocalRedisCluster, ...] = (broker, redis)
    while True:
        time.sleep(WATCH_EVERY_S)
        for server in watched:
            if not server.running:
                note(
                    f"derender-worker servers: {server.name} exited on its own; stopping "
                    f"the other. Its log ends with:\n{server.log_tail()}"
                )
                if data:
                    note(f"the data in {data} is kept: run again with --data-dir {data}")
                return 1


def _broker(kind: str, options: Options, data: Path | None, note: Note) -> LocalServer:
    if kind == TANSU:
        return TansuBroker(port=options.kafka_port)
    from worker.adapters.local.kafka_server import ApacheKafka

    # Resolves the jars first if they are not cached yet, reporting as it goes.
    return ApacheKafka(
        data_dir=data / "kafka" if data else None, port=options.kafka_port, progress=note
    )


def _start(stack: ExitStack, server: LocalServer | LocalRedisCluster) -> None:
    # Registered before the start: a stop signal during a slow start still stops the
    # process (a `with` would only register it once started).
    stack.callback(server.close)
    # A `kill -9` of this command must not leave the servers running (and the broker
    # holding the data dir's lock).
    server.stop_with_parent = True
    server.start()


def _describe(kind: str) -> str:
    if kind == TANSU:
        return "tansu"
    from worker.adapters.local.kafka_jars import DEFAULT_VERSION, jars_resolved

    cached = "from the cache" if jars_resolved() else "resolved from Maven Central first"
    return f"Apache Kafka {DEFAULT_VERSION}, {cached}"


def _on_stop_signal(signum: int, frame: FrameType | None) -> None:
    # Further signals are ignored: a second Ctrl-C must not cut the shutdown short and
    # leave a server running.
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    raise _Stopped(signal.Signals(signum).name)
