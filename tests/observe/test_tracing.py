"""OpenTelemetry spans (worker/observe/tracing.py) as a real OTLP receiver gets them.

The SDK, its batch processor and its OTLP/HTTP exporter are the real ones, configured by
the standard OTEL_* variables; the receiver decodes the exporter's protobuf bodies
(tests/support/otlp_receiver.py). The batch runs the real loop over a memory store; only the
sink is a list (or one that fails, for `error.type`). `serve` runs as its own process.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import inspect
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka import TopicPartition
from aiokafka.errors import KafkaConnectionError

from tests.serve.bodies import PLAIN, chat_body
from tests.support.helpers import ListSink, ListSource, chunk, end
from tests.support.otlp_receiver import Receiver, Span, otel_env, otlp_receiver
from worker.adapters.state.memory_store import MemoryStore
from worker.batch.checkpoint import Checkpoint
from worker.batch.loop import run_batch
from worker.config import load_registry
from worker.constants import DLQ
from worker.failures import ConfigError
from worker.observe.propagation import carried, carried_names
from worker.observe.tracing import enabled, traced_run_batch
from worker.ports import Batch, InRecord, OutRecord
from worker.settings import add_flags, from_args

REGISTRY = load_registry(None)
TRACE_A, SPAN_A = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
TRACE_B, SPAN_B = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
TP_A = f"00-{TRACE_A}-{SPAN_A}-01".encode()
TP_B = f"00-{TRACE_B}-{SPAN_B}-01".encode()
TOPICS = ["--input-topic", "in-t", "--output-topic", "out-t", "--dlq-topic", "dlq-t"]


def _settings() -> Any:
    parser = argparse.ArgumentParser()
    add_flags(parser, environ={})
    return from_args(parser.parse_args([*TOPICS, "--group-id", "grp"]))


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    with otlp_receiver() as r:
        for k, v in otel_env(r).items():
            monkeypatch.setenv(k, v)
        yield r


def _batch(rows: list[tuple[bytes | dict[str, Any], list[tuple[str, bytes]]]]) -> Batch:
    tp = TopicPartition("in-t", 2)
    names = carried_names(None)
    records = []
    for i, (value, headers) in enumerate(rows):
        raw = value if isinstance(value, bytes) else json.dumps(value).encode()
        key = value.get("request_id") if isinstance(value, dict) else None
        kept = carried(headers, names) if headers else None
        records.append(InRecord(raw, key, 1_800_000_000_000, ("in-t", 2, 40 + i), tp, kept))
    return Batch(records, {tp: 40}, {tp: 40 + len(rows) - 1})


def _run(batch: Batch, sink: Any) -> Any:
    source = ListSource()
    traced = traced_run_batch(_settings(), run_batch)
    assert traced is not run_batch  # (tracing is on: the receiver's variables are set)
    return asyncio.run(
        traced(
            batch,
            registry=REGISTRY,
            sink=sink,
            checkpoint=Checkpoint(source, MemoryStore()),
            max_record_bytes=1 << 20,
        )
    )


def _traceparent(rec: OutRecord) -> tuple[str, str]:
    (tp,) = [v for k, v in rec.headers if k == "traceparent"]
    _, trace_id, span_id, flags = tp.decode().split("-")
    assert int(flags, 16) & 1  # sampled (bit 2 may say the trace id is random: level 2)
    return trace_id, span_id


def _complete(n_send: int) -> Any:
    def done(spans: list[Span]) -> bool:
        return sum(s.kind == "PRODUCER" for s in spans) >= n_send and any(
            s.kind == "CONSUMER" for s in spans
        )

    return done


def test_off_unless_the_standard_variables_ask() -> None:
    assert not enabled({})
    assert not enabled({"OTEL_SERVICE_NAME": "x"})
    assert enabled({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"})
    assert enabled({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"})
    assert enabled({"OTEL_TRACES_EXPORTER": "otlp"})
    assert not enabled({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "x"})
    assert not enabled({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "x"})
    # Off, the loop is the loop itself: no wrapper, no span, no header rewriting.
    assert traced_run_batch(_settings(), run_batch, environ={}) is run_batch


def test_an_exporter_it_cannot_make_is_a_configuration_error() -> None:
    with pytest.raises(ConfigError, match="OTEL_TRACES_EXPORTER"):
        traced_run_batch(_settings(), run_batch, environ={"OTEL_TRACES_EXPORTER": "zipkin"})


def test_a_batch_makes_a_process_span_linking_its_inputs_and_send_spans_in_the_headers(
    receiver: Receiver,
) -> None:
    batch = _batch(
        [
            (chunk("a", 0, [19923, 11]), [("traceparent", TP_A), ("baggage", b"u=1")]),
            (chunk("a", 1, [2058]), [("traceparent", TP_A), ("baggage", b"u=1")]),
            (chunk("b", 0, [19923]), [("traceparent", TP_B), ("tracestate", b"v=1")]),
            (end("b", 1), [("traceparent", TP_B), ("tracestate", b"v=1")]),
            (chunk("c", 0, [19923]), []),  # no trace context: a child of the process span
            (b"not json", [("traceparent", TP_B)]),  # a dead letter
        ]
    )
    sink = ListSink()
    _run(batch, sink)
    spans = receiver.wait_for(_complete(4))
    (process,) = [s for s in spans if s.kind == "CONSUMER"]
    assert process.name == "process in-t"
    assert process.service == "derender-test"
    assert process.parent_span_id == ""  # links, not parents
    assert process.attributes == {
        "messaging.system": "kafka",
        "messaging.operation.name": "process",
        "messaging.operation.type": "process",
        "messaging.destination.name": "in-t",
        "messaging.consumer.group.name": "grp",
        "messaging.batch.message_count": 6,
        "messaging.destination.partition.id": "2",
    }
    links = {(lk.trace_id, lk.span_id): lk.attributes for lk in process.links}
    assert links == {
        (TRACE_A, SPAN_A): {
            "messaging.destination.partition.id": "2",
            "messaging.kafka.offset": 40,
        },
        (TRACE_B, SPAN_B): {
            "messaging.destination.partition.id": "2",
            "messaging.kafka.offset": 42,
        },
    }
    sends = {(s.name, s.parent_span_id): s for s in spans if s.kind == "PRODUCER"}
    assert set(sends) == {
        ("send out-t", SPAN_A),
        ("send out-t", SPAN_B),
        ("send out-t", process.span_id),
        ("send dlq-t", SPAN_B),
    }
    for (name, parent), s in sends.items():
        assert s.attributes["messaging.system"] == "kafka"
        assert s.attributes["messaging.operation.type"] == "send"
        assert s.attributes["messaging.destination.name"] == name.split()[1]
        if parent == process.span_id:  # (its trace is the batch's)
            assert s.trace_id == process.trace_id and not s.links
        else:  # the request's own trace goes on, and the batch is linked
            assert s.trace_id == {SPAN_A: TRACE_A, SPAN_B: TRACE_B}[parent]
            assert [(lk.trace_id, lk.span_id) for lk in s.links] == [
                (process.trace_id, process.span_id)
            ]
    # Each output carries its send span's context; baggage and tracestate go along.
    by_key: dict[str, list[OutRecord]] = {}
    for rec in sink.outputs:
        by_key.setdefault(rec.key, []).append(rec)
    expected = {"a": SPAN_A, "b": SPAN_B, "c": process.span_id}
    for key, parent in expected.items():
        send = sends[("send out-t", parent)]
        assert send.attributes["messaging.batch.message_count"] == len(by_key[key])
        assert send.attributes["messaging.kafka.message.key"] == key
        for rec in by_key[key]:
            assert _traceparent(rec) == (send.trace_id, send.span_id)
            assert [k for k, _ in rec.headers].count("traceparent") == 1
    assert all(("baggage", b"u=1") in r.headers for r in by_key["a"])
    assert all(("tracestate", b"v=1") in r.headers for r in by_key["b"])
    assert not any(k == "tracestate" for r in by_key["c"] for k, _ in r.headers)
    (dead,) = sink.dead
    assert dead.kind == DLQ
    dlq_send = sends[("send dlq-t", SPAN_B)]
    assert _traceparent(dead) == (dlq_send.trace_id, dlq_send.span_id)


class FailingSink:
    async def send(self, outputs: list[OutRecord], dead_letters: list[OutRecord]) -> None:
        raise KafkaConnectionError("broker went away")


def test_a_failed_batch_says_why_in_error_type(receiver: Receiver) -> None:
    batch = _batch([(chunk("a", 0, [19923]), [("traceparent", TP_A)])])
    with pytest.raises(KafkaConnectionError):
        _run(batch, FailingSink())
    spans = receiver.wait_for(_complete(1))
    for s in spans:
        assert s.attributes["error.type"] == "KafkaConnectionError", s.name
        assert s.status_code == 2  # ERROR


def test_an_invalid_traceparent_starts_from_the_batch(receiver: Receiver) -> None:
    bad = [("traceparent", b"00-zz-1-01"), ("tracestate", b"v=1")]
    sink = ListSink()
    _run(_batch([(chunk("a", 0, [19923]), bad)]), sink)
    spans = receiver.wait_for(_complete(1))
    (process,) = [s for s in spans if s.kind == "CONSUMER"]
    (send,) = [s for s in spans if s.kind == "PRODUCER"]
    assert process.links == []
    assert send.parent_span_id == process.span_id
    for rec in sink.outputs:
        assert _traceparent(rec) == (send.trace_id, send.span_id)
        assert ("tracestate", b"v=1") not in rec.headers  # (W3C: ignored with it)


def test_serve_makes_a_server_span_parented_from_the_requests_traceparent() -> None:
    with otlp_receiver() as receiver:
        env = {**os.environ, **otel_env(receiver, "derender-serve-test")}
        env.update(DERENDER_PORT="0", DERENDER_HOST="127.0.0.1")
        proc = subprocess.Popen(
            [sys.executable, "-m", "worker", "serve"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.startswith("DERENDER_SERVE_URL="), line
            port = int(line.rsplit(":", 1)[1])
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            body = json.dumps(chat_body(PLAIN)).encode()
            headers = {
                "Content-Type": "application/json",
                "traceparent": TP_A.decode(),
                "tracestate": "v=1",
            }
            c.request("POST", "/v1/chat/completions/derender", body, headers)
            assert c.getresponse().read() and True
            c.request("GET", "/health")  # no traceparent: a root span
            c.getresponse().read()
            c.request("POST", "/nowhere", b"{}", {"Content-Type": "application/json"})
            c.getresponse().read()
            c.close()
            spans = receiver.wait_for(lambda s: len(s) >= 3)
        finally:
            proc.terminate()
            _, err = proc.communicate(timeout=20)
        assert proc.returncode == 0, err
    by_name = {s.name: s for s in spans}
    derender = by_name["POST /v1/chat/completions/derender"]
    assert derender.kind == "SERVER"
    assert (derender.trace_id, derender.parent_span_id) == (TRACE_A, SPAN_A)
    assert derender.service == "derender-serve-test"
    assert derender.attributes == {
        "http.request.method": "POST",
        "url.path": "/v1/chat/completions/derender",
        "url.scheme": "http",
        "http.route": "/v1/chat/completions/derender",
        "http.response.status_code": 200,
    }
    health = by_name["GET /health"]
    assert health.parent_span_id == "" and health.trace_id != TRACE_A
    unknown = by_name["POST"]  # (an unknown path names no route)
    assert unknown.attributes["http.response.status_code"] == 404
    assert "error.type" not in unknown.attributes  # (a 4xx is the client's, not ours)


def test_a_failure_of_the_tracing_itself_never_fails_the_batch(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    from worker.observe import tracing

    def broken(self: Any, traceparent: bytes, tracestate: bytes | None) -> Any:
        raise RuntimeError("a bug in the tracing")

    monkeypatch.setattr(tracing.WorkerTracing, "creation", broken)  # (the seam)
    sink = ListSink()
    report = _run(_batch([(chunk("a", 0, [19923]), [("traceparent", TP_A)])]), sink)
    assert report.result.results["ok"] == 1
    assert sink.outputs
    for rec in sink.outputs:  # the input's context goes on unchanged, as with tracing off
        assert ("traceparent", TP_A) in rec.headers


@pytest.mark.skipif(
    "control" not in inspect.signature(run_batch).parameters,
    reason="the control topic (#27's first part) is not in yet",
)
def test_control_records_get_send_spans_of_the_control_topic(receiver: Receiver) -> None:
    parser = argparse.ArgumentParser()
    add_flags(parser, environ={})
    settings = from_args(parser.parse_args([*TOPICS, "--control-topic", "ctl-t"]))
    traced = traced_run_batch(settings, run_batch)
    source, sink = ListSource(), ListSink()
    stop = {"chat_request": {"stop": ["\n"], "stream": True}, "prompt_token_ids": [0]}
    batch = _batch([(chunk("s", 0, [19923, 201, 2058], **stop), [("traceparent", TP_A)])])
    asyncio.run(
        traced(
            batch,
            registry=REGISTRY,
            sink=sink,
            checkpoint=Checkpoint(source, MemoryStore()),
            max_record_bytes=1 << 20,
            control=True,
        )
    )
    (control,) = [o for o in sink.outputs if o.kind == "control"]
    spans = receiver.wait_for(_complete(2))
    (send,) = [s for s in spans if s.name == "send ctl-t"]
    assert (send.trace_id, send.parent_span_id) == (TRACE_A, SPAN_A)
    assert _traceparent(control) == (send.trace_id, send.span_id)


@pytest.mark.parametrize("command", [["run", "--bootstrap-servers", "127.0.0.1:1"], ["serve"]])
def test_tracing_asked_for_but_impossible_stops_at_start_with_exit_2(command: list[str]) -> None:
    env = {**os.environ, "OTEL_TRACES_EXPORTER": "zipkin", "DERENDER_METRICS_PORT": "0"}
    env.update(DERENDER_PORT="0", DERENDER_HOST="127.0.0.1")
    done = subprocess.run(
        [sys.executable, "-m", "worker", *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "OTEL_TRACES_EXPORTER='zipkin'" in done.stderr
