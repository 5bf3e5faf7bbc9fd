"""The gateway's test servers: the stand-in engine, `derender-worker gateway` processes,
and the topics and worker they share (the broker and Redis come from
tests/support/server_fixtures.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from tests.gateway.stand_in import StandInEngine
from tests.integration.harness import ROOT, WorkerProcess

START_TIMEOUT_S = 60.0


@pytest.fixture
def engine(deepseek: Tokenizer) -> Iterator[StandInEngine]:
    with StandInEngine(deepseek) as e:
        yield e


@dataclass
class GatewayProcess:
    argv: list[str]
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)
    url: str = ""
    proc: subprocess.Popen[str] | None = None
    lines: list[str] = field(default_factory=list)

    def start(self) -> GatewayProcess:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.argv,
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env={**os.environ, **self.env},
            )
        assert self.proc.stdout is not None
        found = threading.Event()

        def read() -> None:  # (stdout drained to the end, so the child never blocks)
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                self.lines.append(line)
                if line.startswith("DERENDER_GATEWAY_URL="):
                    self.url = line.split("=", 1)[1].strip().replace("0.0.0.0", "127.0.0.1")
                    found.set()

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not found.wait(0.2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"the gateway did not start:\n{self.log_text()}")
        return self

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@dataclass
class Loop:
    """Topics, a worker and gateways: one test's whole loop."""

    bootstrap: str
    topics: dict[str, str]
    engine: StandInEngine
    start_worker: Callable[..., WorkerProcess]
    start_gateway: Callable[..., GatewayProcess]


@pytest.fixture
def loop(
    kafka_bootstrap: str,
    redis_url: str,
    new_topic: Callable[..., str],
    engine: StandInEngine,
    tmp_path: Path,
) -> Iterator[Loop]:
    topics = {
        "input": new_topic(2, "gw-in"),
        "output": new_topic(4, "gw-out"),
        "dlq": new_topic(1, "gw-dlq"),
        "control": new_topic(2, "gw-ctl"),
    }
    workers: list[WorkerProcess] = []
    gateways: list[GatewayProcess] = []

    def start_worker(*extra: str) -> WorkerProcess:
        w = WorkerProcess(
            kafka_bootstrap, redis_url, topics["input"], topics["output"], topics["dlq"],
            f"gw-{uuid.uuid4().hex[:8]}", f"gw{uuid.uuid4().hex[:8]}:",
            extra=list(extra), log_path=tmp_path / f"worker-{len(workers)}.log",
        ).start()  # fmt: skip
        workers.append(w)
        return w

    def start_gateway(*extra: str, env: dict[str, str] | None = None) -> GatewayProcess:
        argv = [
            sys.executable, "-m", "worker", "gateway",
            "--engine-url", engine.url,
            "--bootstrap-servers", kafka_bootstrap,
            "--input-topic", topics["input"],
            "--output-topic", topics["output"],
            "--host", "127.0.0.1", "--port", "0",
            *extra,
        ]  # fmt: skip
        log = tmp_path / f"gateway-{len(gateways)}.log"
        g = GatewayProcess(argv, log, dict(env or {})).start()
        gateways.append(g)
        return g

    yield Loop(kafka_bootstrap, topics, engine, start_worker, start_gateway)
    for g in gateways:
        g.stop()
    for w in workers:
        if w.alive:
            w.stop()
