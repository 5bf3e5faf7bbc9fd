"""Optional OpenTelemetry spans (the `otel` extra), as the messaging conventions describe them.

Off unless the standard variables ask for it (`enabled`): an OTLP endpoint
(`OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) or an
`OTEL_TRACES_EXPORTER` other than `none`; `OTEL_SDK_DISABLED=true` wins. Off, nothing
here runs: the shell holds None and makes no span, header or allocation per record (the
input's trace headers still travel onto its outputs: `worker.observe.propagation`).

On, `run` makes per batch (OpenTelemetry semantic conventions, messaging, v1.44):
- `process <input topic>` (CONSUMER) around `loop.run_batch`, with a **link** to each
  distinct creation context (`traceparent`) among its records, not a parent: a batch
  holds records of many traces;
- `send <topic>` (PRODUCER) around the produce and its acks, one per distinct creation
  context among the records it sends (per destination topic), whose context replaces the
  records' `traceparent`/`tracestate`, so a consumer's spans continue the trace. Its
  parent is that creation context (the engine's span of the request), so one trace runs
  engine → worker → gateway; it links to the batch's process span. Records whose input
  had no (valid) trace context get one send span, a child of the process span.
`serve` makes a SERVER span per request, parented from its `traceparent`.

The provider is this module's own (not the global one): tests run several workers in a
process, and the worker must not change what a host application set globally.
"""

from __future__ import annotations

import atexit
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from itertools import chain
from typing import TYPE_CHECKING, Any, TypeVar, cast

from worker.constants import DLQ
from worker.failures import ConfigError
from worker.observe.propagation import TRACEPARENT, TRACESTATE
from worker.ports import Batch, OutRecord, Sink

if TYPE_CHECKING:  # (the extra may be missing: imported only when tracing is on)
    from opentelemetry.trace import Span, Tracer
    from starlette.types import ASGIApp, Receive, Scope, Send

    from worker.settings import Settings

log = logging.getLogger("derender.tracing")

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

SERVICE_NAME = "derender-worker"
# The control topic's output kind (--control-topic): its records go there.
CONTROL_KIND = "control"
# `messaging.system` for Kafka and every Kafka-protocol broker.
KAFKA = "kafka"
# Flushing the spans at exit may wait on the collector at most this long (the exporter's
# own timeout is 10 s: too long inside a pod's grace period).
FLUSH_TIMEOUT_MS = 3000

# Attribute names (semantic conventions: messaging, error, http).
SYSTEM = "messaging.system"
OPERATION = "messaging.operation.name"
OPERATION_TYPE = "messaging.operation.type"
DESTINATION = "messaging.destination.name"
PARTITION = "messaging.destination.partition.id"
OFFSET = "messaging.kafka.offset"
KEY = "messaging.kafka.message.key"
GROUP = "messaging.consumer.group.name"
COUNT = "messaging.batch.message_count"
ERROR_TYPE = "error.type"


class TracingUnavailable(ConfigError):
    """Tracing was asked for (OTEL_* set) and the `otel` extra is not installed."""


def enabled(environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER")
    if exporter is not None:
        return exporter.strip().lower() not in ("", "none")
    return bool(
        env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    )


def _exporter(env: Mapping[str, str]) -> Any:
    kind = (env.get("OTEL_TRACES_EXPORTER") or "otlp").split(",")[0].strip().lower()
    if kind == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if kind != "otlp":
        raise TracingUnavailable(f"OTEL_TRACES_EXPORTER={kind!r}: expected otlp or console")
    protocol = (
        env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    )
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found,unused-ignore]
                OTLPSpanExporter as Grpc,
            )
        except ImportError:
            raise TracingUnavailable(
                "OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs opentelemetry-exporter-otlp-proto-grpc"
            ) from None
        return Grpc()
    if protocol != "http/protobuf":
        raise TracingUnavailable(f"OTLP protocol {protocol!r}: expected http/protobuf or grpc")
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()  # (endpoint, headers, timeout: the OTEL_EXPORTER_OTLP_* vars)


