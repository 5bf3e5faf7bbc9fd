"""`serve` as an HTTP/1.1 server: keep-alive, concurrent streams, clients that go away,
bad bodies, body bounds, the API key, and the command line (flags, env, the key unlogged)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from tests.serve.bodies import PLAIN, REASONED, assemble, chat_body, chunk_body, generate_response
from tests.serve.conftest import API_KEY, MAX_BODY, Client, LiveServer

CHAT = "/v1/chat/completions/derender"


def _raw(port: int, data: bytes, read: bool = True) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(data)
        if not read:
            return b""
        out = b""
        while b"\r\n\r\n" not in out:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
        return out


def test_keep_alive_serves_many_requests_on_one_connection(client: Client) -> None:
    body = chat_body(PLAIN, model="plain")
    client.chat(body)
    sock = client.conn.sock
    assert sock is not None
    local = sock.getsockname()
    for _ in range(50):
        status, answer = client.chat(body)
        assert status == 200 and answer["choices"][0]["message"]["content"]
    assert client.conn.sock is sock and sock.getsockname() == local  # never reconnected


def test_pipelined_requests_are_answered_in_order(server: LiveServer) -> None:
    bodies = [
        json.dumps(
            {"model": "plain", "generate_response": generate_response(PLAIN[: i + 1], rid=f"p{i}")}
        ).encode()
        for i in range(3)
    ]
    data = b"".join(
        f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(b)}\r\n\r\n".encode()
        + b
        for b in bodies
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
        s.sendall(data)
        got = b""
        deadline = time.monotonic() + 10
        while got.count(b'"object":"chat.completion"') < 3 and time.monotonic() < deadline:
            got += s.recv(65536)
    ids = [part.split(b'"', 1)[0] for part in got.split(b'{"id":"')[1:]]
    assert ids == [b"p0", b"p1", b"p2"]


def _stream_whole(port: int, rid: str, sizes: int, out: dict[str, Any]) -> None:
    c = Client(port)
    try:
        state = None
        chunks = []
        parts = [REASONED[i : i + sizes] for i in range(0, len(REASONED), sizes)]
        for i, part in enumerate(parts):
            finish = "stop" if i == len(parts) - 1 else None
            status, answer = c.chat(chunk_body(part, state, rid=rid, finish=finish))
            assert status == 200, answer
            assert answer["chunk"]["id"] == rid
            chunks.append(answer["chunk"])
            state = answer["stream_state"]
        out[rid] = assemble(chunks)
    finally:
        c.close()


def test_concurrent_streams_do_not_mix(server: LiveServer) -> None:
    results: dict[str, Any] = {}
    threads = [
        threading.Thread(target=_stream_whole, args=(server.port, f"con-{i}", 1 + i % 3, results))
        for i in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results) == 8
    for got in results.values():
        assert got["reasoning"] == "The user wants a greeting."
        assert got["content"] == "Hello there! 你好 😀"


def test_a_client_that_disconnects_mid_body_does_not_hurt_the_server(
    server: LiveServer, client: Client
) -> None:
    head = (
        f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: 5000\r\n\r\n"
    ).encode()
    for _ in range(5):
        _raw(server.port, head + b'{"model": "plain", "generate_', read=False)
    # and one that sends a whole request, then leaves before reading the answer
    body = json.dumps(chat_body(PLAIN, model="plain")).encode()
    whole = (
        f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    _raw(server.port, whole, read=False)
    status, answer = client.chat(chat_body(PLAIN, model="plain"))
    assert status == 200 and answer["choices"][0]["message"]["content"]
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        _, text, _ = client.request("GET", "/metrics")
        if b'status="499"} 5.0' in text:
            break
        time.sleep(0.05)
    assert b'derender_http_requests_total{endpoint="chat",status="499"} 5.0' in text


@pytest.mark.parametrize(
    "body",
    [b"{bad json", b"", b"[1,2,3]", b'"text"', b"\xff\xfe", b"[" * 5000 + b"]" * 5000, b"null"],
)
def test_malformed_bodies_are_400(client: Client, body: bytes) -> None:
    for path in (CHAT, "/v1/completions/derender"):
        status, data, _ = client.request("POST", path, body)
        assert status == 400, data
        err = json.loads(data)["error"]
        assert err["code"] == 400 and err["type"] == "Bad Request" and err["message"]
    # the connection is still good
    assert client.chat(chat_body(PLAIN, model="plain"))[0] == 200


def test_oversized_bodies_are_413(small_server: LiveServer) -> None:
    c = Client(small_server.port)
    try:
        big = json.dumps(
            {"model": "plain", "generate_response": generate_response([42] * (MAX_BODY // 3))}
        ).encode()
        assert len(big) > MAX_BODY
        status, data, _ = c.request("POST", CHAT, big)
        assert status == 413
        err = json.loads(data)["error"]
        assert err["code"] == 413 and str(MAX_BODY) in err["message"]
    finally:
        c.close()
    # without a Content-Length (chunked): refused once the limit is passed
    c = Client(small_server.port)
    try:
        c.conn.putrequest("POST", CHAT)
        c.conn.putheader("Content-Type", "application/json")
        c.conn.putheader("Transfer-Encoding", "chunked")
        c.conn.endheaders()
        piece = b"[" + b"1," * 16000
        try:
            for _ in range(MAX_BODY // len(piece) + 2):
                c.conn.send(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            c.conn.send(b"0\r\n\r\n")
        except OSError:
            pass  # the server may answer and close before we finish
        resp = c.conn.getresponse()
        assert resp.status == 413
        resp.read()
    finally:
        c.close()
    # a body at the limit is read (and answered on its merits)
    c = Client(small_server.port)
    try:
        ok = json.dumps({"model": "plain", "generate_response": generate_response(PLAIN)})
        status, _, _ = c.request("POST", CHAT, ok.encode() + b" " * (MAX_BODY - len(ok)))
        assert status == 200
    finally:
        c.close()


def test_api_key(keyed_server: LiveServer) -> None:
    body = json.dumps(chat_body(PLAIN, model="plain")).encode()
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {API_KEY}"}):
        c = Client(keyed_server.port)
        try:
            status, data, _ = c.request("POST", CHAT, body, headers)
            assert (status, json.loads(data)) == (401, {"error": "Unauthorized"})
            status, _, _ = c.request("GET", "/v1/models", None, headers)
            assert status == 401
            # /health and /metrics are not guarded (vLLM guards /v1, /v2, /inference, /cohere)
            assert c.request("GET", "/health", None, headers)[0] == 200
            assert c.request("GET", "/metrics", None, headers)[0] == 200
        finally:
            c.close()
    c = Client(keyed_server.port, api_key=API_KEY)
    try:
        assert c.request("POST", CHAT, body)[0] == 200
        assert c.request("GET", "/v1/models")[0] == 200
    finally:
        c.close()


def test_command_line_serves_with_env_flags_and_never_logs_the_key(tmp_path: Any) -> None:
    key = "cli-secret-key-7781"
    env = dict(os.environ, DERENDER_API_KEY=key, DERENDER_PORT="0", DERENDER_HOST="127.0.0.1")
    env["DERENDER_LOG_LEVEL"] = "DEBUG"
    proc = subprocess.Popen(
        [sys.executable, "-m", "worker", "serve", "--max-body-bytes", "4096"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("DERENDER_SERVE_URL=http://127.0.0.1:"), line
        port = int(line.rsplit(":", 1)[1])
        c = Client(port)
        try:
            body = json.dumps(chat_body(PLAIN, model="deepseek-v4")).encode()
            assert c.request("POST", CHAT, body)[0] == 401
            c.api_key = key
            assert c.request("POST", CHAT, body)[0] == 200
            assert c.request("POST", CHAT, b" " * 5000)[0] == 413  # --max-body-bytes
        finally:
            c.close()
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "api_key': '***'" in err
    assert key not in err
