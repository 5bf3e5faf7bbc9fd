"""How many CPUs this process may use: `--processes auto` and `--lanes` defaults."""

from __future__ import annotations

import contextlib
import math
import os
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


def usable_cpus(cgroup: Path = CGROUP_ROOT, affinity: int | None = None) -> int:
    """CPUs this process may use: its affinity mask, capped by a cgroup CPU quota (a
    container's `limits.cpu`; a fractional quota rounds up, so all of it is used)."""
    n = affinity if affinity is not None else _affinity()
    quota = cgroup_cpu_quota(cgroup)
    if quota is not None:
        n = min(n, math.ceil(quota))
    return max(1, n)


def _affinity() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def cgroup_cpu_quota(root: Path = CGROUP_ROOT) -> float | None:
    """The CPU quota in CPUs, or None when there is none: cgroup v2's `cpu.max`
    ("<quota> <period>" or "max <period>"), else cgroup v1's `cpu.cfs_quota_us`."""
    with contextlib.suppress(OSError, ValueError):
        quota, period = (root / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    with contextlib.suppress(OSError, ValueError):
        quota_us = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return None if quota_us <= 0 else quota_us / period_us
    return None
