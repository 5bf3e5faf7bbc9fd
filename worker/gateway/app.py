"""The gateway's routes, on the project's HTTP stack (worker/observe/http_server.py):

    POST /v1/chat/completions    (stream true: SSE from the output topic; false: the whole answer)
    POST /v1/completions         (the same for text completions, one prompt per request)
    POST /v1/responses           (the OpenAI Responses API: SSE `event:` + `data:`, or the response)
    POST /v1/messages            (the Anthropic Messages API: the same, or the message)
    GET  /v1/models              (the engine's, passed through)
    GET  /health                 (200 while the output topic is being read, else 503)
    GET  /metrics                (Prometheus)

As vLLM's server: `--api-key` guards the `/v1` paths, a body that is not
`application/json` is a 400, errors are `{"error": {"message", "type", "param", "code"}}`
(Messages: Anthropic's `{"type": "error", "error": {"type", "message"}}`; dialects.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json

from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from worker.gateway import metrics as outcome
from worker.gateway.dialects import DIALECTS, MESSAGES, RESPONSES
from worker.gateway.engine import EngineUnreachable
from worker.gateway.errors import error_body
from worker.gateway.exchange import Exchange, Services
from worker.gateway.requests import CHAT, COMPLETION
from worker.serve.app import ApiKey, Disconnected, TooLarge, read_body
from worker.serve.app import _http_error as vllm_http_error

CHAT_PATH = "/v1/chat/completions"
COMPLETION_PATH = "/v1/completions"
RESPONSES_PATH = "/v1/responses"
MESSAGES_PATH = "/v1/messages"
TRACE_HEADERS = (b"traceparent", b"tracestate", b"baggage")


class Endpoint:
    """POST /v1/chat/completions, /v1/completions, /v1/responses or /v1/messages, as a
    plain ASGI app."""

    def __init__(self, api: str, services: Services, max_body_bytes: int) -> None:
        self.api = api
        self.s = services
        self.max_body_bytes = max_body_bytes

    async def _refuse(self, send: Send, status: int, message: str) -> None:
        body = DIALECTS[self.api].error_body(message, status)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
        self.s.metrics.requests.labels(self.api, outcome.BAD_REQUEST).inc()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope["headers"])
        ctype = headers.get(b"content-type", b"").split(b";", 1)[0].strip().lower()
        if ctype != b"application/json":
            await self._refuse(
                send, 400, "Unsupported Media Type: Only 'application/json' is allowed"
            )
            return
        try:
            raw = await read_body(receive, self.max_body_bytes)
        except TooLarge:
            await self._refuse(send, 413, f"request body exceeds {self.max_body_bytes} bytes")
            return
        except Disconnected:
            self.s.metrics.requests.labels(self.api, outcome.DISCONNECTED).inc()
            return
        try:
            body = json.loads(raw)
        except ValueError as exc:
            await self._refuse(send, 400, f"the body is not JSON: {exc}")
            return
        if not isinstance(body, dict):
            await self._refuse(send, 400, "the body must be a JSON object")
            return
        trace = {k.decode(): headers[k].decode("latin-1") for k in TRACE_HEADERS if k in headers}
        if self.s.tracing is not None:
            # The request's SERVER span (the current one) parents the records' spans.
            self.s.tracing.propagator.inject(trace)
        disconnected = asyncio.Event()
        watcher = asyncio.create_task(_watch(receive, disconnected))
        me = asyncio.current_task()
        if me is not None:
            self.s.active.add(me)
        try:
            result = await Exchange(self.s, self.api, raw, body, trace, send).run(disconnected)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            self.s.active.discard(me)
        self.s.metrics.requests.labels(self.api, result).inc()


async def _watch(receive: Receive, disconnected: asyncio.Event) -> None:
    """Sets `disconnected` when the client goes away (the body is read by then)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            disconnected.set()
            return


def build_app(services: Services, *, api_key: str | None = None, max_body_bytes: int) -> ASGIApp:
    async def models(request: Request) -> Response:
        try:
            answer = await services.engine.models()
        except EngineUnreachable as exc:
            return Response(
                error_body(f"the engine did not answer: {exc}", 502),
                502,
                media_type="application/json",
            )
        return Response(answer.body, answer.status, media_type=answer.content_type)

    async def health(request: Request) -> Response:
        return Response(b"", 200 if services.replies.healthy else 503)

    async def exposition(request: Request) -> Response:
        return Response(generate_latest(services.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    app = Starlette(
        routes=[
            Route(CHAT_PATH, Endpoint(CHAT, services, max_body_bytes), methods=["POST"]),
            Route(
                COMPLETION_PATH, Endpoint(COMPLETION, services, max_body_bytes), methods=["POST"]
            ),
            Route(RESPONSES_PATH, Endpoint(RESPONSES, services, max_body_bytes), methods=["POST"]),
            Route(MESSAGES_PATH, Endpoint(MESSAGES, services, max_body_bytes), methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
            Route("/metrics", exposition, methods=["GET"]),
        ],
        # (An unknown path or method: vLLM's JSON 404 / 405, as `serve` answers them.)
        exception_handlers={HTTPException: vllm_http_error},
    )
    return ApiKey(app, api_key) if api_key else app