class Tracing:
    """A tracer provider of our own, exporting in batches (`OTEL_BSP_*`), sampled as
    `OTEL_TRACES_SAMPLER` says (default: parent-based, always on)."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        try:
            from opentelemetry import trace
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
            from opentelemetry.trace.propagation.tracecontext import (
                TraceContextTextMapPropagator,
            )
        except ImportError:
            raise TracingUnavailable(
                "OTEL_* asks for traces but OpenTelemetry is not installed "
                "(pip install 'derender-worker[otel]')"
            ) from None
        # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES are read by Resource.create; our
        # name only where neither gave one (the SDK's default is "unknown_service").
        resource = Resource.create()
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            resource = resource.merge(Resource({"service.name": SERVICE_NAME}))
        self.provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        self.provider.add_span_processor(BatchSpanProcessor(_exporter(environ)))
        # The spans still queued are exported at exit (bounded): every command that
        # traces ends through here, however it ends.
        atexit.register(self.shutdown)
        self.tracer: Tracer = self.provider.get_tracer("derender-worker")
        self.trace = trace
        self.propagator = TraceContextTextMapPropagator()

    def shutdown(self) -> None:
        """Export what is left (bounded), then stop the exporter."""
        self.provider.force_flush(FLUSH_TIMEOUT_MS)
        self.provider.shutdown()

    # -- propagation ---------------------------------------------------------------

    def extract(self, headers: list[tuple[str, bytes]] | list[tuple[bytes, bytes]]) -> Any:
        """The creation context in W3C headers (an invalid `traceparent` gives a context
        without a valid span: W3C says to ignore it)."""
        carrier: dict[str, str] = {}
        for k, v in headers:
            name = k.decode("latin-1") if isinstance(k, bytes) else k
            if name in (TRACEPARENT, TRACESTATE):
                carrier[name] = v.decode("latin-1")
        return self.propagator.extract(carrier)

    def _valid(self, ctx: Any) -> Any:
        """The span context a propagated context holds, if valid, else None."""
        sc = self.trace.get_current_span(ctx).get_span_context()
        return sc if sc.is_valid else None

    def inject(self, span: Span) -> list[tuple[str, bytes]]:
        carrier: dict[str, str] = {}
        self.propagator.inject(carrier, self.trace.set_span_in_context(span))
        return [(k, v.encode()) for k, v in carrier.items()]

    # -- serve ---------------------------------------------------------------------

    def server_spans(self, app: ASGIApp) -> ASGIApp:
        return ServerSpans(app, self)


class WorkerTracing:
    """`run`'s spans: the process span around a batch, send spans in the sink."""

    def __init__(self, tracing: Tracing, settings: Settings) -> None:
        self.t = tracing
        self.input_topic = settings.input_topic
        self.group_id = settings.group_id
        self.topics = {DLQ: settings.dlq_topic}
        control = getattr(settings, "control_topic", None)
        if control:
            self.topics[CONTROL_KIND] = control
        self.output_topic = settings.output_topic
        # (traceparent, tracestate) → the parent Context they name, or None (`creation`)
        self._contexts: dict[tuple[bytes, bytes | None], Any] = {}

    def creation(self, traceparent: bytes, tracestate: bytes | None) -> Any:
        """The creation context these headers name, as a parent Context (None when the
        traceparent is invalid: W3C says to ignore it, and its tracestate with it).

        Parsed once per distinct pair, not per record or batch: a request's records all
        carry its one context, and the parse (a regex, a tracestate split) costs more
        than the rest of a span's bookkeeping."""
        key = (traceparent, tracestate)
        found = self._contexts.get(key, _UNSEEN)
        if found is _UNSEEN:
            t = self.t
            headers = [(TRACEPARENT, traceparent)]
            if tracestate is not None:
                headers.append((TRACESTATE, tracestate))
            ctx = t.extract(headers)
            found = ctx if t._valid(ctx) is not None else None
            if len(self._contexts) >= CONTEXT_CACHE_MAX:
                self._contexts.clear()
            self._contexts[key] = found
        return found

    async def process(self, batch: Batch, work: Awaitable[T]) -> T:
        """`work` (the batch's run) inside its `process <topic>` span. A failure of the
        tracing itself never fails the batch: it runs without the span (logged once)."""
        try:
            span = self._process_span(batch)
        except Exception as exc:
            _untraced(exc)
            return await work
        return await self._inside(span, work)

    def _process_span(self, batch: Batch) -> Span:
        from opentelemetry.trace import Link, SpanKind

        t = self.t
        links: dict[bytes, Link] = {}
        for r in batch.records:
            h = r.headers
            if not h:
                continue
            tp, ts = _trace_headers(h)
            if tp is None or tp in links:
                continue  # (one link per creation context: a request's records share one)
            creation = self.creation(tp, ts)
            if creation is not None:
                o = r.origin  # (topic, partition, offset) from Kafka; file:line in replay
                attrs: dict[str, str | int] | None = None
                if isinstance(o, tuple):
                    attrs = {PARTITION: str(o[1]), OFFSET: o[2]}
                links[tp] = Link(t._valid(creation), attrs)
        attributes: dict[str, Any] = {
            SYSTEM: KAFKA,
            OPERATION: "process",
            OPERATION_TYPE: "process",
            DESTINATION: self.input_topic,
            GROUP: self.group_id,
            COUNT: len(batch.records),
        }
        if len(batch.last) == 1:
            (tp0,) = batch.last
            partition = getattr(tp0, "partition", None)
            if partition is not None:
                attributes[PARTITION] = str(partition)
        return t.tracer.start_span(
            f"process {self.input_topic}",
            kind=SpanKind.CONSUMER,
            links=list(links.values()),
            attributes=attributes,
        )

    async def _inside(self, span: Span, work: Awaitable[T]) -> T:
        from opentelemetry import context
        from opentelemetry.trace import StatusCode

        t = self.t
        token = context.attach(t.trace.set_span_in_context(span))
        try:
            return await work
        except BaseException as exc:
            span.set_attribute(ERROR_TYPE, type(exc).__qualname__)
            span.set_status(StatusCode.ERROR, str(exc))
            raise
        finally:
            context.detach(token)
            span.end()

    def topic_of(self, rec: OutRecord) -> str:
        return self.topics.get(rec.kind, self.output_topic)


