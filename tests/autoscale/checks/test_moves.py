"""The per-event analysis (moves.py) on made-up timelines: an eager rebalance that stops
every partition, an incremental one that moves only some, idle partitions, a worker
replaced inside the window, and the gap rules."""

from __future__ import annotations

import datetime
import math
from pathlib import Path

import pytest

from tests.autoscale.checks.moves import (
    Change,
    Holding,
    event_moves,
    holdings,
    longest_gap,
    p50_max,
    stall,
)
from tests.autoscale.checks.verify import changes_of, event_windows
from tests.autoscale.config import EVENT_WINDOW_S, PARTITIONS
from tests.autoscale.load.fleet import ScaleEvent, Worker

TICK = 0.1
ANSWER = 0.02


def steady(
    start: float, end: float, gaps: tuple[tuple[float, float], ...] = ()
) -> tuple[list[float], list[tuple[float, float]]]:
    """A partition with a record sent every TICK from `start` to `end`, each answered
    ANSWER s later, except while a gap (a, b) lasts: those wait until b. Steady, its
    pause is ANSWER (the time a record waits)."""
    arrivals, waiting = [], []
    n = round((end - start) / TICK)
    for i in range(n):
        sent = start + i * TICK
        served = sent + ANSWER
        for a, b in gaps:
            if a <= served < b:
                served = b
        arrivals.append(served)
        waiting.append((sent, served))
    return sorted(set(arrivals)), waiting


def changes(*rows: tuple[float, str, set[int], bool]) -> list[Change]:
    return [Change(at, w, frozenset(ps), gained) for at, w, ps, gained in rows]


def test_holdings_follow_assignments_revocations_and_exits() -> None:
    held = holdings(
        changes(
            (0.0, "w0", {0, 1}, True),
            (5.0, "w0", {0, 1}, True),  # assigned again while held: nothing new
            (10.0, "w0", {0, 1}, False),
            (10.5, "w0", {0}, True),
            (10.5, "w1", {1}, True),
            (20.0, "w1", {1}, False),  # its exit
        )
    )
    assert held[0] == [Holding("w0", 0.0, 10.0), Holding("w0", 10.5, math.inf)]
    assert held[1] == [Holding("w0", 0.0, 10.0), Holding("w1", 10.5, 20.0)]


def test_an_eager_rebalance_pauses_the_partitions_that_did_not_move() -> None:
    # 1 → 2 at t=10: the join revokes all four at 12; w0 gets 0, 1 back and w1 gets 2, 3
    # at 13; nothing flows from 12 until 13.2 (0, 1) and 13.5 (2, 3).
    held = holdings(
        changes(
            (0.0, "w0", {0, 1, 2, 3}, True),
            (12.0, "w0", {0, 1, 2, 3}, False),
            (13.0, "w0", {0, 1}, True),
            (13.0, "w1", {2, 3}, True),
        )
    )
    arrivals, waiting = {}, {}
    for p in range(4):
        resume = 13.2 if p < 2 else 13.5
        arrivals[p], waiting[p] = steady(0.0, 30.0, ((12.0, resume),))
    ev = event_moves(10.0, 30.0, held, arrivals, waiting)
    assert ev.moved == [2, 3]
    assert [(m.old, m.new, m.revoked_at, m.assigned_at) for m in ev.moves] == [
        ("w0", "w1", 12.0, 13.0),
        ("w0", "w1", 12.0, 13.0),
    ]
    assert ev.stalls == pytest.approx([1.5, 1.5])  # revoked at 12, first output at 13.5
    assert sorted(ev.pause_s) == [0, 1]
    # Input waited from 12.0 (the last record before was answered at 11.92) until 13.2.
    assert ev.pause_s[0] == pytest.approx(1.2)
    assert p50_max(ev.stalls) == pytest.approx((1.5, 1.5))


def test_an_incremental_rebalance_moves_some_and_the_rest_flow() -> None:
    held = holdings(
        changes(
            (0.0, "w0", {0, 1, 2, 3}, True),
            (12.0, "w0", {2, 3}, False),
            (12.4, "w1", {2, 3}, True),
        )
    )
    arrivals, waiting = {}, {}
    for p in range(4):
        gaps = ((12.0, 12.8),) if p >= 2 else ()
        arrivals[p], waiting[p] = steady(0.0, 30.0, gaps)
    ev = event_moves(10.0, 30.0, held, arrivals, waiting)
    assert ev.moved == [2, 3]
    assert ev.stalls == pytest.approx([0.8, 0.8])
    assert ev.pause_s == {0: pytest.approx(ANSWER), 1: pytest.approx(ANSWER)}


def test_a_move_with_no_input_waiting_has_no_stall_and_idle_partitions_no_pause() -> None:
    held = holdings(
        changes((0.0, "w0", {0, 1}, True), (12.0, "w0", {1}, False), (12.5, "w1", {1}, True))
    )
    # Input only until 11 s, then nothing: no stall, no pause.
    arrivals, waiting = {}, {}
    for p in (0, 1):
        arrivals[p], waiting[p] = steady(0.0, 11.0)
    ev = event_moves(10.0, 30.0, held, arrivals, waiting)
    assert ev.moved == [1] and ev.stalls == [] and ev.moves[0].stall_s is None
    # (From the group's first change at 12 nothing waited; before it, the steady wait.)
    assert ev.changed_at == 12.0
    assert ev.pause_s == {0: 0.0} and ev.before_s == {0: pytest.approx(ANSWER)}


