"""Where one `serve` POST's CPU goes: serve_bench's load on a real server, sampled by py-spy.

    python bench/serve_split.py [--tokens 50] [--clients 8] [--seconds 10] [--rate 500]

`serve` starts as serve_bench starts it; `--clients` keep-alive connections stream
`--tokens`-token DeepSeek V4 outputs in 1-token chunks (parsers on, each call carrying the
previous answer's stream_state: serve_bench's bodies). py-spy samples the server
(`record --format raw --nonblocking`) while /proc counts its CPU; each sample's stack goes
to the first stage below that any of its frames names, and a stage's µs per POST is its
share of the samples × the server's CPU per POST. No wrappers in the server (they would
cost more than the stages they time).

Stages (a sample is the stage of its deepest frame that one of them names):
- tables: the request's tables (core/tables.py's TableCache: held, stored, of);
- envelope: stream_state open and seal (serve/stream_state.py: base64, msgpack, BLAKE2b);
- record decoding: the ChunkRecord the driver builds, decoded by the loop (decode_batch);
- core: process_batch less the tables (state decode, detokenize, parsers, render, encode);
- response building: the answer's chunk (serve/chunks.py, the driver's last lines);
- loop glue: run_batch's other steps (checkpoint, bounds, the adapters);
- body decoding: the endpoint's body Struct and the generate_chunk's head (msgspec);
- driver glue: the rest of serve/driver.py (the record's bytes, the answer's bytes);
- ASGI endpoint: serve/app.py (headers, body, metrics, the two ASGI sends);
- HTTP: everything else — uvicorn's protocol and cycle, httptools, the ASGI task, uvloop's
  reads, writes and wake-ups (the write's send(2) is most of it).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import serve_bench as sb  # noqa: E402


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
    ("ASGI endpoint", ("serve/app.py", "prometheus_client/", "observe/metrics.py")),
    (HTTP, ("uvicorn/", "serve/protocol.py", "asyncio/")),
]


def stage_of(stack: str) -> str:
    """The stage of the deepest frame any stage names (HTTP's frames included: the
    ASGI sends run uvicorn's writes)."""
    for frame in reversed(stack.split(";")):
        for name, marks in STAGES:
            if any(m in frame for m in marks):
                return name
    return HTTP


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


async def load(port: int, clients: int, tokens: int, seconds: float) -> int:
    ids = sb.output_ids(tokens)
    conns = [await sb.Conn.open(port) for _ in range(clients)]
    deadline = time.monotonic() + seconds

    async def client(k: int, conn: sb.Conn) -> int:
        n, s = 0, 0
        while time.monotonic() < deadline:
            n += await sb.stream_once(conn, f"split-{k}-{s}", ids, 1, "deepseek-v4", deadline)
            s += 1
        return n

    try:
        return sum(await asyncio.gather(*(client(k, c) for k, c in enumerate(conns))))
    finally:
        for c in conns:
            c.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=50)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rate", type=int, default=500, help="py-spy samples per second")
    args = ap.parse_args()
    spy = Path(sys.executable).parent / "py-spy"
    with sb.ours() as (port, pid), tempfile.TemporaryDirectory() as tmp:
        asyncio.run(load(port, args.clients, args.tokens, 2.0))  # warm-up
        raw = Path(tmp) / "raw.txt"
        rec = subprocess.Popen(
            [
                *(str(spy), "record", "--pid", str(pid), "--format", "raw", "--nonblocking"),
                *("-r", str(args.rate), "-d", str(int(args.seconds) + 2), "-o", str(raw)),
            ],
            stdout=subprocess.DEVNULL,
        )
        time.sleep(1.0)  # (py-spy attaches)
        cpu0 = cpu_s(pid)
        posts = asyncio.run(load(port, args.clients, args.tokens, args.seconds))
        cpu = cpu_s(pid) - cpu0
        rec.wait(args.seconds + 30)
        samples: Counter[str] = Counter()
        for line in raw.read_text().splitlines() if raw.exists() else []:
            stack, _, n = line.rpartition(" ")
            samples[stage_of(stack)] += int(n)
    total = sum(samples.values())
    if not total:
        print("py-spy recorded nothing (is ptrace allowed?)")
        return 1
    per_post = cpu / posts * 1e6
    print(
        f"{posts} POSTs, {args.tokens}-token streams, {args.clients} clients: server CPU "
        f"{per_post:.1f} µs per POST ({posts / cpu:,.0f} per server-CPU-s), {total} samples"
    )
    print("| stage | µs per POST | share |")
    print("|---|--:|--:|")
    for name, _ in STAGES:
        share = samples[name] / total
        print(f"| {name} | {share * per_post:.1f} | {share:.0%} |")
    print(f"| total | {per_post:.1f} | 100% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
