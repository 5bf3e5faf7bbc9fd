"""The gateway's client of the vLLM engine, on httpx: render, generate (an SSE stream of
token ids), abort, and the model list.

vLLM names the engine request of a generate call `generate-tokens-<request_id>` (the
`request_id` of the body, which the gateway sets to its own id); `abort_requests` takes
that name. Every call is bounded: connecting and each read wait at most `timeout_s`.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from worker.gateway.dialects import DIALECTS

log = logging.getLogger("derender.gateway")

RENDER_PATHS = {api: d.render_path for api, d in DIALECTS.items()}
GENERATE_PATH = "/inference/v1/generate"
ABORT_PATH = "/inference/v1/abort_requests"
MODELS_PATH = "/v1/models"
ENGINE_ID_PREFIX = "generate-tokens-"
DONE = b"[DONE]"
# An abort is best effort (closing the stream stops the engine too): it waits this long.
ABORT_TIMEOUT_S = 5.0


class EngineUnreachable(Exception):
    """The engine did not answer (refused, reset, timed out)."""


@dataclass(frozen=True)
class Answer:
    """An engine's whole HTTP answer, passed to the client as it is."""

    status: int
    body: bytes
    content_type: str

    def json(self) -> Any:
        return json.loads(self.body)


def engine_request_id(request_id: str) -> str:
    return ENGINE_ID_PREFIX + request_id


class Engine:
    def __init__(
        self,
        engine_url: str,
        render_url: str | None = None,
        *,
        timeout_s: float = 300.0,
        api_key: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.engine_url = engine_url.rstrip("/")
        self.render_url = (render_url or engine_url).rstrip("/")
        headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0)),
            # A generate stream holds its connection: no cap below the gateway's own load.
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
            headers=headers,
            transport=transport,
        )

    async def aclose(self) -> None:
        await self.http.aclose()

    async def _call(
        self, method: str, url: str, body: bytes | None, headers: Mapping[str, str]
    ) -> Answer:
        try:
            r = await self.http.request(
                method,
                url,
                content=body,
                headers={"content-type": "application/json", **headers} if body else headers,
            )
        except httpx.HTTPError as exc:
            raise EngineUnreachable(f"{method} {url}: {_reason(exc)}") from None
        ctype = r.headers.get("content-type", "application/json")
        return Answer(r.status_code, r.content, ctype)

    async def render(self, api: str, body: bytes, headers: Mapping[str, str]) -> Answer:
        """The client's body rendered: a generate request (chat, Responses, Messages), a
        list of them (completion, one per prompt), or vLLM's error answer."""
        return await self._call("POST", self.render_url + RENDER_PATHS[api], body, headers)

    async def models(self) -> Answer:
        return await self._call("GET", self.engine_url + MODELS_PATH, None, {})

    @contextlib.asynccontextmanager
    async def generate(
        self, request: dict[str, Any], headers: Mapping[str, str]
    ) -> AsyncIterator[Generation]:
        """A streaming generate call; leaving the block closes its connection (the engine
        then stops generating)."""
        url = self.engine_url + GENERATE_PATH
        body = json.dumps(request, ensure_ascii=False).encode()
        try:
            async with self.http.stream(
                "POST",
                url,
                content=body,
                headers={"content-type": "application/json", **headers},
            ) as r:
                yield Generation(r)
        except httpx.HTTPError as exc:
            raise EngineUnreachable(f"POST {url}: {_reason(exc)}") from None

    async def abort(self, request_id: str) -> bool:
        """Ask the engine to stop a request (True: it took the call)."""
        url = self.engine_url + ABORT_PATH
        body = json.dumps({"request_ids": [engine_request_id(request_id)]}).encode()
        try:
            r = await self.http.post(
                url,
                content=body,
                headers={"content-type": "application/json"},
                timeout=ABORT_TIMEOUT_S,
            )
        except httpx.HTTPError as exc:
            log.warning("abort %s: %s", request_id, _reason(exc))
            return False
        return r.is_success


class Generation:
    """One generate response: its status, then its SSE events' data."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.status = response.status_code
        self.done = False  # `[DONE]` was read: the engine finished the stream

    async def error(self) -> Answer:
        """The whole answer of a generate call that did not stream (status not 200)."""
        body = await self.response.aread()
        return Answer(self.status, body, self.response.headers.get("content-type", ""))

    async def events(self) -> AsyncGenerator[dict[str, Any], None]:
        """Each `data: {…}` event, parsed, until `[DONE]` (then `done` is set). A stream
        that ends without it, or breaks, raises EngineUnreachable."""
        # (Lines are split from the body's bytes here: httpx's text and line decoders are
        # two more async generators per chunk, and one chunk is one token.)
        rest = b""
        try:
            async for chunk in self.response.aiter_bytes():
                lines = (rest + chunk).splitlines(keepends=True)
                rest = lines.pop() if lines and not lines[-1].endswith((b"\n", b"\r")) else b""
                for line in lines:
                    if (event := self._event(line)) is not None:
                        yield event
                    elif self.done:
                        return
        except httpx.HTTPError as exc:
            raise EngineUnreachable(f"the generate stream broke: {_reason(exc)}") from None
        if (event := self._event(rest)) is not None:  # (a last line without its break)
            yield event
        if not self.done:
            raise EngineUnreachable("the generate stream ended without [DONE]")

    def _event(self, line: bytes) -> dict[str, Any] | None:
        """A `data:` line's event; None for other lines and for `[DONE]` (`done` set)."""
        if not line.startswith(b"data:"):
            return None  # blank separators, comments, `event:` lines
        data = line[5:].strip()
        if data == DONE:
            self.done = True
            return None
        event: dict[str, Any] = json.loads(data)
        return event


def _reason(exc: httpx.HTTPError) -> str:
    text = str(exc) or type(exc).__name__
    return text if isinstance(exc, httpx.HTTPStatusError) else f"{type(exc).__name__}: {text}"
