"""The systems under test as processes: launching, settling, their CPU and /metrics."""

from __future__ import annotations

import asyncio
import math
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workerbench.profile import (
    ASSIGNED,
    EXACTLY_ONCE,
    HEARTBEAT_MS,
    PARTITIONS,
    ROOT,
    SCRIPT,
    SESSION_TIMEOUT_MS,
)

# -- processes, metrics, CPU ------------------------------------------------------------


def _stat(pid: int | str) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads) and of its children (the worker
    processes of `--processes N`) from /proc, in seconds."""
    fields = _stat(pid)
    if fields is None:
        return math.nan
    ticks = int(fields[11]) + int(fields[12])
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (child := _stat(entry)) is not None and child[1] == str(pid):
            ticks += int(child[11]) + int(child[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def jit_cpu_seconds(pid: int) -> float:
    """utime + stime of a JVM's JIT compiler threads ("C1 CompilerThre", "C2 CompilerThre"
    in /proc/PID/task/*/comm), in seconds; 0 for a process without them (tansu)."""
    ticks = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return math.nan
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm", encoding="ascii") as f:
                if "CompilerThre" not in f.read():
                    continue
            with open(f"/proc/{pid}/task/{tid}/stat", encoding="ascii") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # (a compiler thread can come and go)
            continue
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def machine_busy_seconds() -> float:
    """CPU seconds spent by the whole machine (all cores), not idle nor waiting on I/O."""
    with open("/proc/stat", encoding="ascii") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    return (sum(ticks[:8]) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """Cores used over a window by the system under test, the broker, redis-server, this bench
    process, and everything else on the machine (other users' work: the bench cannot
    control it, the report shows it)."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self._t0 = 0.0
        self._c0: dict[str, float] = {}

    def _sample(self) -> dict[str, float]:
        c = {k: cpu_seconds(p) for k, p in self.pids.items()}
        c["bench"] = time.process_time()
        c["machine"] = machine_busy_seconds()
        return c

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._c0 = self._sample()

    def stop(self) -> dict[str, float]:
        c1 = self._sample()
        window = time.monotonic() - self._t0
        out = {k: (c1[k] - self._c0[k]) / window for k in c1}
        ours = sum(v for k, v in out.items() if k != "machine")
        out["other"] = max(out.pop("machine") - ours, 0.0)
        return out


CPU_KEYS = ("sut", "broker", "redis", "bench", "other")


def fmt_cpu(c: dict[str, float]) -> str:
    return " / ".join(f"{c[k]:.2f}" for k in CPU_KEYS)


def scrape(port: int) -> dict[str, float]:
    """The worker's /metrics as {'name{labels}': value}; the series of `--processes N`
    (labelled `process="<index>"`) summed over the processes."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            name = re.sub(r'process="[^"]*",?', "", name).replace(",}", "}").replace("{}", "")
            out[name] = out.get(name, 0.0) + float(value)
    return out


def diff(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items()}


def buckets(m: dict[str, float], name: str) -> list[tuple[float, float]]:
    """A histogram's cumulative buckets as (upper bound, count), sorted."""
    prefix = f'{name}_bucket{{le="'
    out = []
    for key, value in m.items():
        if key.startswith(prefix):
            le = key[len(prefix) : key.index('"', len(prefix))]
            out.append((math.inf if le == "+Inf" else float(le), value))
    return sorted(out)


def histogram_quantile(m: dict[str, float], name: str, q: float) -> float:
    """Prometheus-style quantile (linear within the bucket) of a histogram."""
    bs = buckets(m, name)
    if not bs or bs[-1][1] <= 0:
        return math.nan
    rank = q * bs[-1][1]
    lower, below = 0.0, 0.0
    for le, count in bs:
        if count >= rank:
            if math.isinf(le):
                return lower
            inside = count - below
            return lower + (le - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = le, count
    return lower


def fraction_within(m: dict[str, float], name: str, bound: float) -> float:
    """Share of a histogram's observations ≤ `bound` (which must be a bucket bound)."""
    bs = buckets(m, name)
    total = bs[-1][1] if bs else 0.0
    at = next((c for le, c in bs if math.isclose(le, bound)), math.nan)
    return at / total if total else math.nan


def stop_process(proc: subprocess.Popen[bytes]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait(10)
    return proc.returncode


@dataclass(frozen=True)
class System:
    kind: str  # "worker" | "passthrough"
    lanes: int | None = None  # the worker's --lanes (None: its default)
    processes: int | None = None  # the worker's --processes (None: its default, 1)
    guarantee: str | None = None  # the worker's --guarantee (None: not passed, at-least-once)
    extra: tuple[str, ...] = ()  # more flags of the worker's (prefilled_bench --also)

    @property
    def label(self) -> str:
        label = self.kind
        if self.guarantee is not None:
            label += f", {self.guarantee}"
        if self.lanes is not None:
            label += f", {self.lanes} lane{'s' if self.lanes > 1 else ''}"
        if self.processes is not None:
            label += f", {self.processes} processes"
        return label

    @property
    def transactional(self) -> bool:
        return self.guarantee == EXACTLY_ONCE

    @property
    def isolation_level(self) -> str:
        """How the bench reads this system's outputs: only committed ones if it writes
        them in transactions."""
        return "read_committed" if self.transactional else "read_uncommitted"


@dataclass
class Env:
    bootstrap: str
    redis_url: str
    redis_pid: int
    broker_pid: int
    workdir: Path
    max_batch: int
    redis_mode: str = "standalone"
    # The checkout whose worker runs (`--tree`; None: this one). The passthrough is always
    # this checkout's: it is the ceiling, not what is measured.
    tree: Path | None = None


def launch(
    system: System, env: Env, topics: dict[str, str], metrics_port: int, cwd: Path | None = None
) -> tuple[Any, Path]:
    """`cwd`: the checkout whose worker runs (`python -m worker` imports it from there)."""
    group = f"bench-{uuid.uuid4().hex[:8]}"
    flags = [
        "--bootstrap-servers", env.bootstrap,
        "--input-topic", topics["input"],
        "--output-topic", topics["output"],
        "--dlq-topic", topics["dlq"],
        "--group-id", group,
        "--max-batch", str(env.max_batch),
        "--session-timeout-ms", str(SESSION_TIMEOUT_MS),
        "--heartbeat-interval-ms", str(HEARTBEAT_MS),
    ]  # fmt: skip
    me = str(SCRIPT)
    if system.processes is not None:
        flags += ["--processes", str(system.processes)]
    if system.kind == "worker":
        flags += [
            "--redis-url", env.redis_url,
            "--redis-mode", env.redis_mode,
            "--state-prefix", f"{group}:",
            "--metrics-port", str(metrics_port),
            "--metrics-host", "127.0.0.1",
            "--log-level", "WARNING",
        ]  # fmt: skip
        if system.lanes is not None:
            flags += ["--lanes", str(system.lanes)]
        if system.guarantee is not None:
            flags += ["--guarantee", system.guarantee]
        flags += system.extra
        argv = [sys.executable, "-m", "worker", "run", *flags]
    else:
        argv = [sys.executable, me, "_passthrough", *flags]
    log = env.workdir / f"{system.kind}-{group}.log"
    with open(log, "ab") as f:
        proc = subprocess.Popen(
            argv,
            cwd=cwd or (env.tree if system.kind == "worker" else None) or ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=f,
        )
    return proc, log


def _shares(system: System, port: int, log: Path) -> list[float]:
    """Partitions held by each process of the system, as far as it has said."""
    if system.kind == "worker":
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                text = r.read().decode()
        except OSError:
            return []
        return [
            float(line.rpartition(" ")[2])
            for line in text.splitlines()
            if line.startswith("derender_assigned_partitions")
        ]
    # Found anywhere, not per line: two processes' writes to the one log can share a line.
    latest: dict[str, float] = {}
    for m in re.finditer(rf"{ASSIGNED} (pid \d+): (\d+)", log.read_text(errors="replace")):
        latest[m.group(1)] = float(m.group(2))
    return list(latest.values())


async def settle(system: System, port: int, log: Path, proc: Any, timeout_s: float = 60.0) -> None:
    """Until every process of the system holds partitions and together they hold all."""
    n = system.processes or 1
    deadline = time.monotonic() + timeout_s
    while True:
        shares = _shares(system, port, log)
        if len(shares) == n and all(shares) and sum(shares) == PARTITIONS:
            return
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{system.label} did not settle ({shares}); see {log}")
        await asyncio.sleep(0.1)
