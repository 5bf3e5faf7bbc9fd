"""What every benchmark here shares: the machine's description, pinning, timing."""

from __future__ import annotations

import gc
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def py_spy() -> Path:
    """The sampling profiler beside this venv's python, or a start-up error naming the fix
    (it is in the `bench` dependency group, which `make venv` leaves out: CI never profiles)."""
    spy = Path(sys.executable).with_name("py-spy")
    if not spy.exists():
        fix = f"{sys.executable} -m pip install -c constraints.txt --group bench"
        raise SystemExit(f"{spy} is missing: install it with {fix}")
    return spy


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def code_version(repo: Path | None = None) -> str:
    """The commit measured (of `repo`, default this checkout), and whether `worker/` had
    uncommitted changes."""
    repo = repo or REPO
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", "worker"],
            cwd=repo,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    if not sha:
        return "unknown"
    return f"{sha} (worker/ has uncommitted changes)" if dirty else sha


def pin_one_core(cpu: int) -> str:
    """Run this process on one CPU (a benchmark of one core's work)."""
    try:
        os.sched_setaffinity(0, {cpu})
        return f"pinned to CPU {cpu}"
    except (AttributeError, OSError) as exc:
        return f"not pinned ({exc})"


def timed_round_robin(fns: list[Callable[[], object]], repeats: int) -> list[tuple[float, float]]:
    """(best, median) seconds of each function, after one warm-up run of each.

    The runs go round robin (a, b, c, a, b, c, …): on a shared machine a burst of other
    work then slows one run of every function instead of all runs of one, and best-of-N
    keeps comparisons between rows fair.
    """
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, ts in zip(fns, times, strict=True):
            gc.collect()
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
    return [(min(ts), statistics.median(ts)) for ts in times]


def fmt_rate(x: float) -> str:
    if x >= 1e6:
        return f"{x / 1e6:.2f} M"
    if x >= 1e3:
        return f"{x / 1e3:.1f} k"
    return f"{x:.0f}"
