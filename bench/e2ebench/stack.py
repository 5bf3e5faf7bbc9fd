"""What the bench runs on: the engine, Apache Kafka, Redis (started here, or given by URL),
one worker and one gateway (always started here, from this checkout or `--tree`), and the
meters read beside them: a process tree's CPU seconds, the gateway's /metrics."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 4
START_TIMEOUT_S = 90.0


@dataclass
class Proc:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    metrics_url: str | None = None  # the worker's /metrics, when it serves one

    @property
    def pid(self) -> int:
        return self.proc.pid

    def check(self) -> None:
        if self.proc.poll() is not None:
            tail = self.log.read_text(errors="replace").splitlines()[-20:]
            raise SystemExit(
                f"the {self.name} exited ({self.proc.returncode}):\n" + "\n".join(tail)
            )


def free_port() -> int:
    from worker.adapters.local.embedded import free_port as free

    return int(free())


def spawn(name: str, argv: list[str], log: Path, tree: Path | None) -> Proc:
    """`python -m worker …` from this checkout, or from `tree` (its own code)."""
    cwd = tree or ROOT
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    with open(log, "ab") as f:  # (the child keeps its own copy)
        proc = subprocess.Popen(
            [sys.executable, "-m", "worker", *argv],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=f,
            stderr=subprocess.STDOUT,
            env=env,
        )
    return Proc(name, proc, log)


@contextlib.contextmanager
def running(p: Proc) -> Iterator[Proc]:
    try:
        yield p
    finally:
        if p.proc.poll() is None:
            p.proc.terminate()
            try:
                p.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.proc.kill()
                p.proc.wait(timeout=10)


def topics(bootstrap: str) -> dict[str, str]:
    from worker.adapters.local.embedded import create_topics

    tag = uuid.uuid4().hex[:8]
    names = {"input": f"e2eb-in-{tag}", "output": f"e2eb-out-{tag}", "dlq": f"e2eb-dlq-{tag}"}
    asyncio.run(create_topics(bootstrap, [names["input"], names["output"]], PARTITIONS))
    asyncio.run(create_topics(bootstrap, [names["dlq"]], 1))
    return names


def worker_argv(
    bootstrap: str,
    redis_url: str,
    names: dict[str, str],
    models: Path,
    extra: list[str],
    metrics_port: int = 0,
) -> list[str]:
    tag = uuid.uuid4().hex[:8]
    return [
        "run",
        "--bootstrap-servers", bootstrap,
        "--redis-url", redis_url,
        "--input-topic", names["input"],
        "--output-topic", names["output"],
        "--dlq-topic", names["dlq"],
        "--group-id", f"e2eb-{tag}",
        "--state-prefix", f"e2eb{tag}:",
        "--models", str(models),
        "--metrics-port", str(metrics_port),
        "--metrics-host", "127.0.0.1",
        *extra,
    ]  # fmt: skip


def gateway_argv(
    engine_url: str, bootstrap: str, names: dict[str, str], port: int, extra: list[str]
) -> list[str]:
    return [
        "gateway",
        "--engine-url", engine_url,
        "--bootstrap-servers", bootstrap,
        "--input-topic", names["input"],
        "--output-topic", names["output"],
        "--host", "127.0.0.1",
        "--port", str(port),
        *extra,
    ]  # fmt: skip


def wait_ready(gw: Proc, url: str, model: str) -> float:
    """Until a streamed request through the gateway is answered (the worker has joined
    its group and holds the partitions); returns the seconds it took."""
    t0 = time.monotonic()
    body = json.dumps(
        {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    ).encode()
    while time.monotonic() - t0 < START_TIMEOUT_S:
        gw.check()
        req = urllib.request.Request(
            f"{url}/v1/chat/completions", body, {"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(req, timeout=40) as r:
                if r.status == 200:
                    return time.monotonic() - t0
        except OSError:
            pass
        time.sleep(1)
    raise SystemExit(f"the gateway at {url} answered nothing within {START_TIMEOUT_S:.0f} s")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and its children (the worker's supervisor
    and its processes), 0 once it is gone."""
    u = usage(pid)
    return u.user_s + u.system_s


@dataclass(frozen=True)
class Usage:
    """What a process tree has used so far: CPU seconds (user, system) and its voluntary
    context switches (each a wait on a socket that had nothing: a proxy for the messages
    it exchanged, and for the wake-ups it costs the processes on its core)."""

    user_s: float = 0.0
    system_s: float = 0.0
    switches: int = 0

    def __sub__(self, other: Usage) -> Usage:
        return Usage(
            self.user_s - other.user_s,
            self.system_s - other.system_s,
            self.switches - other.switches,
        )

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.user_s + other.user_s,
            self.system_s + other.system_s,
            self.switches + other.switches,
        )


def usage(pid: int | None) -> Usage:
    """A process tree's `Usage` (zero once it is gone, or for None: a server not started
    here)."""
    if pid is None:
        return Usage()
    try:
        p = psutil.Process(pid)
        procs = [p, *p.children(recursive=True)]
    except psutil.Error:
        return Usage()
    total = Usage()
    for q in procs:
        with contextlib.suppress(psutil.Error):
            t = q.cpu_times()
            total += Usage(t.user, t.system, q.num_ctx_switches().voluntary)
    return total


def cpu_busy(cpus: set[int]) -> tuple[float, float]:
    """Busy and total seconds so far, summed over `cpus` (psutil's per-CPU times): over a
    wave, busy / total is how full the loop's cores were."""
    per = psutil.cpu_times(percpu=True)
    busy = total = 0.0
    for c in cpus:
        t = per[c]
        idle = t.idle + getattr(t, "iowait", 0.0)
        whole = sum(t)
        busy += whole - idle
        total += whole
    return busy, total


def reply_wait(url: str) -> tuple[float, float, dict[float, float]]:
    """The gateway's `derender_gateway_reply_wait_seconds`: (count, sum, cumulative buckets)."""
    return histogram(url, "derender_gateway_reply_wait_seconds")


def batches(url: str | None) -> tuple[float, float]:
    """The worker's `derender_batch_records`: (batches, records) so far; zeros without a
    metrics URL."""
    if url is None:
        return 0.0, 0.0
    count, total, _ = histogram(url, "derender_batch_records")
    return count, total


def histogram(url: str, name: str) -> tuple[float, float, dict[float, float]]:
    """A histogram on `url`/metrics: (count, sum, cumulative buckets)."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as r:
        text = r.read().decode()
    count = total = 0.0
    buckets: dict[float, float] = {}
    for fam in text_string_to_metric_families(text):
        if fam.name != name:
            continue
        for s in fam.samples:
            if s.name.endswith("_count"):
                count = s.value
            elif s.name.endswith("_sum"):
                total = s.value
            elif s.name.endswith("_bucket"):
                buckets[float(s.labels["le"])] = s.value
    return count, total, buckets


def bucket_quantile(
    before: dict[float, float], after: dict[float, float], q: float
) -> float | None:
    """The upper bound of the bucket holding quantile `q` of what was observed between
    two scrapes (None: nothing observed)."""
    diff = sorted((le, after.get(le, 0.0) - before.get(le, 0.0)) for le in after)
    if not diff or diff[-1][1] <= 0:
        return None
    want = q * diff[-1][1]
    for le, n in diff:
        if n >= want:
            return le
    return None
