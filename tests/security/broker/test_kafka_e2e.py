"""The worker and its tools on a secured Apache Kafka, with the right credentials: SASL_SSL
with SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN, and mutual TLS. For each, a request is
published (`publish`), derendered (`run`, granted only the ACLs it needs) and read back
(`tail`), all over the secured listener; `check` probes the worker, and the group-lag
sampler (which has clients of its own) reports the group's lag through /metrics."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from tests.integration.harness import ROOT, WorkerProcess, make_generations
from tests.security.broker.kafka_fixtures import (
    LITERAL,
    READ,
    TOPIC,
    WORKER_PASSWORD,
    WRITE,
    SecuredBroker,
    Topics,
    run,
    secured_kafka,  # noqa: F401 (the fixture)
)
from worker.adapters.local.embedded import free_port

pytestmark = pytest.mark.integration

DEADLINE_S = 60.0


def _tool(*args: str, env: dict[str, str], timeout: float = DEADLINE_S) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "worker", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _metric(port: int, name: str) -> float | None:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        body = r.read().decode()
    for line in body.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


WAYS = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN", "mTLS")


def test_every_way_in_publishes_derenders_and_reads_back(
    secured_kafka: SecuredBroker,  # noqa: F811
    redis_url: str,
    deepseek: Tokenizer,
    tmp_path: Path,
) -> None:
    """One worker, publisher and reader per way in, all at once (the machine's cores
    start them side by side)."""
    broker = secured_kafka
    runs = {}
    for way in WAYS:
        topics: Topics = run(broker.fresh())
        # The worker's rights, and the tools' (the engine's and the reader's side).
        tools = [(TOPIC, topics.input, LITERAL, WRITE), (TOPIC, topics.output, LITERAL, READ)]
        run(broker.grant(topics.worker_acls() + tools))
        if way == "mTLS":
            bootstrap, flags, env = broker.mtls, broker.mtls_flags(), {}
        else:
            # The password by variable, as a Kubernetes secret would give it.
            bootstrap, flags = broker.sasl, broker.sasl_flags(way)
            env = {"DERENDER_SASL_PASSWORD": WORKER_PASSWORD}
        gen = make_generations(deepseek, 1, seed=5, prefix=way.lower())[0]
        records = tmp_path / f"{way}.jsonl"
        records.write_text("".join(json.dumps(r) + "\n" for r in gen.records))
        port = free_port("127.0.0.1")
        worker = WorkerProcess(
            bootstrap, redis_url, topics.input, topics.output, topics.dlq, topics.group,
            f"sec-{topics.group}:", metrics_port=port, extra=flags, env=env,
            log_path=tmp_path / f"{way}.log",
        ).start()  # fmt: skip
        pub = _tool(
            "publish", str(records), "--bootstrap-servers", bootstrap, "--topic", topics.input,
            *flags, env=env,
        )  # fmt: skip
        tail = _tool(
            "tail", "--raw", "--bootstrap-servers", bootstrap, "--topic", topics.output,
            "--requests", "1", *flags, env=env,
        )  # fmt: skip
        runs[way] = (gen, worker, pub, tail, port)
    try:
        for way, (gen, worker, pub, tail, port) in runs.items():
            _, err = pub.communicate(timeout=DEADLINE_S)
            assert pub.returncode == 0, f"{way}: {err.decode()}"
            assert f"published {len(gen.records)} records" in err.decode()
            out, err = tail.communicate(timeout=DEADLINE_S)
            assert tail.returncode == 0, f"{way}: {err.decode()}\n{worker.log_tail()}"
            text = ""
            for line in map(json.loads, out.decode().splitlines()):
                if line["value"] != "[DONE]":
                    for c in line["value"]["choices"]:
                        d = c["delta"]  # (DeepSeek V4 thinks by default: its text is reasoning)
                        text += (d.get("reasoning") or "") + (d.get("content") or "")
            assert text == gen.expected, way
            check = subprocess.run(
                [sys.executable, "-m", "worker", "check", "--ready", "--metrics-port", str(port)],
                cwd=ROOT,
                capture_output=True,
                timeout=30,
                check=False,
            )
            assert check.returncode == 0, f"{way}: {check.stderr.decode()}"
            # The group-lag sampler logs in with clients of its own: a sample it made
            # shows as a partition's series (the unlabelled sum is there from the start).
            deadline = time.monotonic() + 30
            while _metric(port, 'derender_group_lag{partition="0"}') is None:
                assert time.monotonic() < deadline, f"{way}: {worker.log_tail()}"
                time.sleep(0.2)
            assert "group lag" not in worker.log_text(), worker.log_tail()
        for way, (_, worker, *_) in runs.items():
            assert worker.stop() == 0, f"{way}: {worker.log_tail()}"
    finally:
        for _, worker, pub, tail, _ in runs.values():
            for proc in (pub, tail):
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            if worker.alive:
                worker.stop()
