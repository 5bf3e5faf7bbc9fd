"""`serve`'s HTTP/1.1 protocol: uvicorn's httptools protocol, each answer in one write.

uvicorn writes a response's head when the app sends `http.response.start` and its body
when it sends `http.response.body`: two `transport.write` calls, and on uvloop each is a
`send` system call of its own (py-spy put 42 % of serve's samples on those two lines
under serve_bench; /proc says less: one write saves ~15 µs of system time per POST with
one client, an amount within noise with eight). Here the head of a response with a
known, non-zero length is held and written with the first part of its body (one
`writev`); everything else — chunked responses, HEAD, empty bodies, `100 Continue`,
errors — goes out as uvicorn writes it.

Only `http_server.start`'s protocol class changes: parsing, keep-alive, pipelining, flow
control and shutdown stay uvicorn's.

`with_fast_lane` goes one step further for the derender POSTs when nothing wraps serve's
app (no API key, no tracing): the endpoint answers from the protocol's own callbacks —
the body collected as httptools hands it over, the driver called when the message is
complete, the answer written at once — without an ASGI task, scope, messages or cycle.
That machinery was ~25 µs of a POST's ~200 (an app answering a fixed chunk: 41 → 20 µs
of user time per POST with 8 clients). Anything unusual (another method or path, a query
string, no Content-Length, `Expect`, an upgrade, a request pipelined behind one still
running) takes uvicorn's path, unchanged; the answer's bytes are the same either way.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from uvicorn.protocols.http.httptools_impl import (
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)

log = logging.getLogger("derender.serve")


class HeadWithBody:
    """A response cycle's view of the connection's transport: the head of a
    Content-Length response waits for the body's first part (then both go in one write)."""

    __slots__ = ("_cycle", "_headed", "_held", "_transport")

    def __init__(self, transport: asyncio.Transport, cycle: RequestResponseCycle) -> None:
        self._transport = transport
        self._cycle = cycle
        self._headed = False
        self._held: bytes | None = None

    def write(self, data: bytes) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._transport.writelines((held, data))
            return
        cycle = self._cycle
        if not self._headed and cycle.response_started:
            # (the cycle sets response_started, and its Content-Length, just before it
            # writes the head; a `100 Continue` comes before response_started)
            self._headed = True
            if (
                cycle.chunked_encoding is False
                and cycle.expected_content_length > 0
                and cycle.scope["method"] != "HEAD"
            ):
                self._held = data
                return
        self._transport.write(data)

    def close(self) -> None:
        # (an app that fails after its head: what was held goes out first, as before)
        held = self._held
        if held is not None:
            self._held = None
            self._transport.write(held)
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class OneWriteProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol whose response cycles write through `HeadWithBody`."""

    def on_headers_complete(self) -> None:
        before = self.cycle
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and cycle is not before:
            cycle.transport = HeadWithBody(self.transport, cycle)  # type: ignore[assignment]


class Endpoint(Protocol):
    """What the fast lane needs of a derender endpoint (app.DerenderEndpoint)."""

    name: str
    max_body_bytes: int

    def refusal(self, headers: Iterable[tuple[bytes, bytes]]) -> tuple[int, bytes] | None: ...
    def too_large(self) -> tuple[int, bytes]: ...
    def respond(self, raw: bytes) -> tuple[int, bytes]: ...
    def refused(self, status: int) -> None: ...


_JSON_HEAD = b"content-type: application/json\r\ncontent-length: "
_CLOSE = b"connection: close\r\n"
# (uvicorn's own 500, in its header order)
_ERROR = (
    b"content-type: text/plain; charset=utf-8\r\ncontent-length: 21\r\n"
    b"connection: close\r\n\r\nInternal Server Error"
)


class FastLaneProtocol(OneWriteProtocol):
    """OneWriteProtocol whose derender POSTs (`endpoints`, by path) skip the ASGI layer."""

    endpoints: Mapping[bytes, Endpoint] = {}
    _lane: Endpoint | None = None  # the endpoint of the request being read, on the lane
    _parts: list[bytes]
    _size = 0
    _closing = False  # a shutdown came while a lane request was being read

    def on_headers_complete(self) -> None:
        endpoint = self.endpoints.get(self.url)
        if (
            endpoint is not None
            and (self.cycle is None or self.cycle.response_complete)
            and not self.pipeline
            and not self.expect_100_continue
            and self.parser.get_method() == b"POST"
            and not self.parser.should_upgrade()
            and self._lane_length(endpoint)
        ):
            self._lane, self._parts, self._size = endpoint, [], 0
            return
        self._lane = None
        super().on_headers_complete()

    def _lane_length(self, endpoint: Endpoint) -> bool:
        """A Content-Length body within the endpoint's bound and no transfer coding (else
        uvicorn's path: a 413 before the body is read, chunked bodies)."""
        length = -1
        for k, v in self.headers:
            if k == b"transfer-encoding":
                return False
            if k == b"content-length":
                length = int(v) if v.isdigit() else -1
        return 0 <= length <= endpoint.max_body_bytes

    def on_body(self, body: bytes) -> None:
        if self._lane is None:
            super().on_body(body)
            return
        self._parts.append(body)
        self._size += len(body)

    def on_message_complete(self) -> None:
        endpoint = self._lane
        if endpoint is None:
            super().on_message_complete()
            return
        self._lane = None
        raw = self._parts[0] if len(self._parts) == 1 else b"".join(self._parts)
        self._parts = []
        keep_alive = (
            not self._closing
            and self.parser.get_http_version() != "1.0"
            and self.parser.should_keep_alive()
        )
        try:
            answer = endpoint.refusal(self.headers)
            if answer is None and self._size > endpoint.max_body_bytes:
                answer = endpoint.too_large()
            if answer is not None:
                endpoint.refused(answer[0])
            else:
                answer = endpoint.respond(raw)
        except Exception:  # as uvicorn answers an app that raised before its response
            log.exception("Exception in the derender endpoint %s", endpoint.name)
            self.transport.write(self._head(500) + _ERROR)
            self.transport.close()
            return
        status, body = answer
        head = self._head(status) + _JSON_HEAD + b"%d\r\n" % len(body)
        if not keep_alive:
            head += _CLOSE
        self.transport.writelines((head, b"\r\n", body))
        if not keep_alive:
            self.transport.close()
        self.on_response_complete()

    def _head(self, status: int) -> bytes:
        head = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            head += (name, b": ", value, b"\r\n")
        return b"".join(head)

    def shutdown(self) -> None:
        if self._lane is not None:  # (as uvicorn lets a request in flight finish)
            self._closing = True
            return
        super().shutdown()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._lane is not None:  # a client gone before its body was all there
            self._lane.refused(499)
            self._lane = None
        super().connection_lost(exc)


def with_fast_lane(endpoints: Mapping[str, Endpoint]) -> type[FastLaneProtocol]:
    """A FastLaneProtocol class for these endpoints (path → endpoint)."""
    lanes = {path.encode(): e for path, e in endpoints.items()}
    return type("DerenderLaneProtocol", (FastLaneProtocol,), {"endpoints": lanes})
