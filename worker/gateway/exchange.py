"""One client request from end to end: render, generate into records, answer from outputs.

Two tasks share a request's `Reply` mailbox: the engine side (`_generate`) publishes a
record per generate event and notes a broken-off generation there; the reader of the
output topic puts the request's outputs there; a watcher notes the client leaving. The
answer side takes them in order, so every wait is one bounded wait on the mailbox:

- no output for `reply_timeout_s` while the worker holds records of the request it has
  not answered: the client gets a 504 (or an error event, once streaming) and the engine
  request is aborted;
- the engine breaks off (an error event, a dropped stream): an `abort` record closes the
  request in the worker; the client gets every output up to the break, then the error;
- the client leaves: the generate stream is closed, the engine's abort endpoint called
  and an `abort` record published;
- with `--control-topic`, the worker's control record for a streamed request (its answer
  is over: a stop string fired, it failed): the engine request is aborted and its stream
  closed at once, and the `end` is still published, so the worker closes the request
  normally.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from worker.gateway import metrics as outcome
from worker.gateway.control import GatewayControl
from worker.gateway.dialects import DIALECTS, Dialect
from worker.gateway.engine import Engine, EngineUnreachable
from worker.gateway.errors import Refused
from worker.gateway.metrics import GatewayMetrics
from worker.gateway.replies import Replies, Reply
from worker.gateway.requests import (
    WholeOutput,
    abort_record,
    context,
    generate_request,
    new_request_id,
    one_rendered,
)
from worker.tools.publisher import Publisher
from worker.wire.control import ControlRecord
from worker.wire.output import Output

log = logging.getLogger("derender.gateway")

# Without a deadline (nothing unanswered), the answer side still looks up this often.
IDLE_POLL_S = 1.0
Events = AsyncGenerator[dict[str, Any], None]
_SSE = b"text/event-stream; charset=utf-8"
_DONE = b"data: [DONE]\n\n"


@dataclass
class Services:
    """What every request shares."""

    engine: Engine
    publisher: Publisher
    replies: Replies
    metrics: GatewayMetrics
    reply_timeout_s: float
    tracing: Any = None  # worker.observe.tracing.Tracing when OTEL_* turns it on
    # The requests being answered: at a stop, they finish closing (their abort records
    # sent) before the publisher closes.
    active: set[asyncio.Task[Any]] = field(default_factory=set)
    control: GatewayControl | None = None  # --control-topic


class _ClientGone:
    pass


CLIENT_GONE = _ClientGone()


@dataclass(frozen=True)
class EngineStopped:
    """The generation ended without `[DONE]`: `after_seq` is the seq of the abort record
    (None: nothing was published, the client gets the error at once)."""

    status: int
    body: bytes
    content_type: str
    after_seq: int | None
    refused: bool = False  # the engine's own answer to the generate call


class Exchange:
    def __init__(
        self,
        services: Services,
        api: str,
        raw: bytes,
        body: dict[str, Any],
        trace: dict[str, str],
        send: Any,
    ) -> None:
        self.s = services
        self.api = api
        self.dialect = DIALECTS[api]
        self.raw = raw
        self.body = body
        self.trace = trace
        self.send = send
        self.stream = body.get("stream") is True
        self.request_id = new_request_id(api)
        self.created = int(time.time())
        self.started = False  # the response's status line is sent
        self.stop_reason = "gateway stopped"
        self.first_published: float | None = None
        self.unanswered_since: float | None = None  # a record the worker has not answered
        self.last_published = -1
        self.answered_seq = -1  # the highest seq the worker's outputs answered
        self.first_output = True
        # The control topic's stop: the record, and the engine abort it started.
        self.halted: ControlRecord | None = None
        self.halting: asyncio.Task[bool] | None = None
        self.reading = False  # the engine task waits for the next generate event
        self.engine_task: asyncio.Task[None] | None = None
        self.tokens_out = 0  # completion tokens published, every choice
        self.sending: asyncio.Future[None] | None = None  # the last record's send
        self.events_sent = 0  # the API's events written (the next `sequence_number`)

    async def run(self, disconnected: asyncio.Event) -> str:
        """Answer the client; returns the outcome (metrics.OUTCOMES)."""
        try:
            answer = await self.s.engine.render(self.api, self.raw, self.trace)
            if answer.status != 200:
                raise Refused(answer.status, answer.body, answer.content_type)
            rendered = one_rendered(self.api, answer.json())
        except Refused as r:
            await self._whole(r.status, self.dialect.reshaped(r.body), r.content_type)
            return outcome.REFUSED
        except EngineUnreachable as exc:
            message = f"the engine did not answer: {exc}"
            await self._whole(502, self.dialect.error_body(message, 502))
            return outcome.ENGINE_FAILED
        except ValueError:
            await self._whole(502, self.dialect.error_body("the render answer is not JSON", 502))
            return outcome.ENGINE_FAILED
        reply = self.s.replies.open(self.request_id)
        try:
            ctx = context(self.api, self.body, rendered, self.created, reply.partition)
            if self.trace.get("traceparent"):
                self.s.publisher.trace(
                    self.request_id,
                    self.trace["traceparent"],
                    self.trace.get("tracestate"),
                    self.trace.get("baggage"),
                )
            request = generate_request(self.api, rendered, self.body, self.request_id)
            if self.stream and self.s.control is not None:
                self.s.control.watch(self.request_id, self._halt)
            engine = self.engine_task = asyncio.create_task(self._generate(reply, request, ctx))
            watch = asyncio.create_task(_note_when_set(disconnected, reply))
            try:
                return await self._answer(reply)
            finally:
                watch.cancel()
                if not engine.done():
                    engine.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await engine
        finally:
            if self.s.control is not None:
                self.s.control.unwatch(self.request_id)
            self.s.replies.close(self.request_id)
            self.s.publisher.forget(self.request_id)

    # -- the engine side -------------------------------------------------------------------

    async def _generate(self, reply: Reply, request: dict[str, Any], ctx: dict[str, Any]) -> None:
        pub = self.s.publisher
        rid = self.request_id
        whole = None if self.stream else WholeOutput(rid)
        try:
            async with self.s.engine.generate(request, self.trace) as g:
                if g.status != 200:
                    refusal = await g.error()
                    reply.put(
                        EngineStopped(
                            refusal.status, refusal.body, refusal.content_type, None, True
                        )
                    )
                    return
                first = True
                events = g.events()
                while (event := await self._next_event(events)) is not None:
                    if event.get("error") is not None:
                        if first:  # (vLLM checks some parameters only once streaming)
                            reply.put(_refusal(event["error"], self.stream, self.dialect))
                            await events.aclose()
                            return
                        raise _EngineError(event)
                    first = False
                    if whole is not None:
                        whole.add(event)
                    else:
                        await self._publish({"generate_chunk": event}, ctx)
                        self._published()
                        self.tokens_out += _tokens(event)
                    if self.halted is not None:
                        break
                await events.aclose()
            if self.halting is not None:
                await self._halted()
            if whole is not None:
                await self._publish(
                    {"type": "response", "generate_response": whole.response()}, ctx
                )
            else:
                await self._publish({"type": "end"}, ctx)
            self._published()
        except EngineUnreachable as exc:
            broke_off = self.dialect.error_body(f"the engine broke off: {exc}", 502)
            await self._broke(reply, ctx, str(exc), broke_off)
        except _EngineError as exc:
            body = json.dumps({"error": exc.error}, ensure_ascii=False).encode()
            await self._broke(reply, ctx, str(exc), body)
        except Exception as exc:  # (the broker failing a send: the client is told at once)
            log.exception("%s: cannot publish", rid)
            message = f"the gateway could not publish the request: {exc}"
            body = self.dialect.error_body(message, 500)
            reply.put(EngineStopped(500, body, "application/json", None))
            await self.s.engine.abort(rid)
        except asyncio.CancelledError:
            # (The stream is closed by now: the engine stops; the abort makes sure.)
            await self.s.engine.abort(rid)
            if pub.next_seq(rid) > 0:
                if self.sending is not None:  # (the record cut off by the cancel, if any)
                    with contextlib.suppress(Exception):
                        await self.sending
                with contextlib.suppress(Exception):
                    await self._publish(abort_record(self.stop_reason), ctx)
            raise

    async def _next_event(self, events: Events) -> dict[str, Any] | None:
        """The next generate event; None at `[DONE]` or when a control record stopped the
        request (only this wait is cancelled by one: never a publish, whose seq is taken)."""
        if self.halted is not None:
            return None
        self.reading = True
        try:
            return await anext(events)
        except StopAsyncIteration:
            return None
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if self.halted is None or me is None or me.uncancel() > 0:
                raise  # (cancelled from outside too: the request is being given up)
            return None
        finally:
            self.reading = False

    def _halt(self, record: ControlRecord) -> None:
        """The worker's control record for this request: abort the engine request now and
        stop reading its stream; `_generate` then sends the `end`."""
        if self.halted is not None or self.engine_task is None or self.engine_task.done():
            return
        self.halted = record
        self.s.metrics.control_stops.labels(record.reason).inc()
        self.halting = asyncio.create_task(self.s.engine.abort(self.request_id))
        if self.reading:
            self.engine_task.cancel()

    async def _halted(self) -> None:
        """After a control stop (the generate stream closed): the abort call's answer, and
        the tokens the engine sent past the worker's stop, counted."""
        assert self.halted is not None and self.halting is not None
        late = max(0, self.tokens_out - self.halted.output_tokens)
        self.s.metrics.control_late_tokens.inc(late)
        log.info(
            "%s: stopped by the worker (%s at seq %d); %d tokens past it",
            self.request_id,
            self.halted.reason,
            self.halted.seq,
            late,
        )
        await self.halting

    async def _publish(self, record: dict[str, Any], ctx: dict[str, Any]) -> None:
        """One record of the request: seq 0 with the context, later ones with the reply
        partition again (the worker answers a record whose request it lost there too)."""
        rec = {"request_id": self.request_id, **record}
        if self.s.publisher.next_seq(self.request_id) == 0:
            rec.update(ctx)
        elif "reply_partition" in ctx:
            rec["reply_partition"] = ctx["reply_partition"]
        # Shielded: a request cancelled mid-send still sends the record whose seq it took
        # (the `abort` that follows waits for it), else the worker sees a sequence gap.
        self.sending = asyncio.ensure_future(self.s.publisher.record(rec))
        await asyncio.shield(self.sending)

    def _published(self) -> None:
        now = time.monotonic()
        self.last_published = self.s.publisher.next_seq(self.request_id) - 1
        if self.first_published is None:
            self.first_published = now
        if self.unanswered_since is None:
            self.unanswered_since = now

    async def _broke(self, reply: Reply, ctx: dict[str, Any], reason: str, body: bytes) -> None:
        log.warning("%s: %s", self.request_id, reason)
        pub = self.s.publisher
        after: int | None = None
        if pub.next_seq(self.request_id) > 0:
            after = pub.next_seq(self.request_id)
            await self._publish(abort_record(reason), ctx)
            self._published()
        reply.put(EngineStopped(502, body, "application/json", after))
        await self.s.engine.abort(self.request_id)

    # -- the answer side -------------------------------------------------------------------

    async def _answer(self, reply: Reply) -> str:
        limit = self.s.reply_timeout_s
        broken: EngineStopped | None = None
        while True:
            since = self.unanswered_since
            wait = IDLE_POLL_S if since is None else since + limit - time.monotonic()
            try:
                item = await reply.get(max(wait, 0.0))
            except TimeoutError:
                if since is not None and since == self.unanswered_since:
                    self.stop_reason = "reply timeout"
                    message = f"no output from the worker for {limit:g} s (--reply-timeout-s)"
                    log.warning("%s: %s; %s", self.request_id, message, self._progress())
                    await self._fail(504, self.dialect.error_body(message, 504))
                    return outcome.TIMEOUT
                continue
            if item is CLIENT_GONE:
                self.stop_reason = "client disconnected"
                return outcome.DISCONNECTED
            if isinstance(item, EngineStopped):
                if item.after_seq is None:
                    await self._fail(item.status, item.body, item.content_type)
                    return outcome.REFUSED if item.refused else outcome.ENGINE_FAILED
                broken = item  # (the outputs before the break first)
                continue
            assert isinstance(item, Output)
            self._answered(item)
            if broken is not None and item.seq >= (broken.after_seq or 0):
                await self._fail(broken.status, broken.body, broken.content_type)
                return outcome.ENGINE_FAILED
            if not self.stream:
                if item.kind in ("response", "error"):
                    await self._whole(*_whole_answer(item, self.dialect))
                    return outcome.OK
                continue
            if not self.started:
                await self._start_stream()
            await self._forward(item)
            if item.end:
                await self._write(b"", more=False)
                return outcome.OK

    def _progress(self) -> str:
        """How far the worker got: what an operator needs to tell a fleet that is down
        (nothing answered) from one that lags (answers stopped midway)."""
        published = self.last_published + 1
        if self.answered_seq < 0:
            return f"nothing answered of {published} records published"
        return f"answered up to seq {self.answered_seq} of {published} records published"

    def _answered(self, out: Output) -> None:
        now = time.monotonic()
        self.answered_seq = max(self.answered_seq, out.seq)
        if self.first_output and self.first_published is not None:
            self.first_output = False
            self.s.metrics.reply_wait.observe(now - self.first_published)
        # Progress: the clock restarts, or stops when every record is answered.
        self.unanswered_since = None if out.seq >= self.last_published else now

    async def _fail(self, status: int, body: bytes, content_type: str = "") -> None:
        """The error to the client: an answer of its own, or once streaming, the API's
        error event (chat and completions: the error and `[DONE]`, as vLLM ends a stream
        that failed)."""
        if not self.started:
            await self._whole(status, self.dialect.reshaped(body), content_type)
            return
        if not self.dialect.events and body.startswith(b"{"):
            await self._write(b"data: " + body + b"\n\n" + _DONE, more=False)
            return
        message = _message(body)
        await self._write(self.dialect.stream_error(message, status, self.events_sent), more=False)

    async def _forward(self, item: Output) -> None:
        """One output to the streaming client, as its API's SSE (no `[DONE]` line for an
        API without one: the stream just ends)."""
        dialect = self.dialect
        if not dialect.events:
            await self._write(item.sse())
            return
        if item.done:
            return
        if item.kind == "error" and not item.value.startswith(b'{"type":'):
            # (an error of ours, not the API's event: said as the API says errors)
            frame = dialect.stream_error(_message(item.value), 400, self.events_sent)
        else:
            frame = dialect.sse(item.value)
        self.events_sent += 1
        await self._write(frame)

    async def _whole(self, status: int, body: bytes, content_type: str = "") -> None:
        self.started = True
        await self.send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", (content_type or "application/json").encode("latin-1")),
                    (b"content-length", str(len(body)).encode()),
                    (b"x-request-id", self.request_id.encode()),
                ],
            }
        )
        await self.send({"type": "http.response.body", "body": body})

    async def _start_stream(self) -> None:
        self.started = True
        await self.send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", _SSE),
                    (b"cache-control", b"no-cache"),
                    (b"x-request-id", self.request_id.encode()),
                ],
            }
        )

    async def _write(self, data: bytes, more: bool = True) -> None:
        await self.send({"type": "http.response.body", "body": data, "more_body": more})