def test_an_unmoved_pause_counts_from_the_groups_first_change() -> None:
    # A scale-out decided at 10 whose joiner takes partition 1 at 15: partition 0 waited
    # 11-11.6 under the lag before anything moved (the lag the event answers), and
    # 14.8-15.3 across the group's change (counted whole).
    held = holdings(
        changes((0.0, "w0", {0, 1}, True), (15.0, "w0", {1}, False), (15.2, "w1", {1}, True))
    )
    arrivals, waiting = {}, {}
    arrivals[0], waiting[0] = steady(0.0, 30.0, ((11.0, 11.6), (14.8, 15.3)))
    arrivals[1], waiting[1] = steady(0.0, 30.0)
    ev = event_moves(10.0, 30.0, held, arrivals, waiting)
    assert ev.changed_at == 15.0 and ev.moved == [1]
    assert ev.pause_s[0] == pytest.approx(0.5)
    assert ev.before_s[0] == pytest.approx(0.6)


def test_only_moves_in_the_window_count_and_a_replaced_worker_moves_its_partitions_again() -> None:
    held = holdings(
        changes(
            (0.0, "w0", {0, 1}, True),
            (5.0, "w0", {1}, False),  # before the window
            (5.5, "w1", {1}, True),
            (12.0, "w1", {1}, False),  # w1 replaced by w2 inside the window
            (12.3, "w2", {1}, True),
            (15.0, "w2", {1}, False),
            (15.2, "w3", {1}, True),
        )
    )
    arrivals, waiting = {}, {}
    arrivals[0], waiting[0] = steady(0.0, 30.0)
    arrivals[1], waiting[1] = steady(0.0, 30.0, ((12.0, 12.6), (15.0, 16.0)))
    ev = event_moves(10.0, 30.0, held, arrivals, waiting)
    assert [(m.old, m.new) for m in ev.moves] == [("w1", "w2"), ("w2", "w3")]
    assert ev.stalls == pytest.approx([0.6, 1.0])
    assert p50_max(ev.stalls) == pytest.approx((0.8, 1.0))
    assert list(ev.pause_s) == [0]


def test_a_gap_counts_only_while_input_waited() -> None:
    # Outputs at 1, 5 and 9: nothing waited from 1 to 4 (the record of 5 was sent at 4);
    # a record sent at 5.5 waited until 9.
    arrivals = [1.0, 5.0, 9.0]
    waiting = [(0.9, 1.0), (4.0, 5.0), (5.5, 9.0)]
    assert longest_gap(arrivals, waiting, 0.0, 10.0) == pytest.approx(3.5)
    assert longest_gap(arrivals, waiting, 0.0, 4.0) == pytest.approx(1.0)  # starts at 1
    assert longest_gap(arrivals, [], 0.0, 10.0) == 0.0


def test_a_stall_runs_from_the_revocation_or_the_first_input_after_it() -> None:
    arrivals = [1.0, 7.0]
    assert stall(2.0, 3.0, arrivals, [(0.5, 1.0), (1.5, 7.0)]) == pytest.approx(5.0)
    assert stall(2.0, 3.0, arrivals, [(0.5, 1.0), (4.0, 7.0)]) == pytest.approx(3.0)
    assert stall(2.0, 3.0, arrivals, [(0.5, 1.0)]) is None
    assert stall(2.0, 8.0, arrivals, [(4.0, 7.0)]) is None  # nothing out on the new owner
    assert all(math.isnan(x) for x in p50_max([]))


def test_the_workers_logs_give_the_changes_and_events_their_windows(tmp_path: Path) -> None:
    log = tmp_path / "w.log"
    log.write_text(
        "2026-12-06 10:00:01,500 INFO derender.worker: partitions assigned: t/0, t/1, t/2\n"
        "2026-12-06 10:00:05,000 INFO derender.worker: partitions revoked: t/2\n"
        "2026-12-06 10:00:05,250 INFO derender.worker: partitions assigned: none\n"
    )
    w = Worker(0, 0, log, None, 0.0, exit_at=2e9)  # type: ignore[arg-type]
    t0 = datetime.datetime(2026, 12, 6, 10, 0, 0).timestamp()
    got = [(round(c.at - t0, 3), c.worker, sorted(c.partitions), c.gained) for c in changes_of([w])]
    assert got[:3] == [
        (1.5, "w-0#0", [0, 1, 2], True),
        (5.0, "w-0#0", [2], False),
        (5.25, "w-0#0", [], True),
    ]
    assert got[3][1:] == ("w-0#0", list(range(PARTITIONS)), False)  # its exit
    events = [ScaleEvent(at, 1, 2, 0.0, 2, "") for at in (100.0, 110.0, 200.0)]
    # The second event's window is stretched by its replacements, cut by the next event.
    assert event_windows(events, [(112.0, "a", "b"), (150.0, "b", "c")]) == [
        (100.0, 110.0),
        (110.0, 150.0 + EVENT_WINDOW_S),
        (200.0, 200.0 + EVENT_WINDOW_S),
    ]
