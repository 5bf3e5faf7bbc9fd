"""CPU per streamed token of the pieces of the gateway loop that run once per token, in
process, without servers: this checkout against another (`--against TREE`).

    .venv/bin/python bench/token_path_bench.py                        # this checkout
    .venv/bin/python bench/token_path_bench.py --against /tmp/before  # side by side

The end-to-end figure (`e2e_bench.py`'s CPU per token) moves by ±15 % with the other work
on a shared machine; these pieces, timed alone, do not. Per piece, process CPU
(`time.process_time`) per operation, best of `--repeats`, on uvloop as the gateway and
the worker run:

- `engine events`: the gateway reading one generate SSE event (one HTTP chunk) from the
  engine's stream, parsed (httpx over an in-memory transport: the client's layers, no
  socket);
- `reply wait`: an output handed to its request's mailbox and taken by the request
  (`Reply.put` then `Reply.get`, the output already there, as at 8 streams);
- `batch steps`: the five bounded steps of one worker batch whose server calls answer at
  once (`steps.bounded`, a step timeout set, as `run` has one).

Each tree runs in its own child process (`python -c` with the tree first on sys.path), the
trees alternating, so a burst of other work slows a run of each side.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIECES = ("engine events", "reply wait", "batch steps")

# Runs in the child, with the measured tree first on sys.path.
CHILD = r"""
import asyncio, json, sys, time
import httpx, uvloop
from worker.gateway.engine import Engine
from worker.gateway.replies import Reply
from worker.batch.steps import bounded

N = int(sys.argv[1])
EVENT = json.dumps({"request_id": "chatcmpl-0123456789abcdef", "choices": [{"index": 0,
    "token_ids": [19923], "logprobs": None, "finish_reason": None}]}).encode()


async def events() -> float:
    async def body():
        for _ in range(N):
            yield b"data: " + EVENT + b"\n\n"
        yield b"data: [DONE]\n\n"

    def handler(request):
        return httpx.Response(200, content=body(), headers={"content-type": "text/event-stream"})

    engine = Engine("http://engine", transport=httpx.MockTransport(handler))
    t = time.process_time()
    async with engine.generate({"request_id": "r"}, {}) as g:
        async for _ in g.events():
            pass
    used = time.process_time() - t
    await engine.aclose()
    return used / N


async def replies() -> float:
    reply = Reply("r", 0)
    t = time.process_time()
    for i in range(N):
        reply.put(i)
        await reply.get(30.0)
    return (time.process_time() - t) / N


async def steps() -> float:
    async def answered():
        return None

    t = time.process_time()
    for _ in range(N // 5):
        for step in ("claim", "load", "produce", "save", "commit"):
            await bounded(answered(), 30.0, step)
    return (time.process_time() - t) / (N // 5)


async def main():
    print(json.dumps({"engine events": await events(), "reply wait": await replies(),
                      "batch steps": await steps()}))

uvloop.run(main())
"""


def run_child(tree: Path, n: int) -> dict[str, float]:
    code = f"import sys; sys.path.insert(0, {str(tree)!r})\n" + CHILD
    done = subprocess.run(
        [sys.executable, "-c", code, str(n)],
        capture_output=True,
        text=True,
        check=True,
        cwd=tree,
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--against", type=Path, help="another checkout, measured beside this one")
    ap.add_argument("--repeats", type=int, default=5, help="runs per tree, best kept (default 5)")
    ap.add_argument("-n", type=int, default=20_000, help="operations per run (default 20,000)")
    args = ap.parse_args(argv)
    trees = {"this": ROOT} | ({"against": args.against.resolve()} if args.against else {})
    best: dict[str, dict[str, float]] = {name: {} for name in trees}
    for _ in range(args.repeats):
        for name, tree in trees.items():
            for piece, s in run_child(tree, args.n).items():
                best[name][piece] = min(best[name].get(piece, s), s)
    names = list(trees)
    print("| piece | " + " | ".join(f"{n} µs" for n in names) + " |")
    print("|---|" + "--:|" * len(names))
    for piece in PIECES:
        cells = " | ".join(f"{best[n][piece] * 1e6:.2f}" for n in names)
        print(f"| {piece} | {cells} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
