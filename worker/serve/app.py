"""`derender-worker serve`: vLLM 0.33's derender endpoints over HTTP, from the same core.

    POST /v1/chat/completions/derender   (stream false: a chat.completion; true: one chunk)
    POST /v1/completions/derender        (the same for text_completion)
    POST /v1/responses/derender          (ours: the OpenAI Responses API's events / response)
    POST /v1/messages/derender           (ours: the Anthropic Messages API's events / message)
    GET  /v1/models                      (the registry's models, as vLLM lists them)
    GET  /health                         (200, empty: there is no engine to be down)
    GET  /metrics                        (Prometheus)

The stack is `http_server` (uvicorn with httptools, on uvloop) and Starlette, the pair
vLLM itself serves on, minus FastAPI: the derender endpoints are plain ASGI handlers that
read the body (bounded) and hand it to `driver.Driver`, whose msgspec decoding replaces
pydantic's. When nothing wraps the app (no API key, no tracing), serve's protocol answers
the derender POSTs itself, without the ASGI layer (`http_protocol`, protocol.py), through
the same endpoint methods (`refusal`, `respond`). What vLLM's server does around them
is kept: the API key guards `/v1` paths (401 `{"error": "Unauthorized"}`, `/health` and
`/metrics` open), a body that is not `application/json` is a 400, an unknown path or
method is vLLM's JSON 404 / 405, and errors are vLLM's `{"error": {"message", "type",
"param", "code"}}`. Beyond vLLM: a body larger than `--max-body-bytes` is a 413 before it
is read.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from http import HTTPStatus

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from worker.core.model import Registry
from worker.observe.metrics import _BYTES, _SECONDS, BatchHistogram
from worker.serve import wire
from worker.serve.answers import Answer, error
from worker.serve.driver import Driver
from worker.serve.protocol import OneWriteProtocol, with_fast_lane

log = logging.getLogger("derender.serve")

CHAT_PATH = "/v1/chat/completions/derender"
COMPLETION_PATH = "/v1/completions/derender"
RESPONSES_PATH = "/v1/responses/derender"
MESSAGES_PATH = "/v1/messages/derender"
# The paths vLLM's API key guards (its AuthenticationMiddleware's prefixes).
GUARDED_PREFIX = ("/v1", "/v2", "/inference", "/cohere")
_JSON = b"application/json"
_UNAUTHORIZED = b'{"error":"Unauthorized"}'


class ServeMetrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.requests = Counter(
            "derender_http_requests",
            "derender requests by endpoint and status",
            ["endpoint", "status"],
            registry=r,
        )
        self.tokens = Counter("derender_tokens", "generated token ids consumed", registry=r)
        self.seconds = BatchHistogram(
            "derender_http_request_seconds", "seconds from a body read to its answer", _SECONDS, r
        )
        self.state_bytes = BatchHistogram(
            "derender_state_bytes", "size of each stream_state's request state", _BYTES, r
        )
        # Counts since the last scrape, added to the Counters by `flush` (a prometheus
        # Counter's inc takes a lock: two a POST were ~2 % of a 1-token POST's app CPU).
        self._answered: dict[tuple[str, int], int] = {}
        self._tokens = 0

    def answered(self, endpoint: str, status: int, seconds: float, tokens: int = 0) -> None:
        key = (endpoint, status)
        self._answered[key] = self._answered.get(key, 0) + 1
        self._tokens += tokens
        self.seconds.observe(seconds)

    def flush(self) -> None:
        """The counts so far into the Counters (before each exposition)."""
        answered, self._answered = self._answered, {}
        for (endpoint, status), n in answered.items():
            self.requests.labels(endpoint, str(status)).inc(n)
        if self._tokens:
            self.tokens.inc(self._tokens)
            self._tokens = 0


async def _send(send: Send, status: int, body: bytes, ctype: bytes = _JSON) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", ctype), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


class TooLarge(Exception):
    pass


class Disconnected(Exception):
    pass


async def read_body(receive: Receive, limit: int) -> bytes:
    """The request body, at most `limit` bytes (TooLarge past it; Disconnected when the
    client went away before sending it all)."""
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise Disconnected
        chunk = message.get("body", b"")
        if chunk:
            size += len(chunk)
            if size > limit:
                raise TooLarge
            parts.append(chunk)
        if not message.get("more_body", False):
            return parts[0] if len(parts) == 1 else b"".join(parts)


class DerenderEndpoint:
    """A derender endpoint as a plain ASGI app: bounded body in, the driver's answer out."""

    def __init__(
        self,
        name: str,
        handle: Callable[[bytes], Answer],
        driver: Driver,
        metrics: ServeMetrics,
        max_body_bytes: int,
    ) -> None:
        self.name = name
        self.handle = handle
        self.driver = driver
        self.metrics = metrics
        self.max_body_bytes = max_body_bytes

    def refusal(self, headers: Iterable[tuple[bytes, bytes]]) -> Answer | None:
        """The answer due before the body is read: a 400 for a body that is not JSON
        (vLLM's validate_json_request), a 413 for one declared past the limit."""
        ctype = b""
        length = -1
        for k, v in headers:
            if k == b"content-type":
                ctype = v
            elif k == b"content-length":
                length = int(v) if v.isdigit() else -1
        if ctype != _JSON and ctype.split(b";", 1)[0].strip().lower() != _JSON:
            return error(
                "1 validation error:\n  Unsupported Media Type: Only 'application/json' is allowed",
                400,
                "Bad Request",
            )
        return self.too_large() if length > self.max_body_bytes else None

    def too_large(self) -> Answer:
        return error(
            f"request body exceeds the limit ({self.max_body_bytes} bytes: --max-body-bytes)",
            413,
            HTTPStatus.REQUEST_ENTITY_TOO_LARGE.phrase,
        )

    def respond(self, raw: bytes) -> Answer:
        """The answer to a whole body (counted)."""
        t0 = time.perf_counter()
        tokens, states = self.driver.tokens, len(self.driver.state_bytes)
        status, body = self.handle(raw)
        self.metrics.answered(
            self.name, status, time.perf_counter() - t0, self.driver.tokens - tokens
        )
        if len(self.driver.state_bytes) != states:
            self.metrics.state_bytes.observe_many(self.driver.state_bytes[states:])
            del self.driver.state_bytes[:]
        return status, body

    def refused(self, status: int) -> None:
        """Counts an answer given without the driver (0 s)."""
        self.metrics.answered(self.name, status, 0.0)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        answer = self.refusal(scope["headers"])
        if answer is None:
            try:
                raw = await read_body(receive, self.max_body_bytes)
            except TooLarge:
                answer = self.too_large()
            except Disconnected:
                self.refused(499)  # (nginx's "client closed request")
                return
        if answer is not None:
            await _send(send, *answer)
            self.refused(answer[0])
            return
        status, body = self.respond(raw)
        await _send(send, status, body)


