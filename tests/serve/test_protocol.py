"""`serve`'s HTTP protocol (worker/serve/protocol.py): uvicorn's, with a Content-Length
answer's head and body in one write, and every other response written as uvicorn writes it.

The protocol runs as uvicorn runs it (its Config, ServerState, the httptools parser, the
ASGI task on a real event loop); only the transport is a recorder, the seam where the
writes are counted. Over TCP the same protocol serves every test in tests/serve
(conftest's LiveServer)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import uvicorn
from uvicorn.server import ServerState

from worker.serve.protocol import OneWriteProtocol, with_fast_lane

ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]


class Recorder(asyncio.Transport):
    """A transport that records each write call (a `writelines` is one call: one writev)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[bytes] = []
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.calls.append(bytes(data))

    def writelines(self, list_of_data: Any) -> None:
        self.calls.append(b"".join(list_of_data))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 40000)}.get(
            name, default
        )

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def answering(status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> ASGIApp:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["method"] == "POST":
            while (await receive()).get("more_body"):
                pass
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app


async def until(cond: Callable[[], bool], what: str) -> None:
    deadline = asyncio.get_running_loop().time() + 5
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.001)


async def connect(app: ASGIApp) -> tuple[OneWriteProtocol, Recorder, ServerState]:
    config = uvicorn.Config(
        app, http=OneWriteProtocol, lifespan="off", access_log=False, log_config=None
    )
    config.load()
    state = ServerState()
    proto = OneWriteProtocol(config=config, server_state=state, app_state={})
    transport = Recorder()
    proto.connection_made(transport)
    return proto, transport, state


def fixed(body: bytes) -> list[tuple[bytes, bytes]]:
    return [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]


def test_an_answer_with_a_length_is_one_write() -> None:
    body = b'{"chunk":{},"stream_state":{"state":"x"}}'

    async def main() -> None:
        proto, t, state = await connect(answering(200, body, fixed(body)))
        proto.data_received(
            b"POST /v1/chat/completions/derender HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
        )
        await until(lambda: state.total_requests == 1, "the answer")
        assert len(t.calls) == 1
        head, _, got = t.calls[0].partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"content-length: 41" in head
        assert got == body

    asyncio.run(main())


def test_keep_alive_and_pipelined_answers_are_one_write_each() -> None:
    body = b"ok"

    async def main() -> None:
        proto, t, state = await connect(answering(200, body, fixed(body)))
        request = b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n1"
        proto.data_received(request * 3)  # pipelined: queued, answered in turn
        await until(lambda: state.total_requests == 3, "three answers")
        proto.data_received(request)
        await until(lambda: state.total_requests == 4, "the fourth")
        assert len(t.calls) == 4
        assert all(
            c.startswith(b"HTTP/1.1 200 OK\r\n") and c.endswith(b"\r\n\r\nok") for c in t.calls
        )

    asyncio.run(main())


@pytest.mark.parametrize(
    ("request_line", "headers", "body"),
    [
        # HEAD: uvicorn writes no body, so the head must not wait for one
        (b"HEAD /health HTTP/1.1", [(b"content-length", b"2")], b"ok"),
        # an empty body
        (b"GET /health HTTP/1.1", [(b"content-length", b"0")], b""),
        # no length: chunked, each part as uvicorn writes it
        (b"GET /metrics HTTP/1.1", [], b"abc"),
    ],
)
def test_other_responses_go_out_as_uvicorn_writes_them(
    request_line: bytes, headers: list[tuple[bytes, bytes]], body: bytes
) -> None:
    async def main() -> None:
        proto, t, state = await connect(answering(200, body, headers))
        proto.data_received(request_line + b"\r\nHost: x\r\n\r\n")
        await until(lambda: state.total_requests == 1, "the answer")
        assert t.calls[0].startswith(b"HTTP/1.1 200 OK\r\n") and t.calls[0].endswith(b"\r\n\r\n")
        if request_line.startswith(b"GET /metrics"):
            assert b"transfer-encoding: chunked" in t.calls[0]
            assert t.calls[1:] == [b"3\r\nabc\r\n0\r\n\r\n"]
        elif request_line.startswith(b"HEAD"):
            assert len(t.calls) == 1
        else:
            assert t.calls[1:] == [b""]  # (uvicorn's write of the empty body)

    asyncio.run(main())


