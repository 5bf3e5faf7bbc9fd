"""An ASGI app served on a free local port from its own event loop thread: the test
doubles at an HTTP seam (the stand-in engine, a render proxy) run beside code that owns
the caller's loop, or none."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from worker.observe import http_server

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0


class ThreadedApp:
    """`with ThreadedApp(app) as served:` serves `app` on `served.url` until the block ends."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.url = ""
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._server: http_server.HttpServer | None = None

    def __enter__(self) -> ThreadedApp:
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(
            http_server.start(self.app, "127.0.0.1", 0), self.loop
        )
        self._server = started.result(timeout=START_TIMEOUT_S)
        self.url = f"http://127.0.0.1:{self._server.port}"
        return self

    def __exit__(self, *exc: object) -> None:
        server = self._server
        if server is not None:

            async def close() -> None:
                server.close()
                await server.wait_closed()

            asyncio.run_coroutine_threadsafe(close(), self.loop).result(timeout=STOP_TIMEOUT_S)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()
