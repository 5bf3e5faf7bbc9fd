"""The group lag's rule and its gauges (worker/adapters/broker/kafka_lag.py), no server: the
lag as KEDA's Kafka scaler computes it from end and committed offsets, the runner's call,
the offset reset names, and the gauges' series. The lag on a real broker is
test_kafka_lag.py."""

from __future__ import annotations

import pytest

from worker.adapters.broker.kafka_lag import GroupLag, lag_from
from worker.observe.metrics import Metrics

# -- the rule and the gauges, no server ----------------------------------------------------


def test_lag_rule() -> None:
    ends = {0: 10, 1: 10, 2: 10, 3: 0}
    committed = {0: 4, 1: -1, 2: 12}  # 3 is missing: never committed either
    starts = {1: 3, 3: 0}
    # Committed past the end: negative, not clamped, as KEDA sums it.
    assert lag_from(ends, committed, starts) == {0: 6, 1: 7, 2: -2, 3: 0}
    assert lag_from(ends, committed, starts, "latest") == {0: 6, 1: 1, 2: -2, 3: 1}
    # Never committed, the log start past a stale end (retention between the two
    # requests): 0, as KEDA clamps it.
    assert lag_from({0: 5}, {}, {0: 9}) == {0: 0}


def test_the_runners_call_is_accepted() -> None:
    """worker/run/runner.py passes read_committed=exactly_once: accepted, and it changes
    nothing (the end is the high watermark under both guarantees)."""
    lag = GroupLag("localhost:9092", "g", "t", read_committed=True, reset="latest")
    assert lag.reset == "latest" and not hasattr(lag, "read_committed")


def test_reset_must_be_known() -> None:
    with pytest.raises(ValueError, match="reset"):
        GroupLag("localhost:9092", "g", "t", read_committed=False, reset="none")  # type: ignore[arg-type]


def _series(metrics: Metrics, name: str) -> dict[str, float]:
    return {
        s.labels.get("partition", ""): s.value
        for family in metrics.registry.collect()
        for s in family.samples
        if s.name == name
    }


def test_group_lag_gauges() -> None:
    m = Metrics()
    assert _series(m, "derender_group_lag") == {}
    assert _series(m, "derender_group_lag_sum") == {"": 0.0}
    m.set_group_lag({0: 5, 1: 0, 2: 3})
    assert _series(m, "derender_group_lag") == {"0": 5.0, "1": 0.0, "2": 3.0}
    assert _series(m, "derender_group_lag_sum") == {"": 8.0}
    # A partition missing from the next sample loses its series.
    m.set_group_lag({0: 1, 2: 2})
    assert _series(m, "derender_group_lag") == {"0": 1.0, "2": 2.0}
    assert _series(m, "derender_group_lag_sum") == {"": 3.0}
    m.forget_group_lag("2")
    m.forget_group_lag("7")  # never had one
    assert _series(m, "derender_group_lag") == {"0": 1.0}
    m.set_group_lag({})
    assert _series(m, "derender_group_lag") == {}
    assert _series(m, "derender_group_lag_sum") == {"": 0.0}
    # The consumer's own lag gauges are separate.
    assert _series(m, "derender_consumer_lag") == {}