_UNSEEN = object()
_warned: list[bool] = []


def _untraced(exc: Exception) -> None:
    """Tracing failed (a bug, or the SDK): the worker goes on without it. Logged once a
    process, so a persistent failure cannot flood the log."""
    if not _warned:
        _warned.append(True)
        log.warning("tracing failed, going on without it: %s: %s", type(exc).__name__, exc)


# Parsed creation contexts kept (a few hundred bytes each): about the requests in flight.
CONTEXT_CACHE_MAX = 65_536


def _trace_headers(headers: Any) -> tuple[bytes | None, bytes | None]:
    tp = ts = None
    for k, v in headers:
        if k == TRACEPARENT:
            tp = v
        elif k == TRACESTATE:
            ts = v
    return tp, ts


class TracingSink:
    """A `Sink` that gives every record a send span's context before it is produced."""

    def __init__(self, inner: Sink, tracing: WorkerTracing) -> None:
        self.inner = inner
        self.tracing = tracing

    def __getattr__(self, name: str) -> Any:  # (the rest of a Transactions' interface)
        return getattr(self.inner, name)

    async def send(self, outputs: list[OutRecord], dead_letters: list[OutRecord]) -> None:
        from opentelemetry.trace import StatusCode

        spans: list[Span] = []
        try:
            self._send_spans(outputs, dead_letters, spans)
        except Exception as exc:  # (the tracing's own failure: the records go as they are)
            _untraced(exc)
        try:
            await self.inner.send(outputs, dead_letters)
        except BaseException as exc:
            for span in spans:
                span.set_attribute(ERROR_TYPE, type(exc).__qualname__)
                span.set_status(StatusCode.ERROR, str(exc))
            raise
        finally:
            for span in spans:
                span.end()

    def _send_spans(
        self, outputs: list[OutRecord], dead_letters: list[OutRecord], spans: list[Span]
    ) -> None:
        """A send span per destination and creation context; its context into the
        records' headers. Started spans are appended to `spans` (ended by `send`)."""
        from opentelemetry.trace import Link, SpanKind

        w = self.tracing
        t = w.t
        surrounding = t.trace.get_current_span()  # the batch's process span
        around = surrounding.get_span_context()
        under_process = t.trace.set_span_in_context(surrounding)
        # (destination, the input's traceparent and tracestate) → its records
        groups: dict[tuple[str, bytes | None, bytes | None], list[OutRecord]] = {}
        for rec in chain(outputs, dead_letters):
            tp, ts = _trace_headers(rec.headers)
            group = groups.get((w.topic_of(rec), tp, ts))
            if group is None:
                group = groups[(w.topic_of(rec), tp, ts)] = []
            group.append(rec)
        for (topic, tp, ts), records in groups.items():
            creation = w.creation(tp, ts) if tp is not None else None
            attributes: dict[str, Any] = {
                SYSTEM: KAFKA,
                OPERATION: "send",
                OPERATION_TYPE: "send",
                DESTINATION: topic,
                COUNT: len(records),
            }
            key = records[0].key
            if all(r.key == key for r in records):
                attributes[KEY] = key
            span = t.tracer.start_span(
                f"send {topic}",
                context=under_process if creation is None else creation,
                kind=SpanKind.PRODUCER,
                links=[Link(around)] if creation is not None and around.is_valid else None,
                attributes=attributes,
            )
            spans.append(span)
            injected = t.inject(span)
            # The send span's context replaces the input's (W3C: one traceparent per hop);
            # baggage and --pass-headers stay as they came.
            for rec in records:
                rec.headers[:] = [
                    h for h in rec.headers if h[0] != TRACEPARENT and h[0] != TRACESTATE
                ] + injected


