"""Where one `serve` POST's CPU goes, stage by stage, under serve_bench's load.

    python bench/serve_split.py [--tokens 50] [--clients 8] [--posts 20000] [--tools 0]

1. Server CPU per POST (/proc, user + system), two servers taking turns under the same
   load (`--clients` keep-alive connections streaming `--tokens`-token DeepSeek V4 outputs
   in 1-token chunks, parsers on, each call carrying the previous answer's stream_state:
   serve_bench's bodies): `serve` as serve_bench starts it, and the same HTTP stack
   (http_server.start, serve's protocol and its lane, uvloop) with an endpoint that
   answers a fixed chunk. The second is the HTTP line; `serve` less it is the app's.
2. The app's share by stage: py-spy samples (`record --format raw`) of serve's endpoint
   called in-process with the same bodies as serve's protocol calls it (its lane:
   `refusal`, then `respond`; no socket), each sample given to the stage of its deepest
   frame that a stage below names; the shares are applied to the app's CPU from 1.
   (In-process the app runs about twice as fast as in the server, where the client
   shares the two cores and their caches: the shares carry over, the absolute figures
   do not.) No timing wrappers: on a 1-token POST they cost more than the stages they
   would time.

Stages:
- tables: the request's tables (core/tables.py's TableCache: held, stored, of);
- state envelope: stream_state open and seal (serve/stream_state.py: base64, msgpack,
  BLAKE2b; Issued);
- record decoding: the ChunkRecord the driver builds, decoded by the loop (decode_batch);
- core: process_batch less the tables (state decode, detokenize, parsers, render, encode);
- response building: the answer's chunk (serve/chunks.py, the driver's last lines);
- loop glue: run_batch's other steps (checkpoint, bounds, the adapters);
- body decoding: the endpoint's body Struct and the generate_chunk's head (msgspec);
- driver glue: the rest of serve/driver.py (the record's bytes, the answer's bytes);
- endpoint: serve/app.py (the headers' checks, timing, metrics).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import serve_bench as sb  # noqa: E402
from common import py_spy  # noqa: E402


def _driver_lines(first: str, last: str | None = None) -> tuple[str, ...]:
    """py-spy's marks of driver.py's lines from the one holding `first` to `last`."""
    lines = (ROOT / "worker" / "serve" / "driver.py").read_text().splitlines()
    a = next(i for i, t in enumerate(lines, 1) if first in t)
    b = a if last is None else next(i for i, t in enumerate(lines, 1) if i > a and last in t)
    return tuple(f"serve/driver.py:{n})" for n in range(a, b + 1))


HTTP = "HTTP (uvicorn, httptools, uvloop, send/recv)"

# (stage, substrings: a stack naming any of them is the stage's)
STAGES: list[tuple[str, tuple[str, ...]]] = [
    ("tables", ("core/tables.py",)),
    ("state envelope", ("serve/stream_state.py",)),
    ("record decoding", ("decode_batch (",)),
    ("core", ("process_batch (",)),
    (
        "response building",
        ("serve/chunks.py", *_driver_lines("chunks: list[bytes] = []", 'return 200, b\'{"chunk"')),
    ),
    ("loop glue", ("run_batch (", "run_sync (")),
    (
        "body decoding",
        (
            *_driver_lines("wire.chat_decoder.decode(body)"),
            *_driver_lines("wire.head_decoder.decode(chunk)"),
        ),
    ),
    ("driver glue", ("serve/driver.py",)),
    ("endpoint", ("serve/app.py", "prometheus_client/", "observe/metrics.py")),
    (HTTP, ()),
]


def stage_of(stack: str) -> str:
    """The stage of the deepest frame any stage names."""
    for frame in reversed(stack.split(";")):
        for name, marks in STAGES:
            if any(m in frame for m in marks):
                return name
    return HTTP


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


TOOLS: list[dict[str, Any]] = []  # (--tools)


async def load(port: int, clients: int, tokens: int, posts: int) -> int:
    """About `posts` POSTs: whole `tokens`-token streams from `clients` connections."""
    ids = sb.output_ids(tokens)
    conns = [await sb.Conn.open(port) for _ in range(clients)]
    streams = max(1, -(-posts // (tokens * clients)))

    async def client(k: int, conn: sb.Conn) -> int:
        return sum(
            [
                await sb.stream_once(conn, f"split-{k}-{s}", ids, 1, "deepseek-v4", 1e18, TOOLS)
                for s in range(streams)
            ]
        )

    try:
        return sum(await asyncio.gather(*(client(k, c) for k, c in enumerate(conns))))
    finally:
        for c in conns:
            c.close()


# -- the HTTP stack alone: the same protocol and server, an endpoint that answers at once --

NULL_ANSWER = b'{"chunk":{},"stream_state":{"state":"AA=="}}'


async def null_app(scope: Any, receive: Any, send: Any) -> None:
    """Reads the body and answers a fixed chunk (GET /health: empty)."""
    if scope["type"] != "http":
        return
    body = b""
    if scope["method"] == "POST":
        while (await receive()).get("more_body"):
            pass
        body = NULL_ANSWER
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class NullEndpoint:
    """serve's lane (protocol.FastLaneProtocol) with an endpoint that answers at once."""

    name = "chat"
    max_body_bytes = 1 << 23

    def refusal(self, headers: Any) -> tuple[int, bytes] | None:
        return None

    def too_large(self) -> tuple[int, bytes]:
        return 413, b"{}"

    def respond(self, raw: bytes) -> tuple[int, bytes]:
        return 200, NULL_ANSWER

    def refused(self, status: int) -> None:
        pass


