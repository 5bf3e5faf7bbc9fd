"""deploy/ only names flags, variables, ports and metrics that exist in the worker."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ops import promql
from worker.cli import build_parser
from worker.observe.metrics import Metrics
from worker.settings import FLAGS

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
ENV_VARS = {f.env for f in FLAGS}
DEFAULTS = {f.name: f.default for f in FLAGS}


def docs(path: Path) -> list[Any]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def all_yaml() -> list[Path]:
    return sorted(DEPLOY.rglob("*.yaml")) + sorted(DEPLOY.rglob("*.yml"))


def walk(node: Any) -> Any:
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from walk(v)


SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_count", "_sum"),
    "gauge": ("",),
}


def exported_metric_names() -> set[str]:
    """Every series name the worker can export (labelled families included)."""
    return {
        metric.name + suffix
        for metric in Metrics().registry.collect()
        for suffix in SUFFIXES[metric.type]
    }


@pytest.mark.parametrize("path", all_yaml(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_yaml_parses(path: Path) -> None:
    assert docs(path)


def test_every_env_var_is_a_real_flag() -> None:
    used = set()
    for path in all_yaml():
        for d in docs(path):
            for node in walk(d):
                if "name" in node and str(node["name"]).startswith("DERENDER_"):
                    used.add(node["name"])
                env = node.get("environment")
                if isinstance(env, dict):
                    used |= {k for k in env if k.startswith("DERENDER_")}
    used |= set(re.findall(r"DERENDER_[A-Z_]+", (DEPLOY / "Dockerfile").read_text()))
    assert used, "no DERENDER_ variables found: the test reads the wrong files"
    assert used <= ENV_VARS, f"unknown variables: {sorted(used - ENV_VARS)}"


def _commands() -> list[list[str]]:
    cmds = []
    for path in all_yaml():
        for d in docs(path):
            for node in walk(d):
                for key in ("command", "test", "args"):
                    v = node.get(key)
                    if isinstance(v, list) and v and v[0] in ("derender-worker", "CMD"):
                        cmds.append([x for x in v if x != "CMD"])
    return cmds


def test_probe_and_healthcheck_commands_parse_with_the_cli() -> None:
    cmds = [c for c in _commands() if c and c[0] == "derender-worker"]
    assert len(cmds) >= 3  # liveness, readiness, compose healthcheck
    parser = build_parser()
    for cmd in cmds:
        args = parser.parse_args(cmd[1:])
        assert args.command in ("check", "run")
        if args.command == "check":
            assert args.metrics_port == DEFAULTS["metrics-port"]


def test_ports_match_the_metrics_port() -> None:
    port = DEFAULTS["metrics-port"]
    deployment = docs(DEPLOY / "k8s" / "deployment.yaml")[0]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["ports"][0]["containerPort"] == port
    service = docs(DEPLOY / "k8s" / "service.yaml")[0]
    assert service["spec"]["ports"][0]["port"] == port
    prom = docs(DEPLOY / "prometheus" / "prometheus.yml")[0]
    targets = prom["scrape_configs"][0]["static_configs"][0]["targets"]
    assert all(t.endswith(f":{port}") for t in targets)
    assert f"EXPOSE {port}" in (DEPLOY / "Dockerfile").read_text()


def test_dashboards_and_autoscalers_use_exported_metrics() -> None:
    names = exported_metric_names() | promql.exported_names()  # (serve's too)
    exprs = [
        t["expr"]
        for p in json.loads((DEPLOY / "grafana" / "dashboards" / "derender.json").read_text())[
            "panels"
        ]
        for t in p["targets"]
    ]
    hpa = docs(DEPLOY / "k8s" / "hpa-prometheus.yaml")[0]
    exprs += [m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"]]
    used = {n for e in exprs for n in re.findall(r"derender_[a-z_]+", e)}
    assert used and used <= names, f"unknown metrics: {sorted(used - names)}"


def test_keda_scales_the_right_group_up_to_the_partition_count() -> None:
    scaled, _auth = docs(DEPLOY / "k8s" / "keda-scaledobject.yaml")
    trigger = scaled["spec"]["triggers"][0]
    assert trigger["type"] == "kafka"
    assert trigger["metadata"]["consumerGroup"] == DEFAULTS["group-id"]
    assert trigger["metadata"]["topic"] == DEFAULTS["input-topic"]
    assert int(trigger["metadata"]["lagThreshold"]) > 0
    assert int(trigger["metadata"]["activationLagThreshold"]) >= 0
    compose = docs(DEPLOY / "compose.yaml")[0]
    partitions = compose["services"]["kafka"]["environment"]["KAFKA_NUM_PARTITIONS"]
    assert scaled["spec"]["maxReplicaCount"] == partitions
    hpa = docs(DEPLOY / "k8s" / "hpa-prometheus.yaml")[0]
    assert hpa["spec"]["maxReplicas"] == partitions
    assert scaled["spec"]["scaleTargetRef"]["name"] == "derender-worker"


def test_the_image_runs_as_non_root() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    user = re.findall(r"^USER (\S+)", text, re.M)
    assert user and user[-1] not in ("root", "0")
    assert 'ENTRYPOINT ["derender-worker"]' in text
    deployment = docs(DEPLOY / "k8s" / "deployment.yaml")[0]
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True


def test_compose_runs_two_workers_with_kafka_redis_prometheus_grafana() -> None:
    services = docs(DEPLOY / "compose.yaml")[0]["services"]
    assert {"kafka", "redis", "prometheus", "grafana"} <= set(services)
    workers = [s for s in services if s.startswith("worker")]
    assert len(workers) == 2
    kafka_env = services["kafka"]["environment"]
    assert "controller" in kafka_env["KAFKA_PROCESS_ROLES"]  # KRaft, no ZooKeeper


def test_prometheus_scrapes_serve_on_the_port_compose_gives_it() -> None:
    from worker.commands.serve import SERVE_FLAGS

    port = next(f.default for f in SERVE_FLAGS if f.name == "port")
    prom = docs(DEPLOY / "prometheus" / "prometheus.yml")[0]
    jobs = {j["job_name"]: j for j in prom["scrape_configs"]}
    assert set(jobs) == {"derender-worker", "derender-serve"}
    (target,) = jobs["derender-serve"]["static_configs"][0]["targets"]
    assert target == f"serve:{port}"
    serve = docs(DEPLOY / "compose.yaml")[0]["services"]["serve"]
    assert serve["command"] == ["serve", "--port", str(port)]
    assert prom["rule_files"] == ["rules/*.yml"]
