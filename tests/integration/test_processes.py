"""`run --processes 2` against the real broker and redis-server: the supervisor, its two
worker processes, their merged metrics and probes, and how the three stop together."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable

import pytest
from prometheus_client.parser import text_string_to_metric_families
from tokenizers import Tokenizer

from tests.integration.harness import (
    WorkerProcess,
    done_count,
    interleave,
    make_generations,
    publish,
    read_all,
    verify,
)
from tests.support.servers import free_port

pytestmark = pytest.mark.integration


def _children(w: WorkerProcess, n: int = 2, timeout_s: float = 30) -> dict[int, int]:
    """index → pid of the worker processes, from the supervisor's log."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = re.findall(r"worker process (\d+) started \(pid (\d+)\)", w.log_text())
        if len(found) >= n:
            return {int(i): int(p) for i, p in found}
        time.sleep(0.1)
    raise AssertionError(f"worker processes did not start:\n{w.log_tail()}")


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped) is gone for our purpose.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_gone(pids: list[int], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not any(_exists(p) for p in pids):
            return
        time.sleep(0.1)
    raise AssertionError(f"still running: {[p for p in pids if _exists(p)]}")


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return 0, ""


def _samples(body: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(s.labels.items())): s.value
        for fam in text_string_to_metric_families(body)
        for s in fam.samples
        if s.name == name
    }


def test_two_processes_share_the_partitions_and_answer_exactly(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
) -> None:
    port = free_port()
    gens = make_generations(deepseek, 120, seed=21)
    worker = worker_factory("--processes", "2", metrics_port=port)
    pids = _children(worker)
    deadline = time.monotonic() + 60
    while _get(port, "/readyz")[0] != 200:  # both processes have their partitions
        assert time.monotonic() < deadline, worker.log_tail()
        time.sleep(0.2)
    assigned = _samples(_get(port, "/metrics")[1], "derender_assigned_partitions")
    assert sorted(assigned.values()) == [2.0, 2.0]  # the 4 input partitions, dealt out

    asyncio.run(publish(kafka_bootstrap, topics["input"], interleave(gens, seed=22)))
    outputs = asyncio.run(
        read_all(kafka_bootstrap, topics["output"], lambda o: done_count(o) >= len(gens))
    )
    assert verify(outputs, gens).repeats == 0

    # The merged exposition: each process's counters under its own `process` label,
    # together every record once.
    want = float(sum(len(g.records) for g in gens))
    ok: dict[tuple[tuple[str, str], ...], float] = {}
    while time.monotonic() < deadline + 30:
        status, body = _get(port, "/metrics")
        assert status == 200
        ok = {k: v for k, v in _samples(body, "derender_records_total").items() if
              ("result", "ok") in k}  # fmt: skip
        if sum(ok.values()) == want:
            break
        time.sleep(0.3)
    assert sum(ok.values()) == want
    assert {dict(k)["process"] for k, v in ok.items() if v > 0} == {"0", "1"}
    assert _samples(body, "derender_worker_processes") == {(): 2.0}
    check = [sys.executable, "-m", "worker", "check", "--metrics-port", str(port), "--ready"]
    assert subprocess.run(check, check=False).returncode == 0

    assert worker.stop() == 0
    _wait_gone(list(pids.values()))
    log = worker.log_text()
    assert log.count("stopped after") == 2  # each process's own summary line
    assert "stopped 2 worker processes (exit codes 0, 0)" in log


def test_one_process_dying_stops_the_pod_non_zero(
    kafka_bootstrap: str, topics: dict[str, str], worker_factory: Callable[..., WorkerProcess]
) -> None:
    port = free_port()
    worker = worker_factory("--processes", "2", metrics_port=port)
    pids = _children(worker)
    deadline = time.monotonic() + 60
    while _get(port, "/readyz")[0] != 200:
        assert time.monotonic() < deadline, worker.log_tail()
        time.sleep(0.2)
    os.kill(pids[1], signal.SIGKILL)
    assert worker.proc is not None
    assert worker.proc.wait(timeout=60) == 1  # killed by a signal: 1
    _wait_gone(list(pids.values()))
    assert "worker process 1" in worker.log_text()
    assert "exited with -9: stopping the others" in worker.log_text()


def test_a_killed_supervisor_leaves_no_orphans(
    kafka_bootstrap: str, topics: dict[str, str], worker_factory: Callable[..., WorkerProcess]
) -> None:
    worker = worker_factory("--processes", "2")
    pids = _children(worker)
    time.sleep(1.0)  # let them get past start-up
    worker.kill9()
    # Linux: the kernel sends each worker process SIGTERM when its parent dies.
    _wait_gone(list(pids.values()))
