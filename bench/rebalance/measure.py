"""Pause and stall per partition around a scale event, from the output topic's record
timestamps (CreateTime: when the worker sent the output) and the workers' logged
assignments. Pure: no I/O."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

# owner timeline: partition → [(time s, owner name or None)], in time order
Timeline = Mapping[int, Sequence[tuple[float, str | None]]]
# A worker logs a revocation once it is done with it: the window before that line in which
# an unmoved partition of the same worker may have waited for it.
BESIDE_S = 0.6


def owner_at(timeline: Timeline, partition: int, at: float) -> str | None:
    owner = None
    for t, who in timeline.get(partition, ()):
        if t > at:
            break
        owner = who
    return owner


def longest_gap(stamps: Sequence[float], start: float, end: float) -> float:
    """The longest time without an output in [start, end], counting from the last output
    before `start` and to the first after `end` (a gap that crosses the window counts
    whole); `stamps` sorted."""
    inside = [s for s in stamps if start <= s <= end]
    before = [s for s in stamps if s < start]
    after = [s for s in stamps if s > end]
    points = ([before[-1]] if before else [start]) + inside + ([after[0]] if after else [end])
    return max((b - a for a, b in itertools.pairwise(points)), default=end - start)


def gap_across(stamps: Sequence[float], at: float) -> float:
    """The gap between the last output at or before `at` and the first after it."""
    before = [s for s in stamps if s <= at]
    after = [s for s in stamps if s > at]
    if not before or not after:
        return 0.0
    return after[0] - before[-1]


def resume_after(stamps: Sequence[float], at: float) -> float:
    """From `at` to the first output after it."""
    after = [s for s in stamps if s > at]
    return after[0] - at if after else 0.0


@dataclass
class EventResult:
    name: str
    at: float
    unmoved: dict[int, float] = field(default_factory=dict)  # partition → longest gap
    moved: dict[int, float] = field(default_factory=dict)
    baseline: float = 0.0  # the longest gap of any partition in the steady time before
    # partition → the longest gap across a revocation of it (the rebalance's own pause)
    across: dict[int, float] = field(default_factory=dict)
    # partition → the longest wait from a revocation of it to its next output
    resume: dict[int, float] = field(default_factory=dict)
    # unmoved partition → its longest gap around a revocation of another partition of
    # its owner (what a revocation costs the partitions that stay)
    beside: dict[int, float] = field(default_factory=dict)

    def summary(self) -> dict[str, float | int]:
        un = sorted(self.unmoved.values())
        mv = sorted(self.moved.values())
        un_r = sorted(self.across[p] for p in self.unmoved if p in self.across)
        mv_r = sorted(self.across[p] for p in self.moved if p in self.across)
        un_s = sorted(self.resume[p] for p in self.unmoved if p in self.resume)
        mv_s = sorted(self.resume[p] for p in self.moved if p in self.resume)
        bs = sorted(self.beside.values())
        return {
            "unmoved_beside_n": len(bs),
            "unmoved_beside_p50": statistics.median(bs) if bs else 0.0,
            "unmoved_beside_max": bs[-1] if bs else 0.0,
            "unmoved_resume_max": un_s[-1] if un_s else 0.0,
            "moved_resume_p50": statistics.median(mv_s) if mv_s else 0.0,
            "moved_resume_max": mv_s[-1] if mv_s else 0.0,
            "unmoved_rebalance_max": un_r[-1] if un_r else 0.0,
            "moved_rebalance_p50": statistics.median(mv_r) if mv_r else 0.0,
            "moved_rebalance_max": mv_r[-1] if mv_r else 0.0,
            "unmoved_n": len(un),
            "unmoved_max": un[-1] if un else 0.0,
            "unmoved_p50": statistics.median(un) if un else 0.0,
            "moved_n": len(mv),
            "moved_p50": statistics.median(mv) if mv else 0.0,
            "moved_max": mv[-1] if mv else 0.0,
            "baseline": self.baseline,
        }


def event_result(
    name: str,
    at: float,
    window_s: float,
    stamps: Mapping[int, Sequence[float]],
    timeline: Timeline,
    partitions: int,
    baseline_s: float = 3.0,
    revoked: Mapping[int, Sequence[float]] | None = None,
) -> EventResult:
    """A partition moved if its owner at the end of the window is not its owner at `at`
    (an owner that is going away counts as moving it)."""
    res = EventResult(name, at)
    for p in range(partitions):
        s = stamps.get(p, [])
        gap = longest_gap(s, at, at + window_s)
        before, after = owner_at(timeline, p, at), owner_at(timeline, p, at + window_s)
        (res.unmoved if before == after and before is not None else res.moved)[p] = gap
        times = [t for t in (revoked or {}).get(p, ()) if at <= t <= at + window_s]
        if times:
            res.across[p] = max(gap_across(s, t) for t in times)
            res.resume[p] = max(resume_after(s, t) for t in times)
        res.baseline = max(res.baseline, longest_gap(s, at - baseline_s, at - 0.001))
    for p in res.unmoved:
        owner = owner_at(timeline, p, at)
        times = [
            t
            for q, ts in (revoked or {}).items()
            if q != p
            for t in ts
            if at <= t <= at + window_s and owner_at(timeline, q, t - 0.001) == owner
        ]
        if times:
            s = stamps.get(p, [])
            res.beside[p] = max(longest_gap(s, t - BESIDE_S, t) for t in times)
    return res


def repeats(keys: Sequence[tuple[str, str, str]]) -> int:
    """Outputs seen more than once (by request id, seq, part)."""
    return len(keys) - len(set(keys))