def serve_null(port: int) -> None:
    import uvloop

    from worker.observe import http_server
    from worker.serve.protocol import with_fast_lane

    async def main() -> None:
        lane = with_fast_lane({sb.CHAT: NullEndpoint()})
        await http_server.start(null_app, "127.0.0.1", port, http=lane)
        await asyncio.Event().wait()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main())


@contextlib.contextmanager
def null_server() -> Iterator[tuple[int, int]]:
    port = sb.free_port()
    proc = subprocess.Popen([sys.executable, __file__, "--null-server", str(port)])
    try:
        sb.wait_health(port, proc, 30)
        yield port, proc.pid
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


# -- the app alone: serve's endpoint, called in-process ----------------------------------


def in_process(tokens: int, posts: int) -> None:
    """serve's endpoint (build_app's) called without a socket, as serve's protocol calls
    it; the bodies are serve_bench's."""
    from worker.config import load_registry
    from worker.serve.app import FastPath, build_app

    with tempfile.TemporaryDirectory() as tmp:
        models = Path(tmp) / "models.toml"
        models.write_text(sb.MODELS_TOML)
        app = build_app(load_registry(str(models)))
    assert isinstance(app, FastPath)
    ids = sb.output_ids(tokens)

    endpoint = app.endpoints[sb.CHAT]  # (serve answers its POSTs on the lane: protocol.py)
    headers = [
        (b"host", b"127.0.0.1"),
        (b"content-type", b"application/json"),
        (b"content-length", b"0"),
    ]

    def post(body: bytes) -> bytes:
        # what FastLaneProtocol.on_message_complete asks of the endpoint
        headers[2] = (b"content-length", b"%d" % len(body))
        assert endpoint.refusal(headers) is None
        status, answer = endpoint.respond(body)
        assert status == 200, answer
        return answer

    class Local:  # serve_bench's client, over the function above
        async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
            return 200, post(body)

    async def streams(n: int) -> None:
        for s in range(n):
            await sb.stream_once(Local(), f"p-{s}", ids, 1, "deepseek-v4", 1e18, TOOLS)  # type: ignore[arg-type]

    asyncio.run(streams(max(1, posts // tokens)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=50)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--posts", type=int, default=20000, help="POSTs per measurement")
    ap.add_argument("--rounds", type=int, default=3, help="serve / HTTP-alone turns")
    ap.add_argument("--rate", type=int, default=1000, help="py-spy samples per second")
    ap.add_argument("--raw", type=Path, help="keep py-spy's raw stacks of the app here")
    ap.add_argument("--tools", type=int, default=0, help="function tools in each chat_request")
    ap.add_argument("--null-server", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    TOOLS[:] = [sb.tool(i) for i in range(args.tools)]
    if args.null_server:
        serve_null(args.null_server)
        return 0
    if args.in_process:
        in_process(args.tokens, args.posts)
        return 0

    spy = py_spy()  # before anything starts: a missing profiler is named at once
    # 1) server CPU per POST: serve, and the HTTP stack alone, taking turns
    cpu = {"serve": 0.0, "http": 0.0}
    posts = {"serve": 0, "http": 0}
    with sb.ours() as (sport, spid), null_server() as (nport, npid):
        for port in (sport, nport):
            asyncio.run(load(port, args.clients, args.tokens, 1000))  # warm-up
        for _ in range(args.rounds):
            for name, port, pid in (("serve", sport, spid), ("http", nport, npid)):
                c0 = cpu_s(pid)
                posts[name] += asyncio.run(load(port, args.clients, args.tokens, args.posts))
                cpu[name] += cpu_s(pid) - c0
    us = {k: cpu[k] / posts[k] * 1e6 for k in cpu}

    # 2) the app's stages: py-spy samples of the app in-process
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "raw.txt"
        subprocess.run(
            [
                *(str(spy), "record", "--format", "raw", "-r", str(args.rate), "-o", str(raw)),
                *("--", sys.executable, __file__, "--in-process"),
                *("--tokens", str(args.tokens), "--posts", str(args.posts * 3)),
                *("--tools", str(args.tools)),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        stacks = raw.read_text().splitlines()
    if args.raw:
        args.raw.write_text("\n".join(stacks))
    samples: Counter[str] = Counter()
    for line in stacks:
        stack, _, n = line.rpartition(" ")
        if "in_process.<locals>.post (" in stack:  # (the rest: the client, start-up)
            samples[stage_of(stack)] += int(n)
    total = sum(samples.values())
    app_us = us["serve"] - us["http"]
    print(
        f"{args.tokens}-token streams, 1-token chunks, parsers on, {args.tools} tools, "
        f"{args.clients} clients: "
        f"serve {us['serve']:.1f} µs of server CPU per POST ({posts['serve']} POSTs), the "
        f"HTTP stack alone {us['http']:.1f} ({posts['http']}); the app's "
        f"{app_us:.1f} split by {total} py-spy samples of it in-process"
    )
    print("| stage | µs per POST | share |")
    print("|---|--:|--:|")
    print(
        f"| HTTP (uvicorn, httptools, uvloop, the socket) | {us['http']:.1f} | "
        f"{us['http'] / us['serve']:.0%} |"
    )
    for name, _ in STAGES[:-1]:
        v = samples[name] / total * app_us if total else 0.0
        print(f"| {name} | {v:.1f} | {v / us['serve']:.0%} |")
    print(f"| total | {us['serve']:.1f} | 100% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
