"""The one HTTP stack under `run` too: its /metrics, /healthz, /readyz
(worker.observe.metrics.serve) and the supervisor's merged endpoints (processes.Child.ask
against them) over real TCP."""

from __future__ import annotations

import asyncio
import http.client
import socket

import pytest

from worker.observe import http_server
from worker.observe.metrics import Metrics, serve, serve_http
from worker.run.processes import Child


def _get(
    port: int, path: str, conn: http.client.HTTPConnection | None = None
) -> tuple[int, str, str]:
    c = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.headers["content-type"], r.read().decode()
    finally:
        if conn is None:
            c.close()


def test_run_metrics_endpoints_keep_their_paths_statuses_and_bodies() -> None:
    async def main() -> None:
        m = Metrics()
        ready = {"ok": False}
        server = await serve(m, "127.0.0.1", 0, lambda: ready["ok"])
        loop = asyncio.get_running_loop()

        async def get(path: str) -> tuple[int, str, str]:
            return await loop.run_in_executor(None, _get, server.port, path)

        try:
            status, ctype, body = await get("/metrics")
            assert status == 200 and ctype.startswith("text/plain")
            assert "# TYPE derender_records_total counter" in body
            assert await get("/healthz") == (200, "text/plain; charset=utf-8", "ok\n")
            assert (await get("/readyz"))[::2] == (503, "not ready\n")
            m.ready = True
            assert (await get("/readyz"))[::2] == (503, "not ready\n")  # is_ready() says no
            ready["ok"] = True
            assert (await get("/readyz?verbose=1"))[::2] == (200, "ready\n")
            m.last_turn -= 3600
            assert (await get("/healthz"))[::2] == (503, "loop stalled\n")
            assert (await get("/nope"))[::2] == (404, "not found\n")
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(main())


def test_a_port_in_use_is_an_oserror() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]

        async def main() -> None:
            with pytest.raises(OSError):
                await serve(Metrics(), "127.0.0.1", port)

        asyncio.run(main())


def test_the_supervisor_reads_a_process_endpoint_and_gets_its_answer() -> None:
    """Child.ask speaks HTTP/1.1 to a worker process's metrics server (now keep-alive by
    default): it asks for the connection to close, so it gets the answer at once."""

    async def respond(path: str) -> tuple[str, str, bytes]:
        return (
            ("200 OK", "text/plain", b"x_total 1.0\n")
            if path == "/metrics"
            else (
                "503 Service Unavailable",
                "text/plain",
                b"no\n",
            )
        )

    class _Proc:
        returncode = None

    async def main() -> None:
        server = await serve_http(respond, "127.0.0.1", 0)
        try:
            child = Child(0, server.port, _Proc())  # type: ignore[arg-type]
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            assert await child.ask("/metrics") == (200, b"x_total 1.0\n")
            assert await child.ask("/readyz") == (503, b"no\n")
            assert loop.time() - t0 < 2  # not the keep-alive timeout
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(main())


def test_close_lets_a_request_in_flight_finish() -> None:
    gate, entered = asyncio.Event(), asyncio.Event()

    async def respond(path: str) -> tuple[str, str, bytes]:
        entered.set()
        await gate.wait()
        return "200 OK", "text/plain", b"late\n"

    async def main() -> None:
        server = await serve_http(respond, "127.0.0.1", 0)
        loop = asyncio.get_running_loop()
        pending = loop.run_in_executor(None, _get, server.port, "/x")
        # Closed once the request is in (not after a fixed sleep a loaded machine outlasts).
        await asyncio.wait_for(entered.wait(), 30)
        server.close()
        await asyncio.sleep(0.1)
        gate.set()
        assert (await pending)[::2] == (200, "late\n")
        await server.wait_closed()
        with pytest.raises(OSError):
            await loop.run_in_executor(None, _get, server.port, "/x")

    asyncio.run(main())


def test_start_serves_any_asgi_app() -> None:
    async def app(scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def main() -> None:
        server = await http_server.start(app, "127.0.0.1", 0)
        try:
            loop = asyncio.get_running_loop()
            status, _, body = await loop.run_in_executor(None, _get, server.port, "/")
            assert (status, body) == (204, "")
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(main())
