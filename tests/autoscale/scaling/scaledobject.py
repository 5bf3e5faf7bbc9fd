"""deploy/k8s/keda-scaledobject.yaml: the ScaledObject, and the trigger metadata KEDA gets
here, its lag thresholds time compressed."""

from __future__ import annotations

from typing import Any

import yaml

from tests.autoscale.config import SCALED_OBJECT


def scaled_object() -> dict[str, Any]:
    for doc in yaml.safe_load_all(SCALED_OBJECT.read_text()):
        if doc and doc.get("kind") == "ScaledObject":
            return dict(doc)
    raise SystemExit(f"no ScaledObject in {SCALED_OBJECT}")


# The trigger metadata KEDA gets here: the ScaledObject's, less what needs a secret or TLS.
LOCAL_ONLY = {"bootstrapServers", "consumerGroup", "topic", "sasl", "tls"}
# KEDA's defaults where the trigger leaves them out.
THRESHOLD_DEFAULTS = {"lagThreshold": "10", "activationLagThreshold": "0"}


def compress_threshold(value: float, factor: float) -> int:
    """A lag threshold is records of backlog per replica, a rate × a time: compressing time
    by `factor` divides it by `factor` too (KEDA parses it as an integer; a positive one
    stays at least 1)."""
    return max(1, round(value / factor)) if value > 0 else 0


def thresholds(so: dict[str, Any]) -> dict[str, float]:
    """The trigger's lagThreshold and activationLagThreshold as the ScaledObject says."""
    meta = so["spec"]["triggers"][0].get("metadata", {})
    return {k: float(meta.get(k, default)) for k, default in THRESHOLD_DEFAULTS.items()}


def compressed_thresholds(so: dict[str, Any], factor: float) -> dict[str, int]:
    """lagThreshold and activationLagThreshold for a run whose time is compressed ×factor."""
    return {k: compress_threshold(v, factor) for k, v in thresholds(so).items()}


def trigger_metadata(
    so: dict[str, Any], bootstrap: str, group: str, topic: str, compression: float
) -> dict[str, str]:
    meta = {
        k: str(v) for k, v in so["spec"]["triggers"][0]["metadata"].items() if k not in LOCAL_ONLY
    }
    meta.update({k: str(v) for k, v in compressed_thresholds(so, compression).items()})
    meta.update(bootstrapServers=bootstrap, consumerGroup=group, topic=topic)
    return meta
