"""The one HTTP stack of the worker: uvicorn (httptools, on the running event loop) serving
Starlette apps.

`run`'s `/metrics`, `/healthz` and `/readyz`, the supervisor's merged metrics
(`processes.py`) and `serve`'s derender endpoints all go through `start`. uvicorn is what
the Python serving world (vLLM included) runs; with httptools as its HTTP/1.1 parser and
the worker's uvloop it answers a small request in tens of microseconds, and it brings
keep-alive, pipelining, flow control and graceful shutdown that a hand-written server would
have to grow.

uvicorn is used as a library, not as its own program: the socket is bound here (a port in
use is an `OSError` for the caller, not a `sys.exit` inside uvicorn), no signal handler is
installed (the worker owns SIGTERM/SIGINT), and its logging configuration is left alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Any

import uvicorn

# How long `close` waits for requests in flight before cancelling them.
GRACEFUL_S = 3.0


def _http_impl() -> str:
    try:
        import httptools  # noqa: F401
    except ImportError:  # (a platform without the wheel: uvicorn's pure-Python parser)
        return "h11"
    return "httptools"


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (port 0: a free one). Raises OSError."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _, addr = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(1024)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class HttpServer:
    """A uvicorn server running as a task of the current loop (`close`, `wait_closed`, as
    an `asyncio.Server`)."""

    def __init__(self, server: uvicorn.Server, sock: socket.socket) -> None:
        self._server = server
        self._sock = sock
        self.port: int = sock.getsockname()[1]
        self._task: asyncio.Task[None] | None = None

    async def _start(self) -> None:
        await self._server.startup(sockets=[self._sock])
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        try:
            await self._server.main_loop()
        finally:
            await self._server.shutdown(sockets=[self._sock])

    def close(self) -> None:
        """Stop accepting; requests in flight finish (up to GRACEFUL_S)."""
        self._server.should_exit = True

    async def wait_closed(self) -> None:
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


async def start(app: Any, host: str, port: int, **options: Any) -> HttpServer:
    """Serve the ASGI `app` on host:port from the running loop; returns once it listens.

    `options` are uvicorn.Config's (e.g. `timeout_keep_alive`, `limit_concurrency`)."""
    sock = bind(host, port)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        loop="none",  # the caller's loop (uvloop under `run` and `serve`)
        # (`http`: a protocol class of the caller's; serve's writes each answer at once)
        http=options.pop("http", None) or _http_impl(),
        lifespan="off",
        log_config=None,  # the worker's own logging (worker/observe/logs.py) stays as it is
        access_log=False,
        server_header=False,
        # No X-Forwarded-* rewriting of the client address: nothing here reads it.
        proxy_headers=False,
        timeout_graceful_shutdown=options.pop("timeout_graceful_shutdown", GRACEFUL_S),
        **options,
    )
    config.load()
    server = uvicorn.Server(config)
    server.lifespan = config.lifespan_class(config)
    http = HttpServer(server, sock)
    try:
        await http._start()
    except BaseException:
        sock.close()
        raise
    return http
