"""Where deploy/ keeps PromQL, and the metric names it may use: shared by the rule tests,
the live Prometheus check and tests/docs/test_deploy.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml

from worker.observe.metrics import Metrics
from worker.serve.app import ServeMetrics

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
PROMETHEUS = DEPLOY / "prometheus"
CONFIG = PROMETHEUS / "prometheus.yml"
RULES = sorted((PROMETHEUS / "rules").glob("*.yml"))
RULE_TESTS = sorted((PROMETHEUS / "tests").glob("*.test.yml"))
DASHBOARDS = sorted((DEPLOY / "grafana" / "dashboards").glob("*.json"))
HPA = DEPLOY / "k8s" / "hpa-prometheus.yaml"

_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}


def exported_names() -> set[str]:
    """Every series name `run` and `serve` export (labelled families included)."""
    families = [*Metrics().registry.collect(), *ServeMetrics().registry.collect()]
    return {m.name + suffix for m in families for suffix in _SUFFIXES[m.type]}


def promtool() -> str:
    """Debian's promtool (apt `prometheus`; .ci/run installs it)."""
    path = shutil.which("promtool")
    assert path, "promtool not found: apt-get install prometheus (.ci/run does)"
    return path


def rules() -> list[dict[str, Any]]:
    """Every rule of every shipped rule file, with its group's name under `group`."""
    out = []
    for path in RULES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            out += [{**r, "group": group["name"]} for r in group["rules"]]
    return out


def dashboard_exprs() -> dict[str, str]:
    """`<dashboard> / <panel title> #<n>` → PromQL, for every target of every panel."""
    out = {}
    for path in DASHBOARDS:
        for panel in json.loads(path.read_text())["panels"]:
            for n, target in enumerate(panel.get("targets", [])):
                out[f"{path.stem} / {panel['title']} #{n}"] = target["expr"]
    return out


def hpa_exprs(matchers: str, group_by: str) -> dict[str, str]:
    """The HPA-on-Prometheus manifest's queries: the HPA's metric name as a query of its
    own, and each prometheus-adapter rule's metricsQuery with adapter's template filled
    in (`<<.Series>>`, `<<.LabelMatchers>>`, `<<.GroupBy>>`) the way the adapter does for
    one pod."""
    docs = [d for d in yaml.safe_load_all(HPA.read_text()) if d]
    out: dict[str, str] = {}
    for d in docs:
        if d["kind"] == "HorizontalPodAutoscaler":
            for m in d["spec"]["metrics"]:
                out[f"HPA metric {m['pods']['metric']['name']}"] = m["pods"]["metric"]["name"]
        elif d["kind"] == "ConfigMap":
            config = yaml.safe_load(d["data"]["config.yaml"])
            for rule in config["rules"]:
                series = rule["seriesQuery"].split("{", 1)[0]
                query = (
                    rule["metricsQuery"]
                    .replace("<<.Series>>", series)
                    .replace("<<.LabelMatchers>>", matchers)
                    .replace("<<.GroupBy>>", group_by)
                )
                out[f"prometheus-adapter rule for {series}"] = query
    return out
