"""bench/rebalance/measure.py: a partition's gap counts all of it, or only while its input
waited (a partition with nothing to do is not paused)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def measure() -> ModuleType:
    sys.path.insert(0, str(BENCH))  # (the bench imports its modules as `rebalance.*`)
    try:
        spec = importlib.util.spec_from_file_location(
            "rb_measure", BENCH / "rebalance" / "measure.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["rb_measure"] = module  # (its dataclasses look their module up)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


# One request on partition 0: records sent at 0.9, 1.9 and 4.0 (seqs 0-2), each answered
# by an output of its seq at 1.0, 2.0 and 5.0. Input waited 0.9-1.0, 1.9-2.0 and 4.0-5.0.
INPUTS = {0: [("r", 0, 0.9), ("r", 1, 1.9), ("r", 2, 4.0)]}
OUTPUTS = {0: [(1.0, "r", 0), (2.0, "r", 1), (5.0, "r", 2)]}


def test_a_gap_counts_only_while_input_waited(measure: ModuleType) -> None:
    gaps = measure.waited_gaps(INPUTS[0], OUTPUTS[0])
    assert gaps == [(1.9, 2.0), (4.0, 5.0)]
    assert measure.longest_waited(gaps, 1.5, 4.5) == pytest.approx(1.0)
    assert measure.longest_gap([o[0] for o in OUTPUTS[0]], 1.5, 4.5) == pytest.approx(3.0)


def test_a_backlog_counts_whole(measure: ModuleType) -> None:
    # All three sent at once at 0.5: the record of seq 2 waited the whole time.
    inputs = [("r", s, 0.5) for s in range(3)]
    gaps = measure.waited_gaps(inputs, OUTPUTS[0])
    assert measure.longest_waited(gaps, 0.0, 6.0) == pytest.approx(3.0)


def test_an_event_reports_both_views(measure: ModuleType) -> None:
    stamps = {0: [o[0] for o in OUTPUTS[0]]}
    timeline = {0: [(0.0, "w0")]}
    ev = measure.event_result(
        "1 → 2", 1.95, 3.0, stamps, timeline, 1, baseline_s=1.0, inputs=INPUTS, outputs=OUTPUTS
    )
    summary = ev.summary()
    assert summary["unmoved_max"] == pytest.approx(3.0)
    assert summary["unmoved_waited_max"] == pytest.approx(1.0)
    assert summary["baseline_waited"] == pytest.approx(0.1)  # (1.9-2.0 crosses 1.95)
    without = measure.event_result("1 → 2", 1.95, 3.0, stamps, timeline, 1, baseline_s=1.0)
    assert without.waited == {}


def test_the_waits_count_from_the_groups_first_change(measure: ModuleType) -> None:
    # The event starts at 1.5; the group changes first at 3.0 (partition 0 stays with w0):
    # the wait of 4.0-5.0 is the event's, that of 1.9-2.0 came before the change.
    stamps = {0: [o[0] for o in OUTPUTS[0]]}
    timeline = {0: [(0.0, "w0"), (3.0, "w0")]}
    ev = measure.event_result(
        "1 → 2", 1.5, 4.0, stamps, timeline, 1, inputs=INPUTS, outputs=OUTPUTS
    )
    summary = ev.summary()
    assert summary["changed_after_s"] == pytest.approx(1.5)
    assert summary["unmoved_waited_max"] == pytest.approx(1.0)
    assert summary["unmoved_waited_before_max"] == pytest.approx(0.1)
    # A revocation of another partition is a change too.
    early = measure.event_result(
        "1 → 2", 1.5, 4.0, stamps, timeline, 1, revoked={1: [1.95]}, inputs=INPUTS,
        outputs=OUTPUTS,
    )  # fmt: skip
    assert early.summary()["changed_after_s"] == pytest.approx(0.45)
    # Waiting 1.9-2.0 crosses the change at 1.95: counted whole on both sides.
    assert early.waited_before[0] == pytest.approx(0.1) and early.waited[0] == pytest.approx(1.0)


def test_a_record_without_output_is_done_once_a_later_record_of_its_partition_is(
    measure: ModuleType,
) -> None:
    # r's seq 0 yields no output (a reasoning marker, say); s's record, published after it
    # on the same partition, is answered at 1.12: r's was done by then (a partition is
    # processed in order), not at 3.02 when r's next chunk is answered.
    inputs = [("r", 0, 1.0), ("s", 0, 1.1), ("r", 1, 3.0)]
    outputs = [(1.12, "s", 0), (3.02, "r", 1)]
    gaps = measure.waited_gaps(inputs, outputs)
    assert measure.longest_waited(gaps, 0.0, 4.0) == pytest.approx(0.02)
    # The record's own request alone would have kept it waiting to 3.02.
    assert measure.longest_gap([o[0] for o in outputs], 0.0, 4.0) == pytest.approx(1.9)


def test_a_record_without_output_does_not_wait_for_the_next_input(measure: ModuleType) -> None:
    # q answered at 0.55; r's seq 0 (at 1.0) yields no output; s, the partition's next
    # record, comes 0.3 s later and is answered at 1.32. When r's record was done is
    # unknown: the partition's silence does not count as its wait, s's own 0.02 s does.
    inputs = [("q", 0, 0.5), ("r", 0, 1.0), ("s", 0, 1.3), ("r", 1, 3.0)]
    outputs = [(0.55, "q", 0), (1.32, "s", 0), (3.02, "r", 1)]
    gaps = measure.waited_gaps(inputs, outputs)
    assert gaps == [(1.3, 1.32), (3.0, 3.02)]
    # A partition that stops shows in the records that do have outputs.
    late = [(0.55, "q", 0), (1.9, "s", 0), (3.02, "r", 1)]
    assert measure.longest_waited(measure.waited_gaps(inputs, late), 0.0, 4.0) == pytest.approx(0.6)


def test_only_a_later_record_of_the_same_partition_cuts_a_wait() -> None:
    from tests.autoscale.checks.measure import pending_intervals
    from tests.autoscale.checks.reader import Out
    from tests.autoscale.load.workload import Rec

    recs = [Rec("r", 0, b"", "", 1.0), Rec("s", 0, b"", "", 1.1), Rec("r", 1, b"", "", 3.0)]
    outs = [Out(1.12, "s", "0", "", b"", 0, 0), Out(3.02, "r", "1", "", b"", 0, 0)]
    same = pending_intervals(recs, outs, {"r": 0, "s": 0})
    apart = pending_intervals(recs, outs, {"r": 0, "s": 1})
    assert same[0] == pytest.approx((1.0, 1.12))
    assert apart[0] == pytest.approx((1.0, 3.02)) == pending_intervals(recs, outs)[0]


def test_a_burst_is_caught_up_when_its_last_record_is_answered(measure: ModuleType) -> None:
    # A burst "b-…" of three records at 2.0 over two partitions, beside steady "s-…"
    # records: the last burst record (partition 1) is answered at 3.5; the steady record
    # answered at 6.0 does not count.
    inputs = {
        0: [("b-1", 0, 2.0), ("b-1", 1, 2.0), ("s-1", 0, 5.0)],
        1: [("b-2", 0, 2.0), ("s-2", 0, 2.5)],
    }
    outputs = {0: [(2.4, "b-1", 0), (2.6, "b-1", 1), (6.0, "s-1", 0)], 1: [(3.5, "b-2", 0)]}
    assert measure.caught_up(inputs, outputs, "b-", 2.0) == pytest.approx(1.5)
    # A burst record never answered: never caught up.
    unanswered = {0: outputs[0], 1: []}
    assert measure.caught_up(inputs, unanswered, "b-", 2.0) == float("inf")
