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
