"""One trace from `publish --traceparent` through a real worker to a `tail` reader (#27).

Real broker, real redis-server, `derender-worker publish` and `run` as processes, the
worker exporting with the real OTLP/HTTP exporter (configured only by OTEL_* variables)
to a receiver that decodes its protobuf bodies (tests/support/otlp_receiver.py), and
`worker.tools.tail.tail` reading the output topic as a gateway would.
"""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from tokenizers import Tokenizer

from tests.integration.harness import ROOT, WorkerProcess, interleave, make_generations
from tests.support.otlp_receiver import Span, otel_env, otlp_receiver
from tests.support.server_fixtures import TANSU, kafka_plan
from worker.tools.tail import tail

pytestmark = pytest.mark.integration

TRACE_ID, PARENT_ID = "5bf92f3577b34da6a3ce929d0e0e4737", "10f067aa0ba902b8"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_a_trace_runs_from_publish_through_the_worker_to_tail(
    guarantee: str,
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
    new_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    if guarantee == "exactly-once" and kafka_plan().kind == TANSU:
        pytest.skip("tansu has no transactions")
    gens = make_generations(deepseek, 6, seed=27)
    # One more request whose stop string fires mid-stream: a control record for the engine.
    ids = deepseek.encode("hello world and more words ok.", add_special_tokens=False).ids
    stopped = [
        {"request_id": "stop-1", "generate_chunk": {"choices": [{"index": 0, "token_ids": [i]}]}}
        for i in ids
    ]
    stopped[0]["chat_request"] = {"stop": ["world"]}
    stopped.append({"request_id": "stop-1", "type": "end"})
    records = interleave(gens, seed=28) + stopped
    control_topic = new_topic(partitions=1, prefix="ctl")
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    with otlp_receiver() as receiver:
        worker = worker_factory(
            "--pass-headers", "x-tenant", "--guarantee", guarantee,
            "--control-topic", control_topic,
            env=otel_env(receiver, "derender-e2e"),
        )  # fmt: skip
        # The engine's end: its span of the request is the records' creation context.
        subprocess.run(
            [
                sys.executable, "-m", "worker", "publish", str(path),
                "--bootstrap-servers", kafka_bootstrap,
                "--topic", topics["input"],
                "--traceparent", TRACEPARENT,
                "--header", "tracestate=engine=1",
                "--header", "baggage=tenant.tier=gold",
                "--header", "x-tenant=acme",
                "--header", "x-private=not-for-gateways",
            ],
            cwd=ROOT,
            check=True,
            timeout=60,
        )  # fmt: skip
        # The gateway's end.
        out = io.StringIO()
        done = asyncio.run(
            asyncio.wait_for(
                tail(
                    kafka_bootstrap,
                    topics["output"],
                    out,
                    raw=True,
                    max_requests=len(gens) + 1,
                    isolation_level="read_committed",
                ),
                120,
            )
        )
        assert done == len(gens) + 1
        control_line = asyncio.run(first_record(kafka_bootstrap, control_topic))
        assert worker.stop() == 0, worker.log_tail()  # (its last spans are flushed at exit)

        def complete(spans: list[Span]) -> bool:
            counted = sum(
                s.attributes.get("messaging.batch.message_count", 0)
                for s in spans
                if s.kind == "CONSUMER"
            )
            return counted >= len(records)

        spans = receiver.wait_for(complete)

    processes = [s for s in spans if s.kind == "CONSUMER"]
    sends = {s.span_id: s for s in spans if s.kind == "PRODUCER"}
    for p in processes:
        assert p.name == f"process {topics['input']}"
        assert p.service == "derender-e2e"
        assert p.parent_span_id == ""
        assert [(lk.trace_id, lk.span_id) for lk in p.links] == [(TRACE_ID, PARENT_ID)]
        (link,) = p.links
        assert link.attributes["messaging.kafka.offset"] >= 0
        assert int(link.attributes["messaging.destination.partition.id"]) in range(4)
        assert p.attributes["messaging.system"] == "kafka"
        assert p.attributes["messaging.destination.name"] == topics["input"]
        assert p.attributes["messaging.consumer.group.name"] == worker.group_id
        assert p.attributes["messaging.batch.message_count"] >= 1
        assert "error.type" not in p.attributes
    destinations = {topics["output"], control_topic}
    assert {s.attributes["messaging.destination.name"] for s in sends.values()} == destinations
    for s in sends.values():
        assert s.name == f"send {s.attributes['messaging.destination.name']}"
        # The engine's trace goes on through the worker: the send spans are its children.
        assert (s.trace_id, s.parent_span_id) == (TRACE_ID, PARENT_ID)
        (link,) = s.links
        assert link.span_id in {p.span_id for p in processes}

    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(lines) >= len(records) - len(stopped)  # (an output at least per record)
    assert control_line["key"] == "stop-1"
    assert control_line["headers"]["derender-kind"] == "control"
    for line in [*lines, control_line]:
        headers = line["headers"]
        _, trace_id, span_id, _ = headers["traceparent"].split("-")
        # Each record names the send span that produced it: the gateway continues from it.
        assert trace_id == TRACE_ID and span_id in sends, headers
        topic = control_topic if line is control_line else topics["output"]
        assert sends[span_id].attributes["messaging.destination.name"] == topic
        assert headers["tracestate"] == "engine=1"
        assert headers["baggage"] == "tenant.tier=gold"
        assert headers["x-tenant"] == "acme"  # --pass-headers
        assert "x-private" not in headers


async def first_record(bootstrap: str, topic: str, timeout_s: float = 60) -> dict[str, Any]:
    """The topic's first committed record, as tail --raw prints one."""
    c = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=None,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    )
    await c.start()
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                for msgs in (await c.getmany(timeout_ms=200)).values():
                    m = msgs[0]
                    headers = {k: v.decode() for k, v in m.headers}
                    return {"key": m.key.decode(), "headers": headers, "value": m.value}
    finally:
        await c.stop()
