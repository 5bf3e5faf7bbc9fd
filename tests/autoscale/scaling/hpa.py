"""The Horizontal Pod Autoscaler's rules, as KEDA's ScaledObject drives them: pure Python,
no clock of its own (every call is given `now`), so `make autoscale` and the unit tests
(tests/autoscale/scaling/test_hpa.py) run the same code.

Written from Kubernetes v1.36 `pkg/controller/podautoscaler` and KEDA v2.21:

- **Replicas from the metric** (`replica_calculator.go`, `GetExternalPerPodMetricReplicas`):
  KEDA serves the Kafka lag as an External metric with an AverageValue target
  (= `lagThreshold`). `ratio = value / (target × current)`; when `|1 − ratio| > tolerance`
  (0.1) the proposal is `ceil(value / target)`, otherwise `current` (no change).
- **Stabilization** (`stabilizeRecommendationWithBehaviors`): every sync records its
  unstabilized proposal; the result is `current` raised to the lowest proposal of the
  scale-up window (0 s by default: the proposal itself) and lowered to the highest
  proposal of the scale-down window (300 s by default). So a scale-down happens only
  once every proposal of the last 300 s is below `current`.
- **Rate limits** (`convertDesiredReplicasWithBehaviorRate`): scale-up at most
  max(4 pods, +100 %) per 15 s period, counted from the replicas at the start of the
  period (scale events of the last 15 s undone); scale-down at most −100 % per 15 s.
  Then clamped to [minReplicas, maxReplicas].
- **KEDA** hands the HPA `minReplicas = max(minReplicaCount, 1)` and `maxReplicaCount`;
  it scales 0 ↔ 1 itself, on `activationLagThreshold` and after `cooldownPeriod`, only
  when `minReplicaCount` is 0 (`ScaledObjectSettings.activation_only`). The harness keeps
  the ScaledObject's `minReplicaCount: 1`, so activation is reported, never acted on.

Time compression: `HpaSettings.compressed(factor)` divides every period and window
(KEDA's polling interval and cooldown, the HPA's sync period, stabilization window and
policy periods) by `factor`; replica counts, thresholds and tolerance stay as they are
(the harness divides lagThreshold and activationLagThreshold itself, before: see
tests/autoscale/scaling/scaledobject.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

# Kubernetes' defaults (kube-controller-manager flags and the HPA's default behavior).
SYNC_PERIOD_S = 15.0
TOLERANCE = 0.1
SCALE_DOWN_STABILIZATION_S = 300.0
SCALE_UP_STABILIZATION_S = 0.0
POLICY_PERIOD_S = 15.0
SCALE_UP_PODS = 4
SCALE_UP_PERCENT = 100
SCALE_DOWN_PERCENT = 100
# KEDA's defaults.
KEDA_POLLING_INTERVAL_S = 30.0
KEDA_COOLDOWN_S = 300.0


@dataclass(frozen=True)
class Policy:
    kind: str  # "Pods" or "Percent"
    value: int
    period_s: float


@dataclass(frozen=True)
class HpaSettings:
    """A ScaledObject's scaling settings and the HPA behavior it gets (defaults: KEDA's and
    Kubernetes' own), in seconds of the harness's clock."""

    target: float  # lagThreshold: the AverageValue target
    activation: float = 0.0  # activationLagThreshold
    min_replicas: int = 1  # minReplicaCount
    max_replicas: int = 100  # maxReplicaCount
    polling_interval_s: float = KEDA_POLLING_INTERVAL_S
    cooldown_s: float = KEDA_COOLDOWN_S
    sync_period_s: float = SYNC_PERIOD_S
    tolerance: float = TOLERANCE
    up_stabilization_s: float = SCALE_UP_STABILIZATION_S
    down_stabilization_s: float = SCALE_DOWN_STABILIZATION_S
    up_policies: tuple[Policy, ...] = (
        Policy("Pods", SCALE_UP_PODS, POLICY_PERIOD_S),
        Policy("Percent", SCALE_UP_PERCENT, POLICY_PERIOD_S),
    )
    down_policies: tuple[Policy, ...] = (Policy("Percent", SCALE_DOWN_PERCENT, POLICY_PERIOD_S),)
    compression: float = 1.0  # the factor these were divided by (1: real time)

    def __post_init__(self) -> None:
        if self.target <= 0:
            raise ValueError(f"target must be > 0, not {self.target}")
        if not 0 <= self.min_replicas <= self.max_replicas:
            raise ValueError(f"need 0 <= min <= max, not {self.min_replicas}, {self.max_replicas}")

    @property
    def hpa_min_replicas(self) -> int:
        """What KEDA gives the HPA: at least 1 (KEDA itself handles 0 ↔ 1)."""
        return max(self.min_replicas, 1)

    @property
    def activation_only(self) -> bool:
        """KEDA acts on activation (0 ↔ 1) only with minReplicaCount 0."""
        return self.min_replicas == 0

    def compressed(self, factor: float) -> HpaSettings:
        """Every period and window divided by `factor`."""
        if factor <= 0:
            raise ValueError(f"factor must be > 0, not {factor}")

        def scale(policies: tuple[Policy, ...]) -> tuple[Policy, ...]:
            return tuple(replace(p, period_s=p.period_s / factor) for p in policies)

        return replace(
            self,
            polling_interval_s=self.polling_interval_s / factor,
            cooldown_s=self.cooldown_s / factor,
            sync_period_s=self.sync_period_s / factor,
            up_stabilization_s=self.up_stabilization_s / factor,
            down_stabilization_s=self.down_stabilization_s / factor,
            up_policies=scale(self.up_policies),
            down_policies=scale(self.down_policies),
            compression=self.compression * factor,
        )

    @classmethod
    def from_scaled_object(cls, doc: dict[str, Any], **overrides: Any) -> HpaSettings:
        """From a parsed ScaledObject (its first trigger's lagThreshold and
        activationLagThreshold; KEDA's defaults where a field is absent: lagThreshold 10,
        activation 0, min 0, max 100, polling 30 s, cooldown 300 s)."""
        spec = doc["spec"]
        meta = spec["triggers"][0].get("metadata", {})
        values: dict[str, Any] = {
            "target": float(meta.get("lagThreshold", 10)),
            "activation": float(meta.get("activationLagThreshold", 0)),
            "min_replicas": int(spec.get("minReplicaCount", 0)),
            "max_replicas": int(spec.get("maxReplicaCount", 100)),
            "polling_interval_s": float(spec.get("pollingInterval", KEDA_POLLING_INTERVAL_S)),
            "cooldown_s": float(spec.get("cooldownPeriod", KEDA_COOLDOWN_S)),
        }
        values.update(overrides)
        return cls(**values)


def replicas_for_metric(value: float, target: float, current: int, tolerance: float) -> int:
    """`GetExternalPerPodMetricReplicas`: the proposal for an AverageValue External metric."""
    if current <= 0:
        # The HPA does not act on a target scaled to 0 (KEDA does, on activation).
        return current
    ratio = value / (target * current)
    if abs(1.0 - ratio) <= tolerance:
        return current
    return math.ceil(value / target)


@dataclass
class _Event:
    at: float
    change: int  # replicas added (scale-up event) or removed (scale-down event), > 0


@dataclass
class Decision:
    at: float
    metric: float
    current: int
    proposal: int  # from the metric alone
    stabilized: int
    desired: int  # after the rate limits and min/max: what the HPA sets
    reason: str


@dataclass
class Hpa:
    """One HPA over one scale target. `sync(now, metric, current)` is one controller sync;
    it returns the replica count to set and remembers what it needs (recommendations,
    scale events)."""

    settings: HpaSettings
    _recommendations: list[tuple[float, int]] = field(default_factory=list)
    _ups: list[_Event] = field(default_factory=list)
    _downs: list[_Event] = field(default_factory=list)

    def sync(self, now: float, metric: float, current: int) -> Decision:
        s = self.settings
        if current == 0:
            # Scaling is off at 0 replicas for the HPA; KEDA's activation brings it to 1.
            return Decision(now, metric, 0, 0, 0, 0, "target at 0 (KEDA activation scales 0→1)")
        proposal = replicas_for_metric(metric, s.target, current, s.tolerance)
        reason = "within tolerance" if proposal == current else "metric"
        if current > s.max_replicas:
            # The HPA brings a target above its max straight down, without behaviors.
            self._store(now, current, s.max_replicas)
            return Decision(now, metric, current, proposal, proposal, s.max_replicas, "above max")
        stabilized = self._stabilize(now, current, proposal)
        if stabilized > proposal:
            reason = f"the stabilization window's highest proposal, {stabilized}"
        elif stabilized < proposal:
            reason = f"the scale-up window's lowest proposal, {stabilized}"
        desired, limited = self._rate_limit(now, current, stabilized)
        if limited:
            reason = limited
        self._store(now, current, desired)
        return Decision(now, metric, current, proposal, stabilized, desired, reason)

    # -- stabilizeRecommendationWithBehaviors ------------------------------------------

    def _stabilize(self, now: float, current: int, proposal: int) -> int:
        s = self.settings
        up_cutoff = now - s.up_stabilization_s
        down_cutoff = now - s.down_stabilization_s
        up = proposal
        down = proposal
        for at, rec in self._recommendations:
            if at > up_cutoff:
                up = min(up, rec)
            if at > down_cutoff:
                down = max(down, rec)
        recommendation = max(current, up)
        recommendation = min(recommendation, down)
        # Kubernetes overwrites one sample older than both windows, else appends: the
        # same set of live samples as dropping every old one.
        keep_after = min(up_cutoff, down_cutoff)
        self._recommendations = [(at, r) for at, r in self._recommendations if at >= keep_after]
        self._recommendations.append((now, proposal))
        return recommendation

    # -- convertDesiredReplicasWithBehaviorRate ------------------------------------------

    @staticmethod
    def _changed_in(events: list[_Event], now: float, period_s: float) -> int:
        return sum(e.change for e in events if e.at > now - period_s)

    def _rate_limit(self, now: float, current: int, desired: int) -> tuple[int, str]:
        s = self.settings
        if desired > current:
            limit = -(2**31)
            for p in s.up_policies:  # selectPolicy Max: the largest change allowed
                start = (
                    current
                    - self._changed_in(self._ups, now, p.period_s)
                    + self._changed_in(self._downs, now, p.period_s)
                )
                if p.kind == "Pods":
                    proposed = start + p.value
                else:
                    proposed = math.ceil(start * (1 + p.value / 100))
                limit = max(limit, proposed)
            limit = max(limit, current)
            allowed = min(s.max_replicas, limit)
            if desired > allowed:
                return allowed, "scale-up limit" if allowed == limit else "max replicas"
            return desired, ""
        if desired < current:
            limit = 2**31 - 1
            for p in s.down_policies:  # selectPolicy Max: the largest change allowed
                start = (
                    current
                    - self._changed_in(self._ups, now, p.period_s)
                    + self._changed_in(self._downs, now, p.period_s)
                )
                proposed = start - p.value if p.kind == "Pods" else int(start * (1 - p.value / 100))
                limit = min(limit, proposed)
            limit = min(limit, current)
            allowed = max(s.hpa_min_replicas, limit)
            if desired < allowed:
                return allowed, "scale-down limit" if allowed == limit else "min replicas"
            return desired, ""
        return desired, ""

    def _store(self, now: float, before: int, after: int) -> None:
        longest = max(
            p.period_s for p in (*self.settings.up_policies, *self.settings.down_policies)
        )
        self._ups = [e for e in self._ups if e.at > now - longest]
        self._downs = [e for e in self._downs if e.at > now - longest]
        if after > before:
            self._ups.append(_Event(now, after - before))
        elif after < before:
            self._downs.append(_Event(now, before - after))


def keda_active(metric: float, settings: HpaSettings) -> bool:
    """KEDA's `active`: the lag above activationLagThreshold (the scaler reports it too)."""
    return metric > settings.activation