class ServerSpans:
    """ASGI middleware: a SERVER span per HTTP request, parented from its `traceparent`
    (HTTP semantic conventions: name `<method> <route>`, 5xx is an error)."""

    def __init__(self, app: ASGIApp, tracing: Tracing) -> None:
        self.app = app
        self.t = tracing

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from opentelemetry import context
        from opentelemetry.trace import SpanKind, StatusCode

        t = self.t
        method = scope["method"]
        path = scope["path"]
        # A route, not any path: span names must stay few (an unknown path is `<method>`).
        route = path if path in KNOWN_ROUTES else None
        attributes: dict[str, Any] = {
            "http.request.method": method,
            "url.path": path,
            "url.scheme": scope.get("scheme", "http"),
        }
        if route is not None:
            attributes["http.route"] = route
        span = t.tracer.start_span(
            f"{method} {route}" if route else method,
            context=t.extract(scope["headers"]),
            kind=SpanKind.SERVER,
            attributes=attributes,
        )
        status = 0

        async def send_status(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                span.set_attribute("http.response.status_code", status)
            await send(message)

        token = context.attach(t.trace.set_span_in_context(span))
        try:
            await self.app(scope, receive, send_status)
            if status >= 500:
                span.set_attribute(ERROR_TYPE, str(status))
                span.set_status(StatusCode.ERROR)
        except BaseException as exc:
            span.set_attribute(ERROR_TYPE, type(exc).__qualname__)
            span.set_status(StatusCode.ERROR, str(exc))
            raise
        finally:
            context.detach(token)
            span.end()


# serve's routes (worker/serve/app.py), for span names.
KNOWN_ROUTES = frozenset(
    (
        "/v1/chat/completions/derender",
        "/v1/completions/derender",
        "/v1/chat/completions",
        "/v1/completions",
        "/v1/models",
        "/health",
        "/metrics",
    )
)


def setup(environ: Mapping[str, str] | None = None) -> Tracing | None:
    """Tracing as the OTEL_* variables ask for it; None when off. TracingUnavailable
    when asked for without the extra (or with an exporter it cannot make)."""
    env = os.environ if environ is None else environ
    return Tracing(env) if enabled(env) else None


def traced_run_batch(
    settings: Settings, run_batch: F, environ: Mapping[str, str] | None = None
) -> F:
    """`run_batch` itself when tracing is off (nothing else changes), else `run_batch` inside
    its process span, with a sink that makes the send spans. Raises TracingUnavailable
    (a ConfigError: exit 2) when OTEL_* asks for tracing that cannot be had."""
    t = setup(environ)
    if t is None:
        return run_batch
    w = WorkerTracing(t, settings)
    sinks: dict[int, tuple[Sink, TracingSink]] = {}

    async def traced(batch: Batch, **kw: Any) -> Any:
        inner = kw["sink"]
        held = sinks.get(id(inner))
        if held is None or held[0] is not inner:  # (new clients after a rebuild)
            sinks.clear()
            held = sinks[id(inner)] = (inner, TracingSink(inner, w))
        kw["sink"] = held[1]
        return await w.process(batch, run_batch(batch, **kw))

    return cast(F, traced)
