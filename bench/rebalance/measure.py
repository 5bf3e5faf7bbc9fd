"""Pause and stall per partition around a scale event, from the output topic's record
timestamps (CreateTime: when the worker sent the output) and the workers' logged
assignments. Pure: no I/O.

Two views of a gap: all of it (`longest_gap`), and only the part during which some input
of the partition waited (`waited_gaps`, as `make autoscale` measures, with its own
functions): at a few records a second per partition the first also counts the time the
partition simply had nothing to do. The second counts from the group's first change in
the event's window: before it the fleet is as it was, under the load (lag) that the
scale-out answers; that part is reported on its own (`waited_before`)."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tests.autoscale.checks.measure import gaps_with_work, pending_intervals, with_own_output
from tests.autoscale.checks.reader import Out
from tests.autoscale.load.workload import Rec

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


# input partition → its records (request id, seq, sent s), and its outputs (at s, request
# id, seq)
Inputs = Mapping[int, Sequence[tuple[str, int, float]]]
Outputs = Mapping[int, Sequence[tuple[float, str, int]]]


def waited_gaps(
    inputs: Sequence[tuple[str, int, float]], outputs: Sequence[tuple[float, str, int]]
) -> list[tuple[float, float]]:
    """One partition's gaps between outputs, each cut to the part during which one of its
    records waited: sent, and no output yet of its request at or past its seq, nor of a
    record sent to the partition after it.

    Only records with an output of their own count. When one yields none (half of a
    multi-byte character, trailing whitespace held back), the output topic cannot show
    when it was done: the next record's answer bounds it, and at a dozen records a
    second per partition that bound was the input's own silence, up to a third of a
    second. Its neighbours, nearly every record, show any pause of the partition."""
    outs = [Out(at, rid, str(seq), "", b"", 0, 0) for at, rid, seq in outputs]
    recs = with_own_output([Rec(rid, seq, b"", "", sent) for rid, seq, sent in inputs], outs)
    one_partition = {r.rid: 0 for r in recs}
    return gaps_with_work([o.at for o in outs], pending_intervals(recs, outs, one_partition))


def caught_up(inputs: Inputs, outputs: Outputs, prefix: str, at: float) -> float:
    """From `at` until every record whose request id starts with `prefix` (a burst) was
    answered, over all partitions; inf if one never was."""
    last = at
    for p, recs in inputs.items():
        mine = [r for r in recs if r[0].startswith(prefix)]
        if mine:
            rows = [Rec(rid, seq, b"", "", sent) for rid, seq, sent in recs]
            outs = [
                Out(o_at, rid, str(seq), "", b"", 0, 0) for o_at, rid, seq in outputs.get(p, ())
            ]
            waits = pending_intervals(rows, outs, {r.rid: 0 for r in rows})
            last = max(
                last, max(w[1] for r, w in zip(recs, waits, strict=True) if r[0].startswith(prefix))
            )
    return last - at


def longest_waited(gaps: Sequence[tuple[float, float]], start: float, end: float) -> float:
    """The longest of `gaps` that overlaps [start, end] (whole, as `longest_gap` counts)."""
    return max((b - a for a, b in gaps if b >= start and a <= end), default=0.0)


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
    # partition → its longest gap while its input waited (when inputs known), from the
    # group's first change in the window on; and in the window before that change (the
    # load on the fleet as it was: a scale-out follows lag, it does not cause it)
    waited: dict[int, float] = field(default_factory=dict)
    waited_before: dict[int, float] = field(default_factory=dict)
    baseline_waited: float = 0.0  # the same, any partition, in the steady time before
    changed_after: float = 0.0  # from the event's start to the group's first change

    def summary(self) -> dict[str, float | int]:
        un = sorted(self.unmoved.values())
        mv = sorted(self.moved.values())
        un_r = sorted(self.across[p] for p in self.unmoved if p in self.across)
        mv_r = sorted(self.across[p] for p in self.moved if p in self.across)
        un_s = sorted(self.resume[p] for p in self.unmoved if p in self.resume)
        mv_s = sorted(self.resume[p] for p in self.moved if p in self.resume)
        bs = sorted(self.beside.values())
        un_w = sorted(self.waited[p] for p in self.unmoved if p in self.waited)
        un_b = sorted(self.waited_before[p] for p in self.unmoved if p in self.waited_before)
        mv_w = sorted(self.waited[p] for p in self.moved if p in self.waited)
        return {
            "unmoved_waited_max": un_w[-1] if un_w else 0.0,
            "unmoved_waited_p50": statistics.median(un_w) if un_w else 0.0,
            "moved_waited_p50": statistics.median(mv_w) if mv_w else 0.0,
            "moved_waited_max": mv_w[-1] if mv_w else 0.0,
            "baseline_waited": self.baseline_waited,
            "unmoved_waited_before_max": un_b[-1] if un_b else 0.0,
            "changed_after_s": self.changed_after,
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
    inputs: Inputs | None = None,
    outputs: Outputs | None = None,
) -> EventResult:
    """A partition moved if its owner at the end of the window is not its owner at `at`
    (an owner that is going away counts as moving it). With `inputs` and `outputs`, also
    each partition's longest gap while its input waited (`waited`), from the group's
    first change in the window (an assignment or a revocation) on."""
    res = EventResult(name, at)
    end = at + window_s
    changes = [t for entries in timeline.values() for t, _ in entries if at <= t <= end]
    changes += [t for ts in (revoked or {}).values() for t in ts if at <= t <= end]
    changed = min(changes, default=at)
    res.changed_after = changed - at
    for p in range(partitions):
        s = stamps.get(p, [])
        if inputs is not None and outputs is not None:
            gaps = waited_gaps(inputs.get(p, ()), outputs.get(p, ()))
            res.waited[p] = longest_waited(gaps, changed, end)
            res.waited_before[p] = longest_waited(gaps, at, changed) if changed > at else 0.0
            before_s = longest_waited(gaps, at - baseline_s, at - 0.001)
            res.baseline_waited = max(res.baseline_waited, before_s)
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
