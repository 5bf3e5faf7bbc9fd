"""Trace context and --pass-headers onto every record an input record produced.

The loop is the real one (`loop.run_batch`, memory store, a list sink); the inputs carry
the headers a Kafka source keeps (`propagation.carried`), and every kind of record that
comes out — chunk, response, error, done, control, dead letter, and the error that takes
a refused output's place — must carry them, and nothing else of the input's headers.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import io
import json
from typing import Any

import pytest
from aiokafka import TopicPartition
from aiokafka.errors import MessageSizeTooLargeError
from aiokafka.structs import ConsumerRecord

from tests.support.helpers import ListSink, ListSource, chunk, end
from worker.adapters.broker.kafka_source import KafkaSource
from worker.adapters.files import read_records
from worker.adapters.state.memory_store import MemoryStore
from worker.batch.checkpoint import Checkpoint
from worker.batch.loop import run_batch
from worker.config import load_registry
from worker.constants import DLQ, H_KIND, H_PART, H_REQUEST_ID, H_SEQ
from worker.observe.propagation import carried, carried_names, pass_header_names
from worker.ports import Batch, InRecord, OutputsRefused, OutRecord
from worker.settings import SettingsError, add_flags, from_args

REGISTRY = load_registry(None)
CONTROL = "control"  # (the control topic's output kind)
TRACEPARENT = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
INPUT_HEADERS = [
    ("traceparent", TRACEPARENT),
    ("x-tenant", b"acme"),
    ("tracestate", b"vendor=abc"),
    ("x-not-passed", b"secret"),
    ("baggage", b"user=42"),
]
PASSED = carried_names("x-tenant")
# What every output of such an input must carry after its own four headers, in order.
CARRIED = (
    ("traceparent", TRACEPARENT),
    ("x-tenant", b"acme"),
    ("tracestate", b"vendor=abc"),
    ("baggage", b"user=42"),
)
OWN = {H_REQUEST_ID, H_SEQ, H_PART, H_KIND}
CONTROL_IN_LOOP = "control" in inspect.signature(run_batch).parameters


def _record(
    value: bytes | dict[str, Any], key: str | None, headers: Any = INPUT_HEADERS
) -> InRecord:
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    kept = carried(headers, PASSED) if headers else None
    return InRecord(raw, key, 1_800_000_000_000, "in/0/0", None, kept)


def _run(records: list[InRecord], sink: Any, store: MemoryStore | None = None) -> Any:
    source = ListSource()
    kw: dict[str, Any] = {"control": True} if CONTROL_IN_LOOP else {}
    return asyncio.run(
        run_batch(
            source.batch(records),
            registry=REGISTRY,
            sink=sink,
            checkpoint=Checkpoint(source, store or MemoryStore()),
            max_record_bytes=1 << 20,
            **kw,
        )
    )


def _carried(rec: OutRecord) -> tuple[tuple[str, bytes], ...]:
    return tuple((k, v) for k, v in rec.headers if k not in OWN and not k.startswith("derender-"))


def test_every_kind_of_output_carries_the_inputs_trace_and_passed_headers() -> None:
    stop = {"chat_request": {"stop": ["\n"], "stream": True}, "prompt_token_ids": [0]}
    records = [
        # a chat stream: role/content chunks, then [DONE] at its end
        _record(chunk("a", 0, [19923, 11, 2058]), "a"),
        _record(end("a", 1), "a"),
        # a whole response
        _record(
            {
                "request_id": "r",
                "seq": 0,
                "type": "response",
                "generate_response": {
                    "request_id": "r",
                    "choices": [{"index": 0, "token_ids": [19923], "finish_reason": "stop"}],
                },
            },
            "r",
        ),
        # a gap fails the request: an error (and, with a control topic, a control record)
        _record(chunk("g", 0, [19923]), "g"),
        _record(chunk("g", 5, [19923]), "g"),
        # a record that is not a ChunkRecord but names its request: dead letter + error
        _record(b'{"request_id": "d", "seq": 0, "generate_chunk": 7}', "d"),
        # not JSON, no key: a dead letter only
        _record(b"not json", None),
        # a stop string fires mid-stream: the worker ends the request before the engine
        _record(chunk("s", 0, [19923, 201, 2058], **stop), "s"),
    ]
    sink = ListSink()
    _run(records, sink)
    kinds = {o.kind for o in sink.outputs}
    assert {"chunk", "done", "response", "error"} <= kinds
    assert sink.dead and all(d.kind == DLQ for d in sink.dead)
    if CONTROL_IN_LOOP:
        assert CONTROL in kinds
    for rec in [*sink.outputs, *sink.dead]:
        assert _carried(rec) == CARRIED, (rec.kind, rec.headers)


def test_outputs_of_an_input_without_headers_are_unchanged() -> None:
    sink = ListSink()
    _run([_record(chunk("a", 0, [19923]), "a", headers=()), _record(end("a", 1), "a", ())], sink)
    assert sink.outputs
    for rec in sink.outputs:
        assert [k for k, _ in rec.headers] == [H_REQUEST_ID, H_SEQ, H_PART, H_KIND]


class RefusingSink(ListSink):
    """Refuses outputs over `limit` bytes for themselves (as a broker over
    max.message.bytes does); takes the rest."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    async def send(self, outputs: list[OutRecord], dead_letters: list[OutRecord]) -> None:
        refused = [o for o in outputs if len(o.value) > self.limit]
        await super().send([o for o in outputs if o not in refused], dead_letters)
        if refused:
            raise OutputsRefused([(o, MessageSizeTooLargeError()) for o in refused])


