"""`derender-worker servers` as a developer runs it: a subprocess that prints
`KAFKA_BOOTSTRAP_SERVERS=…` and `REDIS_URL=…` once both servers serve, stops them on
SIGTERM (exit 0, ports closed), and with `--data-dir` keeps topics, records and keys for
the next run, even after its broker was SIGKILLed.

Each test starts its own servers; the Apache Kafka cases are skipped where java or mvn is
missing (and fail with DERENDER_REQUIRE_APACHE_KAFKA=1).
"""

from __future__ import annotations

import asyncio
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from tests.integration.harness import ROOT
from tests.support.kafka_io import consume, produce
from tests.support.server_fixtures import apache_required
from worker.adapters.local.embedded import create_topics, tcp_accepts
from worker.adapters.local.kafka_jars import missing_tools
from worker.constants import INPUT_TOPIC

pytestmark = pytest.mark.integration

# The first Apache run may resolve Kafka's jars (about a minute, more on a slow network);
# from the cache a start takes seconds.
READY_TIMEOUT_S = 300.0
STOP_TIMEOUT_S = 30.0


def needs_apache() -> None:
    missing = missing_tools()
    if missing and not apache_required():
        pytest.skip("; ".join(missing))


class Servers:
    """`derender-worker servers …` as a child process: its stdout read line by line on a
    thread (so a wait can time out), its stderr in a file."""

    def __init__(self, log: Path, *args: str) -> None:
        self.log = log
        with log.open("ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "worker", "servers", *args],
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.env: dict[str, str] = {}

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> Servers:
        """Until both lines are printed: NAME=value, each on a line of its own."""
        deadline = time.monotonic() + timeout_s
        while len(self.env) < 2:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no addresses in {timeout_s} s:\n{self.stderr()}") from None
            if line is None:
                raise AssertionError(f"exited {self.proc.wait()} before ready:\n{self.stderr()}")
            name, _, value = line.partition("=")
            self.env[name] = value
        assert set(self.env) == {"KAFKA_BOOTSTRAP_SERVERS", "REDIS_URL"}, self.env
        return self

    @property
    def bootstrap(self) -> str:
        return self.env["KAFKA_BOOTSTRAP_SERVERS"]

    @property
    def redis_url(self) -> str:
        return self.env["REDIS_URL"]

    def broker_pid(self) -> int:
        found = re.search(r"^  kafka  \S+  pid (\d+)", self.stderr(), re.MULTILINE)
        assert found, self.stderr()
        return int(found.group(1))

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def terminate(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(STOP_TIMEOUT_S)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()  # its servers get SIGTERM from the kernel (stop_with_parent)
            self.proc.wait(STOP_TIMEOUT_S)
        self._reader.join(STOP_TIMEOUT_S)  # at EOF once the process is gone
        assert self.proc.stdout is not None
        self.proc.stdout.close()


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Servers]]:
    """`start(*args)` runs `derender-worker servers *args`; what is still running at the
    end is killed."""
    started: list[Servers] = []

    def make(*args: str) -> Servers:
        started.append(Servers(tmp_path / f"servers-{len(started)}.log", *args))
        return started[-1]

    yield make
    for s in started:
        s.close()


def host_port(address: str) -> tuple[str, int]:
    host, _, port = address.removeprefix("redis://").partition("/")[0].rpartition(":")
    return host, int(port)


@pytest.mark.parametrize("kafka", ["apache", "tansu"])
def test_prints_both_addresses_serves_and_stops_on_sigterm(
    start: Callable[..., Servers], kafka: str
) -> None:
    if kafka == "apache":
        needs_apache()
    servers = start("--kafka", kafka).wait_ready()
    values = [f"v{i}".encode() for i in range(5)]
    # The worker's input topic (4 partitions) is created for it; records go through the
    # printed address.
    asyncio.run(produce(servers.bootstrap, INPUT_TOPIC, values, acks="all"))
    assert sorted(asyncio.run(consume(servers.bootstrap, INPUT_TOPIC, 5))) == values
    client = redis.Redis.from_url(servers.redis_url)
    try:
        assert client.ping()
    finally:
        client.close()
    assert servers.terminate() == 0, servers.stderr()
    assert "stopped the broker and redis" in servers.stderr()
    # (tansu holds fetched records to the end of the wait: the workers must not wait long)
    assert ("--fetch-whole-wait-ms 0" in servers.stderr()) == (kafka == "tansu")
    for address in (servers.bootstrap, servers.redis_url):
        assert not tcp_accepts(*host_port(address)), f"{address} still accepts connections"


def test_a_data_dir_keeps_topics_records_and_keys_after_the_broker_is_killed(
    start: Callable[..., Servers], tmp_path: Path
) -> None:
    needs_apache()
    data = tmp_path / "data"
    topic = f"kept-{uuid.uuid4().hex[:8]}"
    values = [f"kept{i}".encode() for i in range(10)]
    first = start("--data-dir", str(data)).wait_ready()
    asyncio.run(create_topics(first.bootstrap, [topic], partitions=1))
    asyncio.run(produce(first.bootstrap, topic, values, acks="all"))
    client = redis.Redis.from_url(first.redis_url)
    try:
        client.set("kept-key", b"kept-value")
    finally:
        client.close()
    # A crash of the broker: no clean shutdown, its log is recovered at the next start.
    os.kill(first.broker_pid(), signal.SIGKILL)
    assert first.proc.wait(STOP_TIMEOUT_S) == 1, first.stderr()
    assert "kafka exited on its own" in first.stderr()

    # On other ports: the data dir, not the address, is the cluster.
    second = start("--data-dir", str(data)).wait_ready()
    assert asyncio.run(consume(second.bootstrap, topic, 10)) == values
    client = redis.Redis.from_url(second.redis_url)
    try:
        assert client.get("kept-key") == b"kept-value"
    finally:
        client.close()
    assert second.terminate() == 0, second.stderr()


def test_tansu_refuses_a_data_dir(start: Callable[..., Servers], tmp_path: Path) -> None:
    servers = start("--kafka", "tansu", "--data-dir", str(tmp_path / "data"))
    assert servers.proc.wait(STOP_TIMEOUT_S) == 2
    assert "--data-dir needs --kafka apache" in servers.stderr()
