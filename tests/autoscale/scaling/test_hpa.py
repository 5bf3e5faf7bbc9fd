"""The HPA rules of `make autoscale` (tests/autoscale/scaling/hpa.py): pure, no servers, no
clock."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.autoscale.scaling.hpa import Hpa, HpaSettings, Policy, keda_active, replicas_for_metric
from tests.autoscale.scaling.scaledobject import compress_threshold, scaled_object, trigger_metadata

ROOT = Path(__file__).resolve().parents[3]
SCALED_OBJECT = ROOT / "deploy" / "k8s" / "keda-scaledobject.yaml"


def settings(**kw: object) -> HpaSettings:
    base: dict[str, object] = {"target": 100.0, "min_replicas": 1, "max_replicas": 12}
    base.update(kw)
    return HpaSettings(**base)  # type: ignore[arg-type]


# -- the metric → replicas rule ------------------------------------------------------------


def test_average_value_target_is_ceil_of_value_over_target() -> None:
    assert replicas_for_metric(1000, 100, 1, 0.1) == 10
    assert replicas_for_metric(1001, 100, 1, 0.1) == 11
    assert replicas_for_metric(0, 100, 4, 0.1) == 0
    assert replicas_for_metric(50, 100, 2, 0.1) == 1


def test_within_tolerance_keeps_current() -> None:
    # ratio = value / (target × current): 0.9 … 1.1 is no change.
    assert replicas_for_metric(439, 100, 4, 0.1) == 4  # ratio 1.0975
    assert replicas_for_metric(361, 100, 4, 0.1) == 4  # ratio 0.9025
    # (ratio exactly 1.1 is outside in float64, as in Go: 1 - 1.1 = -0.10000000000000009)
    assert replicas_for_metric(440, 100, 4, 0.1) == 5
    assert replicas_for_metric(441, 100, 4, 0.1) == 5  # ratio 1.1025
    assert replicas_for_metric(359, 100, 4, 0.1) == 4  # ceil(3.59) = 4 anyway
    assert replicas_for_metric(299, 100, 4, 0.1) == 3


# -- scale-up policies -----------------------------------------------------------------------


def test_scale_up_is_max_of_4_pods_and_100_percent_per_period() -> None:
    hpa = Hpa(settings())
    # From 1: max(1 + 4, 1 × 2) = 5.
    assert hpa.sync(0.0, 1200, 1).desired == 5
    # Within the same 15 s period the period started at 1: no further room.
    d = hpa.sync(5.0, 1200, 5)
    assert d.desired == 5 and d.reason == "scale-up limit"
    # A new period, started at 5: max(5 + 4, 10) = 10 ≥ 12? no: 10.
    assert hpa.sync(16.0, 1200, 5).desired == 10
    assert hpa.sync(32.0, 1200, 10).desired == 12


def test_scale_up_from_a_large_fleet_doubles() -> None:
    hpa = Hpa(settings(max_replicas=100))
    assert hpa.sync(0.0, 5000, 10).desired == 20  # max(10 + 4, 20)


def test_max_replicas_caps_the_scale_up() -> None:
    hpa = Hpa(settings(max_replicas=3))
    d = hpa.sync(0.0, 5000, 1)
    assert d.desired == 3 and d.reason == "max replicas"


def test_no_scale_up_stabilization_by_default() -> None:
    hpa = Hpa(settings())
    assert hpa.sync(0.0, 0, 1).desired == 1
    assert hpa.sync(15.0, 300, 1).desired == 3


# -- scale-down stabilization and policy -----------------------------------------------------


def test_scale_down_waits_for_the_stabilization_window() -> None:
    hpa = Hpa(settings())
    assert hpa.sync(0.0, 400, 1).desired == 4
    # The lag is gone, but the 4 recommended at t=0 holds for 300 s.
    for t in (15.0, 100.0, 299.0):
        d = hpa.sync(t, 0, 4)
        assert d.desired == 4 and "stabilization window" in d.reason, t
    # Past the window every recommendation is 1 (min): 100 % per 15 s allows all of it.
    assert hpa.sync(301.0, 0, 4).desired == 1


def test_the_highest_recommendation_of_the_window_wins() -> None:
    hpa = Hpa(settings())
    hpa.sync(0.0, 600, 6)  # within tolerance: recommends 6
    hpa.sync(100.0, 300, 6)  # recommends 3
    hpa.sync(200.0, 200, 6)  # recommends 2
    assert hpa.sync(250.0, 100, 6).desired == 6  # 6 from t=0 still in the window
    assert hpa.sync(301.0, 100, 6).desired == 3  # t=100's 3 is now the highest
    assert hpa.sync(401.0, 100, 3).desired == 2
    assert hpa.sync(501.0, 100, 2).desired == 1


def test_scale_down_policy_limits_the_step() -> None:
    # 50 % per 15 s: from 8 to 4, then the period's start (8) still limits to 4 …
    s = settings(down_stabilization_s=0.0, down_policies=(Policy("Percent", 50, 15.0),))
    hpa = Hpa(s)
    assert hpa.sync(0.0, 0, 8).desired == 4
    assert hpa.sync(5.0, 0, 4).desired == 4
    # … and a new period from 4: 2.
    assert hpa.sync(16.0, 0, 4).desired == 2


def test_min_replicas_is_at_least_one_for_the_hpa() -> None:
    hpa = Hpa(settings(min_replicas=0, down_stabilization_s=0.0))
    assert hpa.sync(0.0, 0, 3).desired == 1
    assert settings(min_replicas=0).activation_only
    assert not settings(min_replicas=1).activation_only


def test_a_target_at_zero_is_left_to_keda() -> None:
    assert Hpa(settings(min_replicas=0)).sync(0.0, 5000, 0).desired == 0


def test_above_max_comes_straight_down() -> None:
    assert Hpa(settings(max_replicas=4)).sync(0.0, 5000, 9).desired == 4


def test_activation() -> None:
    s = settings(activation=10.0)
    assert not keda_active(10, s)
    assert keda_active(11, s)


# -- settings --------------------------------------------------------------------------------


def test_compression_divides_every_period_and_window() -> None:
    s = settings(polling_interval_s=10.0, cooldown_s=120.0).compressed(10)
    assert s.compression == 10
    assert s.polling_interval_s == pytest.approx(1.0)
    assert s.cooldown_s == pytest.approx(12.0)
    assert s.sync_period_s == pytest.approx(1.5)
    assert s.down_stabilization_s == pytest.approx(30.0)
    assert [p.period_s for p in (*s.up_policies, *s.down_policies)] == [pytest.approx(1.5)] * 3
    assert s.target == 100 and s.tolerance == 0.1 and s.max_replicas == 12


def test_compressed_run_behaves_as_the_real_one_scaled() -> None:
    real = Hpa(settings())
    fast = Hpa(settings().compressed(10))
    metrics = [1200, 1200, 1200, 0, 0, 0, 0, 0]
    times = [0.0, 16.0, 32.0, 48.0, 200.0, 340.0, 360.0, 400.0]
    cur_r = cur_f = 1
    for t, m in zip(times, metrics, strict=True):
        cur_r = real.sync(t, m, cur_r).desired
        cur_f = fast.sync(t / 10, m, cur_f).desired
        assert cur_r == cur_f, t


def test_from_the_repositorys_scaled_object() -> None:
    doc = yaml.safe_load_all(SCALED_OBJECT.read_text())
    so = next(d for d in doc if d and d.get("kind") == "ScaledObject")
    s = HpaSettings.from_scaled_object(so)
    meta = so["spec"]["triggers"][0]["metadata"]
    assert s.target == float(meta["lagThreshold"])
    assert s.activation == float(meta["activationLagThreshold"])
    assert s.min_replicas == so["spec"]["minReplicaCount"]
    assert s.max_replicas == so["spec"]["maxReplicaCount"]
    assert s.polling_interval_s == so["spec"]["pollingInterval"]
    assert HpaSettings.from_scaled_object(so, max_replicas=4).max_replicas == 4


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        HpaSettings(target=0)
    with pytest.raises(ValueError):
        HpaSettings(target=1, min_replicas=5, max_replicas=2)
    with pytest.raises(ValueError):
        settings().compressed(0)


def test_lag_thresholds_are_compressed_as_time() -> None:
    # A lag threshold is records per replica, a rate × a time: ×10 faster, ÷ 10.
    assert compress_threshold(50000, 10) == 5000
    assert compress_threshold(10, 10) == 1
    assert compress_threshold(4, 10) == 1  # a positive threshold stays positive
    assert compress_threshold(0, 10) == 0
    so = scaled_object()
    meta = so["spec"]["triggers"][0]["metadata"]
    got = trigger_metadata(so, "127.0.0.1:9092", "g", "t", 10)
    assert got["lagThreshold"] == str(compress_threshold(float(meta["lagThreshold"]), 10))
    assert got["activationLagThreshold"] == str(
        compress_threshold(float(meta["activationLagThreshold"]), 10)
    )
    assert (got["bootstrapServers"], got["consumerGroup"], got["topic"]) == (
        "127.0.0.1:9092",
        "g",
        "t",
    )