def test_the_error_in_a_refused_outputs_place_carries_them_too() -> None:
    big = chunk("big", 0, list(range(100, 400)), "length", api="completion")
    sink = RefusingSink(600)
    _run([_record(big, "big")], sink)
    errors = [o for o in sink.outputs if o.kind == "error"]
    assert errors
    for rec in sink.outputs:
        assert _carried(rec) == CARRIED, (rec.kind, rec.headers)


def test_a_kafka_source_keeps_only_the_carried_headers() -> None:
    tp = TopicPartition("in", 3)

    def rec(offset: int, headers: Any) -> ConsumerRecord[bytes, bytes]:
        return ConsumerRecord("in", 3, offset, 1, 0, b"k", b"{}", None, 1, 2, headers)

    class Consumer:  # (the seam: aiokafka's getmany)
        async def getmany(self, *tps: Any, timeout_ms: int, max_records: int) -> Any:
            return {tp: [rec(7, tuple(INPUT_HEADERS)), rec(8, ()), rec(9, (("other", b"x"),))]}

    source = KafkaSource(
        Consumer(),  # type: ignore[arg-type]
        "g",
        lambda: [tp],
        timeout_ms=1,
        max_records=10,
        carry=PASSED,
    )
    batch = asyncio.run(source.poll())
    assert isinstance(batch, Batch)
    assert [r.headers for r in batch.records] == [CARRIED, None, None]
    # The default: the W3C headers only.
    plain = KafkaSource(Consumer(), "g", lambda: [tp], timeout_ms=1, max_records=10)  # type: ignore[arg-type]
    batch = asyncio.run(plain.poll())
    assert batch is not None
    assert batch.records[0].headers == tuple(h for h in CARRIED if h[0] != "x-tenant")


def test_replay_envelopes_carry_their_headers() -> None:
    line = {
        "key": "a",
        "headers": {"traceparent": TRACEPARENT.decode(), "x-other": "1", "baggage": "u=1"},
        "value": chunk("a", 0, [19923]),
    }
    bare = {"key": "b", "value": chunk("b", 0, [19923])}
    src = io.BytesIO(b"\n".join(json.dumps(x).encode() for x in (line, bare)))
    first, second = read_records(src, "f")
    assert first.headers == (("traceparent", TRACEPARENT), ("baggage", b"u=1"))
    assert second.headers is None


def test_pass_header_names_are_validated() -> None:
    assert pass_header_names(None) == frozenset()
    assert pass_header_names(" x-tenant , X-Route ") == {"x-tenant", "X-Route"}
    for bad in ("a,,b", "bad name", "derender-kind", "Derender-Seq", "a:b"):
        with pytest.raises(ValueError):
            pass_header_names(bad)


def _settings(argv: list[str], environ: dict[str, str]) -> Any:
    parser = argparse.ArgumentParser()
    add_flags(parser, environ=environ)
    return from_args(parser.parse_args(argv))


def test_pass_headers_flag_and_variable() -> None:
    assert _settings([], {}).pass_headers is None
    assert _settings(["--pass-headers", "x-tenant"], {}).pass_headers == "x-tenant"
    assert _settings([], {"DERENDER_PASS_HEADERS": "x-a,x-b"}).pass_headers == "x-a,x-b"
    with pytest.raises(SettingsError, match="derender-seq"):
        _settings(["--pass-headers", "x-a,derender-seq"], {})


def test_the_publisher_puts_each_requests_trace_context_on_its_records() -> None:
    from worker.tools.publisher import Publisher

    sent: list[tuple[str, list[tuple[str, bytes]]]] = []

    class Producer:  # (the seam: aiokafka's producer)
        async def send(self, topic: str, value: bytes, key: bytes, headers: Any) -> Any:
            sent.append((key.decode(), list(headers)))
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            done.set_result(None)
            return done

    async def main() -> None:
        pub = Publisher("unused:9092", headers={"x-tenant": "acme", "tracestate": "old=1"})
        await pub._producer.stop()  # (the real one, never started: closed, not leaked)
        pub._producer = Producer()  # type: ignore[assignment]
        pub.trace("a", TRACEPARENT.decode(), tracestate="engine=1")
        await pub.chunk("a", {"choices": [{"index": 0, "token_ids": [1]}]})
        await pub.chunk("b", {"choices": [{"index": 0, "token_ids": [1]}]})
        await pub.end("a")
        await pub.chunk("a", {"choices": [{"index": 0, "token_ids": [1]}]})  # (after its end)

    asyncio.run(main())
    traced = [("x-tenant", b"acme"), ("traceparent", TRACEPARENT), ("tracestate", b"engine=1")]
    plain = [("x-tenant", b"acme"), ("tracestate", b"old=1")]
    assert sent == [("a", traced), ("b", plain), ("a", traced), ("a", plain)]
