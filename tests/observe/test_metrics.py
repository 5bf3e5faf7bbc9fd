"""The worker's batch histogram must expose exactly what prometheus-client's own would."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from worker.observe.metrics import _BYTES, _SECONDS, BatchHistogram, Metrics


def _exposition(registry: CollectorRegistry) -> list[str]:
    # `_created` is the construction time: equal in kind, not in value.
    return [
        line
        for line in generate_latest(registry).decode().splitlines()
        if not line.startswith("x_created ")
    ]


values = st.lists(st.floats(min_value=0, max_value=20, allow_nan=False), max_size=60)


# No deadline: hypothesis's default (200 ms an example) fails a loaded machine's stall.
@settings(deadline=None)
@given(st.lists(values, max_size=5), st.sampled_from([_SECONDS, _BYTES]))
def test_batch_histogram_matches_prometheus_histogram(
    batches: list[list[float]], buckets: tuple[float, ...]
) -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    reference = Histogram("x", "doc", buckets=buckets, registry=theirs)
    batch = BatchHistogram("x", "doc", buckets, ours)
    for i, b in enumerate(batches):
        for v in b:
            reference.observe(v)
        if i % 2:
            batch.observe_many(b)
        else:
            for v in b:
                batch.observe(v)
    assert _exposition(ours) == _exposition(theirs)


def test_the_worker_histograms_are_exported_from_the_start() -> None:
    text = Metrics().exposition().decode()
    for name in ("derender_record_latency_seconds", "derender_state_bytes"):
        assert f"# TYPE {name} histogram" in text
        assert f'{name}_bucket{{le="+Inf"}} 0.0' in text


def test_buckets_must_increase() -> None:
    with pytest.raises(ValueError, match="increase strictly"):
        BatchHistogram("x", "doc", (1, 1, 2), CollectorRegistry())


def test_group_lag_is_exported_as_kedas_per_partition_values() -> None:
    """KEDA's values as they are: a negative one (committed past the high watermark) is
    kept, and the sum is KEDA's total before its cap."""
    m = Metrics()
    m.set_group_lag({0: 6, 1: 0, 2: 1, 3: 1, 4: -2})
    text = m.exposition().decode()
    assert 'derender_group_lag{partition="4"} -2.0' in text
    assert "derender_group_lag_sum 6.0" in text
    assert "high watermark" in text
