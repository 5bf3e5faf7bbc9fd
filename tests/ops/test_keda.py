"""deploy/k8s/keda-scaledobject.yaml against KEDA's own definitions, from the
`github.com/kedacore/keda/v2` module (the Go module proxy, cached in ~/.cache/derender-ops)
at the version `make autoscale`'s oracle is built with: the ScaledObject and the
TriggerAuthentication against the CRDs' openAPIV3Schema (with unknown fields refused, as
`kubectl apply` refuses them under strict field validation), and the Kafka trigger's
metadata and auth parameters against the `keda:"name=…"` tags of the scaler that reads
them (the CRD leaves `metadata` a free string map)."""

from __future__ import annotations

import copy
import re
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.ops.gomod import KEDA_MODULE, keda_version, module_dir
from tests.ops.promql import DEPLOY

MANIFEST = DEPLOY / "k8s" / "keda-scaledobject.yaml"
CRD_FILES = {
    "ScaledObject": "keda.sh_scaledobjects.yaml",
    "TriggerAuthentication": "keda.sh_triggerauthentications.yaml",
}
# A lowercase RFC 1123 subdomain: what the API server requires of metadata.name.
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


@cache
def keda() -> Path:
    return module_dir(KEDA_MODULE, keda_version())


def strict(schema: Any) -> Any:
    """The schema with every object that lists its properties closed to others (unless it
    keeps unknown fields on purpose): the API server's strict field validation."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) for k, v in schema.items()}
    if (
        out.get("type") == "object"
        and isinstance(out.get("properties"), dict)
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


@cache
def validator(api_version: str, kind: str) -> jsonschema.Draft4Validator:
    group, version = api_version.split("/")
    crd = yaml.safe_load((keda() / "config" / "crd" / "bases" / CRD_FILES[kind]).read_text())
    assert crd["spec"]["group"] == group and crd["spec"]["names"]["kind"] == kind
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version and v["served"]]
    schema = strict(served["schema"]["openAPIV3Schema"])
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema)


def errors(doc: dict[str, Any]) -> list[str]:
    found = [
        f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
        for e in validator(doc["apiVersion"], doc["kind"]).iter_errors(doc)
    ]
    if not DNS_SUBDOMAIN.fullmatch(doc.get("metadata", {}).get("name", "")):
        found.append("metadata.name: not a lowercase RFC 1123 subdomain")
    return found


@cache
def kafka_parameters() -> dict[str, dict[str, Any]]:
    """The Kafka scaler's parameters: name → {type, where it is read from, enum}."""
    source = (keda() / "pkg" / "scalers" / "kafka_scaler.go").read_text()
    params = {}
    for gotype, tag in re.findall(r'^\s*\w+\s+(\S+)\s+`keda:"([^"]+)"`', source, re.M):
        fields = dict(kv.split("=", 1) if "=" in kv else (kv, "") for kv in tag.split(","))
        params[fields["name"]] = {
            "type": gotype,
            "order": set(fields["order"].split(";")),
            "enum": set(fields["enum"].split(";")) if "enum" in fields else None,
        }
    assert {"lagThreshold", "consumerGroup", "sasl", "username"} <= set(params)
    return params


def parameter_errors(values: dict[str, str], order: str) -> list[str]:
    known, found = kafka_parameters(), []
    for name, value in values.items():
        p = known.get(name)
        if p is None or order not in p["order"]:
            found.append(f"{name}: not a kafka trigger {order} parameter")
        elif p["enum"] is not None and value not in p["enum"]:
            found.append(f"{name}: {value!r} not one of {sorted(p['enum'])}")
        elif p["type"] == "int64" and not re.fullmatch(r"-?\d+", value):
            found.append(f"{name}: {value!r} is not an integer")
        elif p["type"] == "bool" and value not in ("true", "false"):
            found.append(f"{name}: {value!r} is not true or false")
    return found


def manifests() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]


def test_the_shipped_scaledobject_and_triggerauthentication_match_kedas_crds() -> None:
    docs = manifests()
    assert [d["kind"] for d in docs] == ["ScaledObject", "TriggerAuthentication"]
    for doc in docs:
        assert errors(doc) == [], doc["kind"]


def test_the_kafka_trigger_uses_only_parameters_the_kafka_scaler_reads() -> None:
    scaled, auth = manifests()
    (trigger,) = scaled["spec"]["triggers"]
    assert trigger["type"] == "kafka"
    assert parameter_errors(trigger["metadata"], "triggerMetadata") == []
    given = {p["parameter"]: "<secret>" for p in auth["spec"]["secretTargetRef"]}
    assert given and parameter_errors(given, "authParams") == []
    assert trigger["authenticationRef"]["name"] == auth["metadata"]["name"]


def _mutated(kind: str, change: Any) -> dict[str, Any]:
    doc = copy.deepcopy(next(d for d in manifests() if d["kind"] == kind))
    change(doc)
    return doc


@pytest.mark.parametrize(
    ("kind", "change", "expected"),
    [
        ("ScaledObject", lambda d: d["spec"].update(pollingIntervall=10), "pollingIntervall"),
        ("ScaledObject", lambda d: d["spec"].update(maxReplicaCount="12"), "maxReplicaCount"),
        ("ScaledObject", lambda d: d["spec"].pop("scaleTargetRef"), "scaleTargetRef"),
        ("ScaledObject", lambda d: d["spec"]["triggers"][0].pop("type"), "type"),
        (
            "ScaledObject",
            lambda d: d["spec"]["triggers"][0]["metadata"].update(lagThreshold=50000),
            "lagThreshold",
        ),
        ("ScaledObject", lambda d: d["metadata"].update(name="Derender_Worker"), "metadata.name"),
        ("TriggerAuthentication", lambda d: d["spec"]["secretTargetRef"][0].pop("key"), "key"),
        ("TriggerAuthentication", lambda d: d["spec"].update(secretRef=[]), "secretRef"),
    ],
)
def test_kedas_schema_refuses_a_broken_manifest(kind: str, change: Any, expected: str) -> None:
    found = errors(_mutated(kind, change))
    assert found and any(expected in e for e in found), found


@pytest.mark.parametrize(
    ("values", "order", "expected"),
    [
        ({"lagTreshold": "50000"}, "triggerMetadata", "not a kafka trigger"),
        ({"lagThreshold": "5e4"}, "triggerMetadata", "not an integer"),
        ({"sasl": "scram_sha_512"}, "triggerMetadata", "not one of"),
        ({"offsetResetPolicy": "oldest"}, "triggerMetadata", "not one of"),
        ({"allowIdleConsumers": "no"}, "triggerMetadata", "not true or false"),
        ({"password": "x"}, "triggerMetadata", "not a kafka trigger"),  # (auth only)
        ({"passwd": "x"}, "authParams", "not a kafka trigger"),
    ],
)
def test_the_scalers_parameters_refuse_a_typo(
    values: dict[str, str], order: str, expected: str
) -> None:
    found = parameter_errors(values, order)
    assert found and expected in found[0], found