class _EngineError(Exception):
    """An error event in the generate stream."""

    def __init__(self, event: dict[str, Any]) -> None:
        error = event["error"]
        self.error = error if isinstance(error, dict) else {"message": str(error)}
        super().__init__(f"the engine failed: {self.error.get('message', error)}")


def _tokens(event: dict[str, Any]) -> int:
    return sum(len(c.get("token_ids") or []) for c in event.get("choices") or [])


def _refusal(error: Any, stream: bool, dialect: Dialect) -> EngineStopped:
    """An error as the generate stream's first event: the engine refused the request. The
    client gets what vLLM's own server answers: that event in a chat or completion
    stream, else the error with its code as the status (in the API's shape)."""
    body = json.dumps({"error": error}, ensure_ascii=False).encode()
    if stream and not dialect.events:
        return EngineStopped(200, b"data: " + body + b"\n\n" + _DONE, _SSE.decode(), None, True)
    code = error.get("code") if isinstance(error, dict) else None
    status = code if isinstance(code, int) and 400 <= code < 600 else 400
    if dialect.events:
        message = error.get("message") if isinstance(error, dict) else None
        body = dialect.error_body(str(message or error), status)
    return EngineStopped(status, body, "application/json", None, True)


def _whole_answer(out: Output, dialect: Dialect) -> tuple[int, bytes, str]:
    """A whole request's answer: the response, or the worker's error with its status."""
    if out.kind == "response":
        return 200, out.value, "application/json"
    return dialect.status_of(out.value), out.value, "application/json"


def _message(body: bytes) -> str:
    """The message of an error body (ours, vLLM's or Anthropic's), else the body."""
    try:
        error = json.loads(body)["error"]
        return str(error["message"]) if isinstance(error, dict) else str(error)
    except (ValueError, KeyError, TypeError):
        return body.decode("utf-8", "replace")


async def _note_when_set(event: asyncio.Event, reply: Reply) -> None:
    await event.wait()
    reply.put(CLIENT_GONE)
