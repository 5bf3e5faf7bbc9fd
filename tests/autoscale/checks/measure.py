"""Measuring a run: per scale event, the pause of all outputs and the stall of one input
partition while input waited."""

from __future__ import annotations

import bisect
import contextlib
import itertools
import math
from collections import defaultdict
from dataclasses import dataclass

from tests.autoscale.checks.reader import Out
from tests.autoscale.config import EVENT_WINDOW_S
from tests.autoscale.load.fleet import ScaleEvent
from tests.autoscale.load.workload import Rec


def merge(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def with_own_output(recs: list[Rec], outs: list[Out]) -> list[Rec]:
    """The records that have an output of their own: only those can show how long they
    waited. One that yields none (half a character, whitespace held back) is done by
    the time a later record of its partition is answered, and bounding it so measured
    the partition's silence until that record."""
    own = {(o.rid, o.seq) for o in outs}
    return [r for r in recs if (r.rid, str(r.seq)) in own]


def pending_intervals(
    recs: list[Rec], outs: list[Out], partition_of: dict[str, int] | None = None
) -> list[tuple[float, float]]:
    """When each input record was waiting: from its send to the first output of its
    request with a seq at or past its own (a record that yields no output of its own, e.g.
    half of a multi-byte character, is served by the next one that does). With
    `partition_of`, also to the first output of a record sent later to its partition
    (`cut_in_partition_order`; send times in order, ties in `recs`' order)."""
    waits = _request_waits(recs, outs)
    if partition_of is None:
        return waits
    order = sorted(range(len(recs)), key=lambda i: recs[i].sent)
    cut = cut_in_partition_order(
        [waits[i] for i in order], [partition_of.get(recs[i].rid, -1) for i in order]
    )
    out = list(waits)
    for i, wait in zip(order, cut, strict=True):
        out[i] = wait
    return out


def cut_in_partition_order(
    waits: list[tuple[float, float]], partitions: list[int]
) -> list[tuple[float, float]]:
    """Each record's wait (records in publish order, each in `partitions[i]`) cut at the
    first output served to a later record of its partition: a partition is processed in
    order, so that output shows the record was done. Without the cut, a record that yields
    no output (a reasoning marker, half a character) waits for its request's next chunk,
    which may come seconds later on an idle request: not a pause of the worker's."""
    out = list(waits)
    earliest: dict[int, float] = {}
    for i in range(len(waits) - 1, -1, -1):
        sent, served = waits[i]
        p = partitions[i]
        served = min(served, earliest.get(p, math.inf))
        earliest[p] = served
        out[i] = (sent, max(served, sent))
    return out


def _request_waits(recs: list[Rec], outs: list[Out]) -> list[tuple[float, float]]:
    arrivals: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for o in outs:
        with contextlib.suppress(ValueError):
            arrivals[o.rid].append((int(o.seq), o.at))
    # Earliest arrival of an output with seq ≥ s: a suffix minimum over seqs.
    firsts: dict[str, tuple[list[int], list[float]]] = {}
    for rid, xs in arrivals.items():
        best: dict[int, float] = {}
        for s, at in xs:
            best[s] = min(at, best.get(s, math.inf))
        seqs = sorted(best)
        suffix = [best[s] for s in seqs]
        for i in range(len(suffix) - 2, -1, -1):
            suffix[i] = min(suffix[i], suffix[i + 1])
        firsts[rid] = (seqs, suffix)
    out = []
    for r in recs:
        seqs, suffix = firsts.get(r.rid, ([], []))
        i = bisect.bisect_left(seqs, r.seq)
        served = suffix[i] if i < len(suffix) else math.inf
        out.append((r.sent, max(served, r.sent)))
    return out


def gaps_with_work(
    arrivals: list[float], pending: list[tuple[float, float]]
) -> list[tuple[float, float]]:
    """Each gap between consecutive output arrivals, cut to the part during which some
    input was waiting: (start, end)."""
    busy = merge(pending)
    starts = [a for a, _ in busy]
    times = sorted(set(arrivals))
    out = []
    for a, b in itertools.pairwise(times):
        # Waiting input during (a, b): the busy intervals overlapping it.
        i = bisect.bisect_right(starts, b) - 1
        lo = None
        while i >= 0 and busy[i][1] > a:
            lo = max(a, busy[i][0])
            if busy[i][0] <= a:
                break
            i -= 1
        if lo is not None and lo < b:
            out.append((lo, b))
    return out


@dataclass
class EventPause:
    event: ScaleEvent
    pause_s: float  # the longest gap in all outputs while input waited
    partition_stall_s: float  # the longest gap of one input partition's outputs while it waited
    stall_partition: int | None


def longest_in(gaps: list[tuple[float, float]], lo: float, hi: float) -> float:
    """The longest gap that starts in [lo, hi)."""
    best = 0.0
    for a, b in gaps:
        if lo <= a < hi:
            best = max(best, b - a)
    return best


def pauses(
    events: list[ScaleEvent], recs: list[Rec], outs: list[Out], partition_of: dict[str, int]
) -> list[EventPause]:
    pend = pending_intervals(recs, outs, partition_of)
    all_gaps = gaps_with_work([o.at for o in outs], pend)
    per_part: dict[int, tuple[list[float], list[tuple[float, float]]]] = {}
    by_part_outs: dict[int, list[float]] = defaultdict(list)
    by_part_pend: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for o in outs:
        by_part_outs[partition_of.get(o.rid, -1)].append(o.at)
    for r, iv in zip(recs, pend, strict=True):
        by_part_pend[partition_of.get(r.rid, -1)].append(iv)
    for p in by_part_pend:
        per_part[p] = (by_part_outs[p], by_part_pend[p])
    part_gaps = {p: gaps_with_work(a, iv) for p, (a, iv) in per_part.items()}
    result = []
    for i, e in enumerate(events):
        hi = e.at + EVENT_WINDOW_S
        if i + 1 < len(events):
            hi = min(hi, events[i + 1].at)
        stall, where = 0.0, None
        for p, g in part_gaps.items():
            s = longest_in(g, e.at, hi)
            if s > stall:
                stall, where = s, p
        result.append(EventPause(e, longest_in(all_gaps, e.at, hi), stall, where))
    return result
