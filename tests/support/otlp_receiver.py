"""A real OTLP/HTTP trace receiver for the tests: what the exporter sends, decoded.

It listens on a free local port for `POST /v1/traces` (the path the OTLP/HTTP exporter
appends to OTEL_EXPORTER_OTLP_ENDPOINT), decodes each body with the OTLP protobuf types
(`ExportTraceServiceRequest`, from opentelemetry-proto) exactly as a collector would, and
answers an empty `ExportTraceServiceResponse`. No part of the SDK is stubbed: the spans
went through the batch processor, the protobuf encoder and HTTP.
"""

from __future__ import annotations

import gzip
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

# OTLP's Span.SpanKind values.
KINDS = {1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}


def _value(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    return None if which is None else getattr(v, which)


def _attrs(kvs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in kvs}


@dataclass
class Link:
    trace_id: str
    span_id: str
    attributes: dict[str, Any]


@dataclass
class Span:
    name: str
    kind: str
    trace_id: str  # 32 hex digits
    span_id: str  # 16 hex digits
    parent_span_id: str  # "" for a root
    attributes: dict[str, Any]
    links: list[Link]
    status_code: int  # 0 unset, 1 ok, 2 error
    service: str


@dataclass
class Receiver:
    url: str = ""
    spans: list[Span] = field(default_factory=list)
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, body: bytes) -> None:
        req = ExportTraceServiceRequest.FromString(body)
        got = []
        for rs in req.resource_spans:
            service = str(_attrs(rs.resource.attributes).get("service.name", ""))
            for ss in rs.scope_spans:
                for s in ss.spans:
                    got.append(
                        Span(
                            s.name,
                            KINDS.get(s.kind, str(s.kind)),
                            s.trace_id.hex(),
                            s.span_id.hex(),
                            s.parent_span_id.hex(),
                            _attrs(s.attributes),
                            [
                                Link(lk.trace_id.hex(), lk.span_id.hex(), _attrs(lk.attributes))
                                for lk in s.links
                            ],
                            s.status.code,
                            service,
                        )
                    )
        with self.lock:
            self.requests += 1
            self.spans += got

    def wait_for(self, done: Callable[[list[Span]], bool], timeout_s: float = 30) -> list[Span]:
        """The spans received, once `done` holds for them (AssertionError at the timeout)."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self.lock:
                spans = list(self.spans)
            if done(spans):
                return spans
            if time.monotonic() > deadline:
                names = sorted({s.name for s in spans})
                raise AssertionError(f"spans never complete: {len(spans)} received ({names})")
            time.sleep(0.05)


@contextmanager
def otlp_receiver() -> Iterator[Receiver]:
    receiver = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            encoding = self.headers.get("Content-Encoding", "")
            if encoding == "gzip":
                body = gzip.decompress(body)
            elif encoding == "deflate":
                body = zlib.decompress(body)
            if self.path != "/v1/traces":
                self.send_response(404)
                self.end_headers()
                return
            receiver.add(body)
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def otel_env(receiver: Receiver, service: str = "derender-test") -> dict[str, str]:
    """The standard variables that turn tracing on, exporting to `receiver` quickly."""
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_SERVICE_NAME": service,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