def test_100_continue_is_not_held_back() -> None:
    """A client that waits for `100 Continue` before its body gets it at once (it comes
    before the response starts), and the answer after the body is still one write."""
    body = b"done"

    async def main() -> None:
        proto, t, state = await connect(answering(200, body, fixed(body)))
        proto.data_received(
            b"POST /a HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n"
        )
        await until(lambda: bool(t.calls), "100 Continue")
        assert t.calls == [b"HTTP/1.1 100 Continue\r\n\r\n"]
        proto.data_received(b"body")
        await until(lambda: state.total_requests == 1, "the answer")
        assert len(t.calls) == 2 and t.calls[1].endswith(b"\r\n\r\ndone")

    asyncio.run(main())


def test_an_app_failing_after_its_head_still_sends_the_head_and_closes() -> None:
    async def broken(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": fixed(b"12345")})
        raise RuntimeError("boom")

    async def main() -> None:
        proto, t, _ = await connect(broken)
        proto.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        await until(lambda: t.closed, "the close")
        assert len(t.calls) == 1 and t.calls[0].startswith(b"HTTP/1.1 200 OK\r\n")

    asyncio.run(main())


# -- the fast lane: derender POSTs answered from the protocol's callbacks -----------------


class Lane:
    """An endpoint at the lane's seam: answers `{"n": <body size>}`, counts refusals."""

    name = "chat"
    max_body_bytes = 100

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.bodies: list[bytes] = []
        self.refusals: list[int] = []

    def refusal(self, headers: Any) -> tuple[int, bytes] | None:
        ctype = dict(headers).get(b"content-type")
        return None if ctype == b"application/json" else (400, b'{"error":"type"}')

    def too_large(self) -> tuple[int, bytes]:
        return 413, b'{"error":"large"}'

    def respond(self, raw: bytes) -> tuple[int, bytes]:
        if self.fail:
            raise RuntimeError("boom")
        self.bodies.append(raw)
        return 200, b'{"n":%d}' % len(raw)

    def refused(self, status: int) -> None:
        self.refusals.append(status)


async def lane_connect(
    lane: Lane, fallback: ASGIApp | None = None
) -> tuple[OneWriteProtocol, Recorder, ServerState]:
    cls = with_fast_lane({"/d": lane})
    config = uvicorn.Config(
        fallback or answering(200, b"asgi", fixed(b"asgi")),
        http=cls,
        lifespan="off",
        access_log=False,
        log_config=None,
    )
    config.load()
    state = ServerState()
    state.default_headers = [(b"date", b"Tue, 01 Dec 2026 00:00:00 GMT")]
    proto = cls(config=config, server_state=state, app_state={})
    transport = Recorder()
    proto.connection_made(transport)
    return proto, transport, state


def post(body: bytes, path: bytes = b"/d", extra: bytes = b"") -> bytes:
    return (
        b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n" % len(body) + extra + b"\r\n" + body
    )


def test_a_lane_answer_is_the_bytes_the_asgi_path_writes() -> None:
    """The same status and body through the lane and through uvicorn's ASGI path (an app
    sending what DerenderEndpoint sends): byte for byte the same response."""

    async def main() -> None:
        lane = Lane()
        proto, t, state = await lane_connect(lane)
        proto.data_received(post(b"{}"))
        assert state.total_requests == 1  # answered within the callback: no task
        body = b'{"n":2}'
        asgi = answering(200, body, fixed(body))
        proto2, t2, state2 = await lane_connect(Lane(), fallback=asgi)
        proto2.data_received(post(b"{}", path=b"/other"))
        await until(lambda: state2.total_requests == 1, "the ASGI answer")
        assert t.calls == t2.calls and len(t.calls) == 1
        assert t.calls[0].startswith(b"HTTP/1.1 200 OK\r\ndate: Tue, 01 Dec 2026")
        assert not t.closed

    asyncio.run(main())


def test_a_body_in_parts_and_pipelined_requests_on_the_lane() -> None:
    async def main() -> None:
        lane = Lane()
        proto, t, state = await lane_connect(lane)
        data = post(b'{"a":1}') + post(b"[]")
        for i in range(0, len(data), 7):
            proto.data_received(data[i : i + 7])
        assert lane.bodies == [b'{"a":1}', b"[]"] and state.total_requests == 2
        assert [c.rsplit(b"\r\n\r\n", 1)[1] for c in t.calls] == [b'{"n":7}', b'{"n":2}']

    asyncio.run(main())


@pytest.mark.parametrize(
    "request_bytes",
    [
        post(b"{}", path=b"/d?x=1"),  # a query string
        post(b"{}", extra=b"Expect: 100-continue\r\n"),
        post(b"x" * 101),  # declared past the bound: the ASGI path's early 413
        b"POST /d HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
        b"GET /d HTTP/1.1\r\nHost: x\r\n\r\n",
    ],
)
def test_anything_unusual_takes_uvicorns_path(request_bytes: bytes) -> None:
    async def main() -> None:
        lane = Lane()
        proto, t, state = await lane_connect(lane)
        proto.data_received(request_bytes)
        await until(lambda: state.total_requests == 1, "the answer")
        assert lane.bodies == [] and t.calls[-1].endswith(b"asgi")

    asyncio.run(main())


def test_the_lane_refuses_as_the_endpoint_says_and_closes_when_asked() -> None:
    async def main() -> None:
        lane = Lane()
        proto, t, _ = await lane_connect(lane)
        proto.data_received(
            b"POST /d HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
            b"Connection: close\r\nContent-Length: 2\r\n\r\n{}"
        )
        assert lane.refusals == [400] and lane.bodies == []
        assert b"\r\nconnection: close\r\n" in t.calls[0] and t.calls[0].startswith(
            b"HTTP/1.1 400 Bad Request\r\n"
        )
        assert t.closed

    asyncio.run(main())


def test_a_client_gone_mid_body_is_counted_and_an_endpoint_that_raises_is_a_500() -> None:
    async def main() -> None:
        lane = Lane()
        proto, t, _ = await lane_connect(lane)
        proto.data_received(post(b'{"a":1}')[:-3])
        proto.connection_lost(None)
        assert lane.refusals == [499] and t.calls == []

        failing = Lane(fail=True)
        proto, t, _ = await lane_connect(failing)
        proto.data_received(post(b"{}"))
        assert t.calls[0].startswith(b"HTTP/1.1 500 Internal Server Error\r\n") and t.closed

        async def raising(scope: Any, receive: Any, send: Any) -> None:
            raise RuntimeError("boom")

        proto2, t2, _ = await lane_connect(Lane(), fallback=raising)
        proto2.data_received(post(b"{}", path=b"/other"))
        await until(lambda: t2.closed, "uvicorn's 500")
        assert t.calls == t2.calls  # uvicorn's own 500, byte for byte

    asyncio.run(main())


def test_a_shutdown_while_a_lane_body_arrives_lets_it_finish_then_closes() -> None:
    async def main() -> None:
        lane = Lane()
        proto, t, _ = await lane_connect(lane)
        data = post(b'{"a":1}')
        proto.data_received(data[:-3])
        proto.shutdown()
        assert not t.closed
        proto.data_received(data[-3:])
        assert lane.bodies == [b'{"a":1}'] and b"connection: close" in t.calls[0] and t.closed

    asyncio.run(main())
