"""deploy/k8s/ against upstream Kubernetes' own types: tests/ops/k8scheck (Go) decodes
every document strictly into k8s.io/api's structs with sigs.k8s.io/yaml (unknown fields,
wrong types, bad quantities, duplicate keys and unknown kinds are errors) and checks
names and labels with k8s.io/apimachinery's validation. The KEDA documents are KEDA's
(tests/ops/test_keda.py). Why Go types rather than a JSON-schema validator: the network
reaches the Go module proxy but not GitHub, where kubeconform's and kubectl's schemas live;
k8s.io/api is the source those schemas are generated from."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.ops.gomod import k8scheck
from tests.ops.promql import DEPLOY

pytestmark = [pytest.mark.ops, pytest.mark.timeout(1800)]  # (a cold build: minutes)

K8S = DEPLOY / "k8s"
KEDA_KINDS = {"keda.sh/v1alpha1/ScaledObject", "keda.sh/v1alpha1/TriggerAuthentication"}


def check(*paths: Path) -> tuple[int, list[dict[str, Any]]]:
    done = subprocess.run(
        [str(k8scheck()), *map(str, paths)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines()]


def test_every_kubernetes_manifest_decodes_strictly_into_upstream_types() -> None:
    _, results = check(*sorted(K8S.glob("*.yaml")))
    kinds = {r["kind"] for r in results}
    assert {
        "apps/v1/Deployment",
        "v1/Service",
        "v1/ConfigMap",
        "v1/Secret",
        "policy/v1/PodDisruptionBudget",
        "autoscaling/v2/HorizontalPodAutoscaler",
    } <= kinds
    failed = [r for r in results if r["error"] and r["kind"] not in KEDA_KINDS]
    assert not failed, json.dumps(failed, indent=1)


@pytest.mark.parametrize(
    ("source", "old", "new", "expected"),
    [
        ("deployment.yaml", "  replicas: 2", "  replica: 2", 'unknown field "replica"'),
        ("deployment.yaml", 'cpu: "1"', 'cpu: "one"', "quantities must match"),
        ("deployment.yaml", "periodSeconds: 5", 'periodSeconds: "5"', "periodSeconds"),
        ("pdb.yaml", "maxUnavailable: 1", "maxUnavailable: [1]", "maxUnavailable"),
        ("service.yaml", "name: derender-worker-metrics", "name: Metrics_Port", "metadata.name"),
        ("hpa-prometheus.yaml", 'averageValue: "50000"', "averageValue: lots", "quantities"),
        ("pdb.yaml", "apiVersion: policy/v1", "apiVersion: policy/v1beta2", "unknown apiVersion"),
    ],
)
def test_a_broken_manifest_is_refused(
    tmp_path: Path, source: str, old: str, new: str, expected: str
) -> None:
    text = (K8S / source).read_text()
    assert old in text
    broken = tmp_path / source
    broken.write_text(text.replace(old, new, 1))
    code, results = check(broken)
    assert code == 1
    assert any(expected in r["error"] for r in results), results
