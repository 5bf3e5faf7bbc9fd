"""deploy/ only names flags, variables, ports and metrics that exist in the worker."""

from __future__ import annotations

import asyncio
import json
import re
import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from tests.ops import promql
from worker.adapters.broker.kafka import make_producer, make_transactional_producer
from worker.adapters.local.kafka_server import ApacheKafka
from worker.cli import build_parser
from worker.observe.metrics import Metrics
from worker.settings import EXACTLY_ONCE, FLAGS, GUARANTEES, from_args

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


# The compose broker against what the worker asks of Kafka ---------------------------

# Kafka's defaults for the settings below (the broker configuration reference), which
# apply where compose.yaml sets nothing.
KAFKA_DEFAULTS = {
    "offsets.topic.replication.factor": 3,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
    "min.insync.replicas": 1,
    "group.min.session.timeout.ms": 6000,
    "group.max.session.timeout.ms": 1800000,
    "transaction.max.timeout.ms": 900000,
}


def image_env_to_properties(env: dict[str, Any]) -> dict[str, str]:
    """The apache/kafka image's mapping of KAFKA_* variables to server.properties keys:
    `___` is a dash, `__` an underscore, `_` a dot, lower-cased."""
    props = {}
    for name, value in env.items():
        if name.startswith("KAFKA_"):
            key = name[len("KAFKA_") :].lower()
            key = key.replace("___", "-").replace("__", "\0").replace("_", ".").replace("\0", "_")
            props[key] = str(value)
    return props


def compose_brokers() -> list[dict[str, str]]:
    services = docs(DEPLOY / "compose.yaml")[0]["services"]
    return [
        image_env_to_properties(s["environment"])
        for s in services.values()
        if "broker" in str(s.get("environment", {}).get("KAFKA_PROCESS_ROLES", ""))
    ]


def setting(props: dict[str, str], key: str) -> int:
    return int(props.get(key, KAFKA_DEFAULTS[key]))


def test_image_env_mapping() -> None:
    env = {"KAFKA_A_B": 1, "KAFKA_C__D": "x", "KAFKA_E___F": "y", "OTHER": "z"}
    assert image_env_to_properties(env) == {"a.b": "1", "c_d": "x", "e-f": "y"}


async def _producers(guarantee: str) -> tuple[Any, Any, Any]:
    """The settings of `run --guarantee <guarantee>` and the two producers the worker
    builds from them (aiokafka wants a running loop to build one)."""
    args = build_parser().parse_args(["run", "--guarantee", guarantee])
    s = from_args(args)
    producers = (make_producer(s), make_transactional_producer(s, "probe"))
    for p in producers:
        await p.stop()  # never started: nothing to connect to
    return s, *producers


def test_compose_kafka_holds_what_the_worker_needs() -> None:
    (props,) = compose_brokers()  # one broker (this fails if compose runs more)
    brokers = 1
    s, plain, transactional = asyncio.run(_producers(EXACTLY_ONCE))
    # Every worker is a consumer group member: its offsets live in __consumer_offsets.
    assert setting(props, "offsets.topic.replication.factor") <= brokers
    assert (
        setting(props, "group.min.session.timeout.ms")
        <= s.session_timeout_ms
        <= setting(props, "group.max.session.timeout.ms")
    )
    # Both producers write with acks=all (aiokafka keeps it as -1): a write needs
    # min.insync.replicas replicas in sync.
    for producer in (plain, transactional):
        assert producer._sender._acks == -1
    assert setting(props, "min.insync.replicas") <= brokers
    # The worker offers exactly-once, whose producer is transactional: a transaction
    # coordinator, hence __transaction_state with enough replicas in sync.
    assert EXACTLY_ONCE in GUARANTEES
    assert plain._txn_manager is None
    assert transactional._txn_manager.transactional_id == "probe"
    rf = setting(props, "transaction.state.log.replication.factor")
    assert rf <= brokers
    assert setting(props, "transaction.state.log.min.isr") <= rf
    assert transactional._txn_manager.transaction_timeout_ms <= setting(
        props, "transaction.max.timeout.ms"
    )


def test_compose_kafka_sets_what_the_test_broker_needs_for_one_node() -> None:
    """The local broker the integration tests run exactly-once on
    (worker/adapters/local/kafka_server.py) is one node too: compose.yaml sets its
    internal topics' replication the same way."""
    node = SimpleNamespace(
        host="127.0.0.1",
        port=1,
        controller_port=2,
        data_dir=Path("/x"),
        extra_config={},
        node_id=1,
        voters=None,
    )
    tested = ApacheKafka.properties(node)  # the settings alone: no broker started
    one_node = {
        key: value
        for key, value in tested.items()
        if key.startswith(("offsets.topic.", "transaction.state.log."))
        and key.endswith((".replication.factor", ".min.isr"))
    }
    assert set(one_node) >= {
        "offsets.topic.replication.factor",
        "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr",
    }
    (props,) = compose_brokers()
    assert {key: props.get(key) for key in one_node} == one_node


def test_the_k8s_image_is_the_packages_version() -> None:
    """The version lives in pyproject.toml; the deployment's image tag follows it."""
    version = tomllib.loads((DEPLOY.parent / "pyproject.toml").read_text())["project"]["version"]
    deployment = docs(DEPLOY / "k8s" / "deployment.yaml")[0]
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image.rpartition(":")[2] == version


def test_the_image_build_copies_what_the_package_build_reads() -> None:
    """The Dockerfile builds the wheel from the files it copies: the package, and the
    readme and license files pyproject.toml names (a missing one fails the build)."""
    meta = tomllib.loads((DEPLOY.parent / "pyproject.toml").read_text())["project"]
    needed = {"pyproject.toml", meta["readme"], *meta["license-files"], "worker"}
    copied = set()
    for line in (DEPLOY / "Dockerfile").read_text().splitlines():
        words = line.split()
        if words[:1] == ["COPY"] and not any(w.startswith("--from") for w in words):
            copied |= set(words[1:-1])
    assert needed <= copied, f"deploy/Dockerfile does not copy {sorted(needed - copied)}"


def test_every_secret_key_a_manifest_reads_is_in_the_example_secret() -> None:
    """A key a Deployment reads from `derender-secrets` (an env secretKeyRef or a mounted
    item) that the example Secret lacks leaves the pod unstartable where it is copied."""
    example = docs(DEPLOY / "k8s" / "secret.example.yaml")[0]
    have = set(example["stringData"])
    wanted: set[str] = set()
    for path in sorted((DEPLOY / "k8s").glob("*.yaml")):
        for node in walk(docs(path)):
            if not isinstance(node, dict):
                continue
            ref = node.get("secretKeyRef")
            if isinstance(ref, dict) and ref.get("name") == example["metadata"]["name"]:
                wanted.add(ref["key"])
            secret = node.get("secret")
            if isinstance(secret, dict) and secret.get("secretName") == example["metadata"]["name"]:
                wanted |= {item["key"] for item in secret.get("items", [])}
    assert wanted, "no manifest reads a secret key: the walk found nothing"
    assert wanted <= have, f"secret.example.yaml lacks: {sorted(wanted - have)}"