class ApiKey:
    """vLLM's AuthenticationMiddleware: `Authorization: Bearer <key>` on the guarded
    paths, compared as SHA-256 digests in constant time. The key itself is kept only as
    its digest (and never logged)."""

    def __init__(self, app: ASGIApp, key: str) -> None:
        self.app = app
        self.digest = hashlib.sha256(key.encode()).digest()

    def _ok(self, scope: Scope) -> bool:
        for k, v in scope["headers"]:
            if k == b"authorization":
                scheme, _, token = v.decode("latin-1").partition(" ")
                if scheme.lower() != "bearer":
                    return False
                return hmac.compare_digest(hashlib.sha256(token.encode()).digest(), self.digest)
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope.get("method") != "OPTIONS"
            and scope["path"].startswith(GUARDED_PREFIX)
            and not self._ok(scope)
        ):
            await _send(send, 401, _UNAUTHORIZED)
            return
        await self.app(scope, receive, send)


async def _http_error(request: Request, exc: Exception) -> Response:
    """vLLM's JSON body for Starlette's own 404 (no route) and 405 (wrong method)."""
    assert isinstance(exc, HTTPException)
    status, body = error(exc.detail, exc.status_code, HTTPStatus(exc.status_code).phrase)
    return Response(body, status, headers=exc.headers, media_type="application/json")


def build_app(
    registry: Registry,
    *,
    api_key: str | None = None,
    state_secret: str | None = None,
    max_body_bytes: int = 8 * 1024 * 1024,
    metrics: ServeMetrics | None = None,
) -> ASGIApp:
    from worker.serve.stream_state import state_key

    metrics = metrics or ServeMetrics()
    driver = Driver(registry, key=state_key(state_secret), max_record_bytes=max_body_bytes + 65536)
    created = int(time.time())
    models = wire.encode(
        wire.ModelList(
            "list",
            [
                wire.ModelCard(
                    name,
                    "model",
                    created,
                    "vllm",
                    name,
                    None,
                    m.max_model_len,
                    [wire.ModelPermission(f"modelperm-{uuid.uuid4().hex}", created=created)],
                )
                for name, m in registry.models.items()
            ],
        )
    )

    async def list_models(request: Request) -> Response:
        return Response(models, media_type="application/json")

    async def health(request: Request) -> Response:
        return Response(b"", 200)

    async def exposition(request: Request) -> Response:
        metrics.flush()
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    chat = DerenderEndpoint("chat", driver.chat, driver, metrics, max_body_bytes)
    completion = DerenderEndpoint("completion", driver.completion, driver, metrics, max_body_bytes)
    responses = DerenderEndpoint("responses", driver.responses, driver, metrics, max_body_bytes)
    messages = DerenderEndpoint("messages", driver.messages, driver, metrics, max_body_bytes)
    endpoints = {
        CHAT_PATH: chat,
        COMPLETION_PATH: completion,
        RESPONSES_PATH: responses,
        MESSAGES_PATH: messages,
    }
    app = Starlette(
        routes=[
            *(Route(path, endpoint, methods=["POST"]) for path, endpoint in endpoints.items()),
            Route("/v1/models", list_models, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
            Route("/metrics", exposition, methods=["GET"]),
        ],
        exception_handlers={HTTPException: _http_error},
    )
    app.state.driver = driver
    app.state.metrics = metrics
    served: ASGIApp = FastPath(app, endpoints)
    return ApiKey(served, api_key) if api_key else served


class FastPath:
    """POSTs to the derender paths go straight to their endpoint; everything else (and
    any other method there: Starlette's 405) through the Starlette app. Starlette's
    router and its two exception middlewares cost about as much as a chunk's derender."""

    def __init__(self, app: Starlette, endpoints: dict[str, DerenderEndpoint]) -> None:
        self.app = app
        self.endpoints = endpoints

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            endpoint = self.endpoints.get(scope["path"])
            if endpoint is not None:
                await endpoint(scope, receive, send)
                return
        await self.app(scope, receive, send)


def http_protocol(app: ASGIApp) -> type[OneWriteProtocol]:
    """The protocol class `serve` runs `app` on: the derender POSTs skip the ASGI layer
    when nothing wraps serve's app (no API key, no tracing: protocol.py)."""
    if isinstance(app, FastPath):
        return with_fast_lane(app.endpoints)
    return OneWriteProtocol
