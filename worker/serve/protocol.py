"""`serve`'s HTTP/1.1 protocol: uvicorn's httptools protocol, each answer in one write.

uvicorn writes a response's head when the app sends `http.response.start` and its body
when it sends `http.response.body`: two `transport.write` calls, and on uvloop each is a
`send` system call of its own. A derender answer is a few hundred bytes, and those two
sends were 42 % of `serve`'s CPU under serve_bench (py-spy, 8 clients, 1-token chunks).
Here the head of a response with a known, non-zero length is held and written with the
first part of its body (one `writev`); everything else — chunked responses, HEAD, empty
bodies, `100 Continue`, errors — goes out as uvicorn writes it.

Only `http_server.start`'s protocol class changes: parsing, keep-alive, pipelining, flow
control and shutdown stay uvicorn's.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle


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
