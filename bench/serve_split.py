"""Where one `serve` POST's CPU goes: serve_bench's streams, in-process, split by stage.

    python bench/serve_split.py [--tokens 50] [--streams 200] [--tools 0]

The same bodies `serve_bench.py` sends (DeepSeek V4 parsers on, 1-token chunks, each call
carrying the previous answer's stream_state) go through the ASGI app `serve` runs
(`build_app`), called directly (no socket, no HTTP parser), with the stages below timed by
wrappers around the functions that do them (the wrappers cost ~0.1 µs each: small beside
the figures). What the app does not do — uvicorn's httptools parsing, the ASGI message
dicts, uvloop's socket reads and writes, the event loop's wake-ups — is the server's CPU
per POST in serve_bench minus the app's time here: pass that figure as `--server-us` to get
the HTTP line. `--tools N` puts N function tools in the chat_request (an agent's request:
the tables are then non-empty and ride in the state envelope).

Stages:
- body: the endpoint's body Struct (msgspec) and the generate_chunk's head;
- envelope: stream_state open (base64, msgpack, BLAKE2b tag) and seal;
- record: the ChunkRecord the driver builds, decoded again by the loop (decode_batch);
- tables: the TableCache (held / stored / of / tool_schemas);
- core: process_batch less the tables (state decode, detokenize, parsers, render, state encode);
- response: the driver's answer bytes (the chunk, the empty chunk, or merged chunks);
- glue: the rest of the app (ASGI headers and body, metrics, the loop's other steps).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import serve_bench as sb  # noqa: E402

from worker.batch import loop as batch_loop  # noqa: E402
from worker.batch.loop import run_sync  # noqa: E402
from worker.config import load_registry  # noqa: E402
from worker.serve import app as serve_app  # noqa: E402
from worker.serve import driver as serve_driver  # noqa: E402
from worker.serve import wire  # noqa: E402

SPENT: dict[str, float] = defaultdict(float)
_clock = time.thread_time  # CPU, not wall: the machine is shared


def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t = _clock()
        try:
            return fn(*args, **kwargs)
        finally:
            SPENT[name] += _clock() - t

    return wrapper


class TimedDecoder:
    def __init__(self, name: str, decoder: Any) -> None:
        self.decode = timed(name, decoder.decode)


def instrument(registry: Any) -> None:
    wire.chat_decoder = TimedDecoder("body", wire.chat_decoder)  # type: ignore[assignment]
    wire.head_decoder = TimedDecoder("body", wire.head_decoder)  # type: ignore[assignment]
    serve_driver.unseal = timed("envelope", serve_driver.unseal)
    serve_driver.seal = timed("envelope", serve_driver.seal)
    batch_loop.decode_batch = timed("record", batch_loop.decode_batch)
    batch_loop.process_batch = timed("core+tables", batch_loop.process_batch)
    for m in ("held", "stored", "of", "tool_schemas", "note"):
        setattr(registry.tables, m, timed("tables", getattr(registry.tables, m)))
    serve_driver.empty_chunk = timed("response", serve_driver.empty_chunk)
    serve_driver.merged = timed("response", serve_driver.merged)
    d = serve_driver.Driver
    d._run = timed("loop", d._run)  # type: ignore[method-assign]
    d.chat = timed("driver", d.chat)  # type: ignore[method-assign]


def tool(i: int) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": f"get_weather_{i}",
            "description": "The weather at a place, today or on a given day.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "days": {"type": "integer"},
                    "unit": {"type": "string", "enum": ["c", "f"]},
                },
                "required": ["city"],
            },
        },
    }


def bodies(rid: str, ids: list[int], model: str, tools: int) -> tuple[bytes, bytes]:
    chat = dict(sb.CHAT_REQUEST, model=model)
    if tools:
        chat["tools"] = [tool(i) for i in range(tools)]
    head = (
        b'{"stream":true,"model":' + json.dumps(model).encode() + b',"generate_chunk":'
        b'{"request_id":"' + rid.encode() + b'","choices":[{"index":0,"token_ids":'
    )
    tail = (
        b',"prompt_tokens":'
        + str(len(sb.PROMPT_IDS)).encode()
        + b',"prompt_token_ids":'
        + json.dumps(sb.PROMPT_IDS).encode()
        + b',"chat_request":'
        + json.dumps(chat).encode()
        + b"}"
    )
    return head, tail


class Conn:
    """Calls the ASGI app as uvicorn would: one http.request message, two sends."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def post(self, body: bytes) -> tuple[int, bytes]:
        scope = {
            "type": "http",
            "method": "POST",
            "path": sb.CHAT,
            "headers": [
                (b"host", b"127.0.0.1"),
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
        got: list[Any] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            got.append(message)

        t = _clock()
        run_sync(self.app(scope, receive, send))
        SPENT["app"] += _clock() - t
        return got[0]["status"], got[1]["body"]


def stream(conn: Conn, rid: str, ids: list[int], model: str, tools: int) -> int:
    head, tail = bodies(rid, ids, model, tools)
    state = b"null"
    for i in range(len(ids)):
        finish = b'"stop"' if i + 1 >= len(ids) else b"null"
        body = (
            head
            + json.dumps(ids[i : i + 1]).encode()
            + b',"finish_reason":'
            + finish
            + b'}]},"stream_state":'
            + state
            + tail
        )
        status, data = conn.post(body)
        if status != 200:
            raise RuntimeError(f"HTTP {status}: {data[:300]!r}")
        state = bytes(sb._answer.decode(data).stream_state)
    return len(ids)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=50)
    ap.add_argument("--streams", type=int, default=200)
    ap.add_argument("--tools", type=int, default=0)
    ap.add_argument("--server-us", type=float, default=0.0, help="serve_bench's CPU per POST")
    args = ap.parse_args()
    models = Path("/tmp/serve-split-models.toml")
    models.write_text(sb.MODELS_TOML)
    registry = load_registry(str(models))
    instrument(registry)
    conn = Conn(serve_app.build_app(registry))
    ids = sb.output_ids(args.tokens)
    for s in range(20):  # warm-up
        stream(conn, f"warm-{s}", ids, "deepseek-v4", args.tools)
    SPENT.clear()
    n = 0
    t0 = time.process_time()
    for s in range(args.streams):
        n += stream(conn, f"s-{s}", ids, "deepseek-v4", args.tools)
    cpu = time.process_time() - t0
    us = {k: v / n * 1e6 for k, v in SPENT.items()}
    core = us["core+tables"] - us.get("tables", 0.0)
    loop_rest = us["loop"] - us["core+tables"] - us["record"]
    driver_rest = us["driver"] - us["body"] - us["envelope"] - us["loop"] - us.get("response", 0)
    rows = [
        ("body decoding", us["body"]),
        ("record decoding (decode_batch)", us["record"]),
        ("tables", us.get("tables", 0.0)),
        ("state envelope", us["envelope"]),
        ("core", core),
        ("response building", us.get("response", 0.0) + driver_rest),
        ("loop glue (run_batch's other steps)", loop_rest),
        ("ASGI endpoint glue (headers, body, metrics)", us["app"] - us["driver"]),
    ]
    total = us["app"]
    if args.server_us:
        rows.append(("HTTP (uvicorn, httptools, uvloop)", args.server_us - total))
        total = args.server_us
    print(
        f"{n} POSTs, {args.tokens}-token streams, {args.tools} tools; "
        f"process CPU {cpu / n * 1e6:.1f} µs/POST"
    )
    print("| stage | µs per POST | share |")
    print("|---|--:|--:|")
    for name, v in rows:
        print(f"| {name} | {v:.1f} | {v / total:.0%} |")
    print(f"| total | {total:.1f} | 100% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
