"""The operations files against a real Prometheus: Debian's `prometheus` scrapes a
running `derender-worker run` (local Apache Kafka and redis-server, some traffic) and a
`derender-worker serve` (some requests) with the shipped deploy/prometheus/prometheus.yml,
only its targets rewritten, and its rules. Then every PromQL expression of the Grafana
dashboard, of the HPA-on-Prometheus manifest (the HPA's metric, prometheus-adapter's
query) and every recording rule returns data through /api/v1/query, the rules load
without error, and the dead-letter alert fires on the dead letters sent.

The shipped 5 s scrape and rule intervals are kept: the 1-minute rate windows have two
samples 5-10 s after the first scrape, the group lag a sample every 10 s."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from tokenizers import Tokenizer

from tests.integration.harness import ROOT, WorkerProcess, make_generations
from tests.ops.prometheus import Prometheus, has_data
from tests.ops.promql import dashboard_exprs, hpa_exprs, rules
from tests.serve import bodies
from tests.support.servers import free_port

pytestmark = pytest.mark.integration

# From the first scrape to every expression answering: the slowest is a 1-minute rate
# of a histogram that needs two scrapes with new observations, and the group lag, read
# every 10 s; a loaded 2-core machine gets the rest.
DATA_TIMEOUT_S = 90.0
WORKER_JOB, SERVE_JOB = "derender-worker", "derender-serve"


class Traffic:
    """Background load until stopped: a few new requests (and a dead letter now and then)
    into the worker's input topic each second, and derender requests (200s and a 400)
    to serve."""

    def __init__(self, bootstrap: str, topic: str, tok: Tokenizer, serve_port: int) -> None:
        self.bootstrap, self.topic, self.tok, self.serve_port = bootstrap, topic, tok, serve_port
        self.stopping = threading.Event()
        self.errors: list[BaseException] = []
        self.dead_letters = 0
        self.answers: dict[int, int] = {}
        self._threads = [
            threading.Thread(target=self._guard, args=(self._records,), daemon=True),
            threading.Thread(target=self._guard, args=(self._requests,), daemon=True),
        ]

    def __enter__(self) -> Traffic:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        for t in self._threads:
            t.join(timeout=30)
        assert not self.errors, self.errors

    def _guard(self, body: Callable[[], None]) -> None:
        try:
            body()
        except BaseException as exc:
            self.errors.append(exc)

    def _records(self) -> None:
        asyncio.run(self._publish())

    async def _publish(self) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=5)
        await asyncio.wait_for(producer.start(), 30)
        try:
            for n in range(10_000):
                if self.stopping.is_set():
                    return
                for g in make_generations(self.tok, 4, seed=n, prefix=uuid.uuid4().hex[:8]):
                    for r in g.records:
                        await producer.send(
                            self.topic, json.dumps(r).encode(), key=r["request_id"].encode()
                        )
                if n % 5 == 0:
                    await producer.send(self.topic, b"{not json", key=b"bad")
                    self.dead_letters += 1
                await asyncio.wait_for(producer.flush(), 30)
                await asyncio.sleep(1.0)
        finally:
            await asyncio.wait_for(producer.stop(), 30)

    def _requests(self) -> None:
        ok = json.dumps(bodies.chat_body(bodies.PLAIN)).encode()
        while not self.stopping.is_set():
            for body, ctype in (
                (ok, "application/json"),
                (ok, "application/json"),
                (ok, "text/plain"),
            ):
                conn = http.client.HTTPConnection("127.0.0.1", self.serve_port, timeout=10)
                try:
                    conn.request(
                        "POST", "/v1/chat/completions/derender", body, {"content-type": ctype}
                    )
                    status = conn.getresponse().status
                finally:
                    conn.close()
                self.answers[status] = self.answers.get(status, 0) + 1
            self.stopping.wait(0.5)


@pytest.fixture
def serve_port(tmp_path: Path) -> Iterator[int]:
    """`derender-worker serve` as a child process, answering /health."""
    port = free_port()
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "worker", "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(os.environ),
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"serve did not answer:\n{log.read_text()}"
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            try:
                conn.request("GET", "/health")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                time.sleep(0.2)
            finally:
                conn.close()
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def expressions() -> dict[str, str]:
    """Every query the operations files make, by where it comes from."""
    exprs = dict(dashboard_exprs())
    # prometheus-adapter fills in its own matchers and grouping for the pods it asks about;
    # here the worker's job and instance stand in for namespace and pod.
    exprs |= hpa_exprs(f'job="{WORKER_JOB}"', "instance")
    exprs |= {f"recording rule {r['record']}": r["record"] for r in rules() if "record" in r}
    return exprs


def test_prometheus_gets_data_for_every_dashboard_hpa_and_recording_query(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
    serve_port: int,
    tmp_path: Path,
) -> None:
    metrics_port = free_port()
    worker = worker_factory(metrics_port=metrics_port)
    prom = Prometheus(
        tmp_path / "prometheus",
        {WORKER_JOB: [f"127.0.0.1:{metrics_port}"], SERVE_JOB: [f"127.0.0.1:{serve_port}"]},
    )
    wanted = expressions()
    assert len(wanted) >= 30
    missing = dict(wanted)
    try:
        with Traffic(kafka_bootstrap, topics["input"], deepseek, serve_port) as traffic:
            deadline = time.monotonic() + DATA_TIMEOUT_S
            fired = False
            while (missing or not fired) and time.monotonic() < deadline:
                assert worker.alive, worker.log_tail()
                missing = {k: e for k, e in missing.items() if not has_data(prom.query(e))}
                fired = bool(
                    prom.query('ALERTS{alertname="DerenderDeadLetters",alertstate="firing"}')
                )
                time.sleep(1.0)
            targets = prom.targets()
            groups = prom.rule_groups()
            firing = prom.query('ALERTS{alertstate="firing"}')
            answers = dict(traffic.answers)
    finally:
        prom.stop()
    assert {t["labels"]["job"] for t in targets} == {WORKER_JOB, SERVE_JOB}
    assert all(t["health"] == "up" for t in targets), targets
    assert not missing, f"no data for: {json.dumps(missing, indent=1)}\n{prom.log_tail()}"
    # The rules loaded and evaluate without error; the only alert firing is the one the
    # traffic asked for (dead letters sent), and it fired.
    assert {g["name"] for g in groups} == {"derender.recording", "derender.alerts"}
    assert all(r["health"] == "ok" for g in groups for r in g["rules"]), groups
    assert fired and {a["metric"]["alertname"] for a in firing} == {"DerenderDeadLetters"}
    assert answers.get(200) and answers.get(400), answers
