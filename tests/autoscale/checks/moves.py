"""Per scale event: which input partitions moved to another worker, how long those that
did not move paused, and how long those that moved stalled. Pure: timelines in, numbers
out (tests/autoscale/test_moves.py runs it on made-up timelines).

- A partition's *holdings*: who held it, from its assignment to its revocation (or the
  worker's exit), from the workers' logs. A worker that lost a partition and got it back
  (an eager rebalance revokes every partition of every member) did not move it.
- *Moved*: in the event's window, a holding of the partition ended and the next one is
  another worker's. Its *stall* (per move): from the revocation to the first output of
  the partition at or after the new owner's assignment, counted from when input waited
  (a record sent after the revocation starts it later); none when nothing waited.
- *Unmoved*: every other partition. Its *pause*: the longest gap between its outputs
  while its input waited, from the group's first change in the window (an assignment,
  a revocation or an exit) on: before it the fleet is as it was, working through the
  lag the event answers; that part is kept apart (`before_s`).
"""

from __future__ import annotations

import bisect
import itertools
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from tests.autoscale.checks.measure import merge


@dataclass(frozen=True)
class Change:
    """One log line of one worker: `partitions` assigned (`gained`) or revoked (or all
    of them at its exit)."""

    at: float
    worker: str
    partitions: frozenset[int]
    gained: bool


@dataclass(frozen=True)
class Holding:
    worker: str
    start: float
    end: float  # math.inf while still held


@dataclass(frozen=True)
class Move:
    partition: int
    old: str
    new: str
    revoked_at: float
    assigned_at: float
    stall_s: float | None  # None: no input waited, nothing to stall


@dataclass
class EventMoves:
    lo: float
    hi: float
    moves: list[Move] = field(default_factory=list)
    pause_s: dict[int, float] = field(default_factory=dict)  # unmoved partition → pause
    changed_at: float = 0.0  # the group's first change in the window (`lo` if none)
    before_s: dict[int, float] = field(default_factory=dict)  # its pause before that

    @property
    def moved(self) -> list[int]:
        return sorted({m.partition for m in self.moves})

    @property
    def stalls(self) -> list[float]:
        return [m.stall_s for m in self.moves if m.stall_s is not None]


def holdings(changes: Iterable[Change]) -> dict[int, list[Holding]]:
    """Each partition's holdings in time order. A worker holds a partition from the
    assignment that names it until a revocation that names it (a repeated assignment
    while held changes nothing)."""
    open_: dict[tuple[int, str], float] = {}
    out: dict[int, list[Holding]] = defaultdict(list)
    for c in sorted(changes, key=lambda c: (c.at, c.gained)):  # (revocations first)
        for p in c.partitions:
            key = (p, c.worker)
            if c.gained:
                open_.setdefault(key, c.at)
            elif key in open_:
                out[p].append(Holding(c.worker, open_.pop(key), c.at))
    for (p, w), start in open_.items():
        out[p].append(Holding(w, start, math.inf))
    for hs in out.values():
        hs.sort(key=lambda h: (h.start, h.end))
    return dict(out)


def longest_gap(
    arrivals: Sequence[float], waiting: Sequence[tuple[float, float]], lo: float, hi: float
) -> float:
    """The longest gap between consecutive `arrivals` (sorted) that overlaps [lo, hi)
    (whole), counted from when input began waiting without a break until its end."""
    busy = merge(list(waiting))
    ends = [e for _, e in busy]
    best = 0.0
    for a, b in itertools.pairwise(arrivals):
        if not (a < hi and b > lo):
            continue
        k = bisect.bisect_left(ends, b)  # the one busy interval that may hold b
        if k < len(busy) and busy[k][0] < b:
            best = max(best, b - max(a, busy[k][0]))
    return best


def stall(
    revoked_at: float,
    assigned_at: float,
    arrivals: Sequence[float],
    waiting: Sequence[tuple[float, float]],
) -> float | None:
    """From the revocation (or the first input waiting after it) to the first output at
    or after the new owner's assignment; None when no input waited or none came out."""
    i = bisect.bisect_left(arrivals, assigned_at)
    if i == len(arrivals):
        return None
    served = arrivals[i]
    since = [max(s, revoked_at) for s, e in waiting if e > revoked_at and s < served]
    if not since:
        return None
    return served - min(since)


def event_moves(
    lo: float,
    hi: float,
    held: dict[int, list[Holding]],
    arrivals: dict[int, list[float]],
    waiting: dict[int, list[tuple[float, float]]],
) -> EventMoves:
    """The moves of the partitions whose holding ended in [lo, hi), their stalls, and
    the other partitions' pauses."""
    ev = EventMoves(lo, hi)
    changes = [t for hs in held.values() for h in hs for t in (h.start, h.end) if lo <= t < hi]
    ev.changed_at = first = min(changes, default=lo)
    for p in sorted(set(held) | set(arrivals)):
        hs = held.get(p, [])
        out, wait = arrivals.get(p, []), waiting.get(p, [])
        for prev, nxt in itertools.pairwise(hs):
            if not lo <= prev.end < hi or nxt.worker == prev.worker:
                continue
            at = max(nxt.start, prev.end)
            ev.moves.append(
                Move(p, prev.worker, nxt.worker, prev.end, at, stall(prev.end, at, out, wait))
            )
        if p not in ev.moved:
            ev.pause_s[p] = longest_gap(out, wait, first, hi)
            ev.before_s[p] = longest_gap(out, wait, lo, first) if first > lo else 0.0
    return ev


def p50_max(xs: list[float]) -> tuple[float, float]:
    """(median, max), NaN for none."""
    if not xs:
        return math.nan, math.nan
    return statistics.median(xs), max(xs)
