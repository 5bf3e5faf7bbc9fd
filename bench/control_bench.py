"""Early stop (`--control-topic`): what it saves and what it costs.

    .venv/bin/python bench/control_bench.py            # ~1 min, writes bench/results/
    .venv/bin/python bench/control_bench.py --quick    # smaller, prints only

1. The cost, in-process (the one loop, `MemoryStore`, a list sink; DeepSeek V4's real
   tokenizer, one token per record, 500-record batches of interleaved requests): the same
   workload with control off and on, best-of-N round robin on one core. Reported per
   record and per request; the control records are checked (one per request).
2. The saving, on a real broker (the demo's: Apache Kafka from the cache, else tansu) with
   a real worker, Redis and `Publisher(control_topic=…)` as the engine side: requests
   paced at an engine's rate, each with a stop string at a uniformly random point. For
   each: the tokens after its stop (what an engine without early stop generates for
   nothing), the tokens the engine side held back, and the round trip (the record that
   fired the stop published → its control record seen by the publisher).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import random
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import REPO, code_version, cpu_model, pin_one_core, timed_round_robin

from tests.support.helpers import ListSink, ListSource
from worker.adapters.local.embedded import RedisServer, create_topics
from worker.adapters.state.memory_store import MemoryStore
from worker.adapters.state.redis_store import RedisStore
from worker.batch.checkpoint import Checkpoint
from worker.batch.loop import run_batch, run_sync
from worker.config import load_registry
from worker.constants import CONTROL
from worker.core.model import Registry
from worker.observe.metrics import Metrics
from worker.ports import InRecord
from worker.run.runner import Runner
from worker.settings import FLAGS, Settings
from worker.tools.publisher import Publisher
from worker.tools.servers import demo_broker

WORDS = [
    "the",
    "a",
    "of",
    "stream",
    "token",
    "engine",
    "worker",
    "answer",
    "model",
    "request",
    "text",
    "word",
]
STOP = " XYZZY"  # appears once per request, at its stop point


def workload(reg: Registry, requests: int, length: int, seed: int) -> list[list[int]]:
    """Token ids per request: random words with the stop word at a random point."""
    tok = reg.models[reg.default].tokenizer
    rng = random.Random(seed)
    out = []
    for _ in range(requests):
        words = [rng.choice(WORDS) for _ in range(length)]
        words.insert(rng.randrange(1, length), STOP.strip())
        out.append(list(tok.encode(" ".join(words), add_special_tokens=False).ids))
    return out


def records(streams: list[list[int]], seed: int) -> list[bytes]:
    rng = random.Random(seed)
    per = []
    for n, ids in enumerate(streams):
        rid = f"r{n}"
        recs = []
        for i, t in enumerate(ids):
            rec: dict[str, Any] = {
                "request_id": rid,
                "seq": i,
                "generate_chunk": {"choices": [{"index": 0, "token_ids": [t]}]},
            }
            if i == 0:
                rec["chat_request"] = {"stop": [STOP]}
            recs.append(json.dumps(rec).encode())
        recs.append(json.dumps({"request_id": rid, "seq": len(ids), "type": "end"}).encode())
        per.append(recs)
    out = []
    while any(per):  # interleaved, each request in order
        q = rng.choice([q for q in per if q])
        out.append(q.pop(0))
    return out


def run_all(reg: Registry, values: list[bytes], control: bool) -> ListSink:
    source, sink, store = ListSource(), ListSink(), MemoryStore()
    checkpoint = Checkpoint(source, store)
    for i in range(0, len(values), 500):
        batch = source.batch([InRecord(v) for v in values[i : i + 500]])
        run_sync(
            run_batch(
                batch,
                registry=reg,
                sink=sink,
                checkpoint=checkpoint,
                max_record_bytes=1 << 20,
                control=control,
            )
        )
    return sink


def cost(reg: Registry, requests: int, length: int, repeats: int) -> dict[str, Any]:
    streams = workload(reg, requests, length, seed=1)
    values = records(streams, seed=2)
    on = run_all(reg, values, True)
    controls = [json.loads(o.value) for o in on.outputs if o.kind == CONTROL]
    assert len(controls) == requests == len({c["request_id"] for c in controls})
    (off_t, off_med), (on_t, on_med) = timed_round_robin(
        [lambda: run_all(reg, values, False), lambda: run_all(reg, values, True)], repeats
    )
    n = len(values)
    return {
        "records": n,
        "requests": requests,
        "off_us_per_record": off_t / n * 1e6,
        "on_us_per_record": on_t / n * 1e6,
        "off_median_us": off_med / n * 1e6,
        "on_median_us": on_med / n * 1e6,
        "extra_us_per_request": (on_t - off_t) / requests * 1e6,
        "tokens_after_stop_pct": 100
        * sum(len(s) - c["output_tokens"] for s, c in zip(streams, _by_rid(controls), strict=True))
        / sum(len(s) for s in streams),
    }


def _by_rid(controls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(controls, key=lambda c: int(c["request_id"][1:]))


async def saving(reg: Registry, requests: int, length: int, rate: float) -> dict[str, Any]:
    with ExitStack() as stack:
        redis = stack.enter_context(RedisServer())
        broker, broker_name = demo_broker()
        stack.enter_context(broker)
        topics = ["in", "out", "dlq", "ctl"]
        await create_topics(broker.bootstrap, topics, 4)
        values = {f.attr: f.default for f in FLAGS}
        values.update(
            bootstrap_servers=broker.bootstrap, redis_url=redis.url, metrics_port=0,
            input_topic="in", output_topic="out", dlq_topic="dlq", control_topic="ctl",
            session_timeout_ms=3000, heartbeat_interval_ms=500, log_level="WARNING",
        )  # fmt: skip
        s = Settings(**values)
        runner = Runner(s, reg, RedisStore(redis.url, key_prefix="b:"), Metrics())
        worker = asyncio.create_task(runner.run())
        while not runner.metrics.ready:
            await asyncio.sleep(0.05)
        streams = workload(reg, requests, length, seed=3)
        fired: dict[str, float] = {}  # request → when its stop-firing record went out
        seen: dict[str, float] = {}
        tok = reg.models[reg.default].tokenizer
        stop_at = [_stop_index(tok, ids) for ids in streams]
        try:
            async with Publisher(broker.bootstrap, "in", control_topic="ctl") as pub:
                for i in range(max(len(x) for x in streams)):  # one token per request per tick
                    tick = time.monotonic()
                    for n, ids in enumerate(streams):
                        rid = f"r{n}"
                        if pub.stopped(rid) and rid not in seen:
                            seen[rid] = time.monotonic()
                        if i < len(ids):
                            context = {"chat_request": {"stop": [STOP]}}
                            await pub.chunk(
                                rid, {"choices": [{"index": 0, "token_ids": [ids[i]]}]}, context
                            )
                            if i == stop_at[n]:
                                fired[rid] = time.monotonic()
                    await pub.flush()
                    await asyncio.sleep(max(0.0, 1 / rate - (time.monotonic() - tick)))
                for n in range(len(streams)):
                    await pub.end(f"r{n}")
        finally:
            runner.request_stop()
            await worker
    total = sum(len(x) for x in streams)
    after = sum(len(x) - 1 - k for x, k in zip(streams, stop_at, strict=True))
    trips = [(seen[r] - fired[r]) * 1000 for r in fired if r in seen]
    return {
        "broker": broker_name,
        "requests": requests,
        "rate_tokens_per_s": rate,
        "tokens": total,
        "tokens_after_stop": after,
        "tokens_held_back": pub.tokens_held_back,
        "round_trip_ms_p50": statistics.median(trips) if trips else float("nan"),
        "round_trip_ms_max": max(trips) if trips else float("nan"),
        "stopped": len(seen),
    }


def _stop_index(tok: Any, ids: list[int]) -> int:
    """The index of the token that completes the stop word."""
    for i in range(len(ids)):
        if STOP in tok.decode(ids[: i + 1]):
            return i
    raise AssertionError("no stop word")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    reg = load_registry(None)
    pinned = pin_one_core(1)
    c = cost(reg, 50 if args.quick else 200, 60 if args.quick else 150, 3 if args.quick else 7)
    print(json.dumps(c, indent=1))
    import os

    os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
    s = asyncio.run(saving(reg, 10 if args.quick else 40, 60 if args.quick else 150, 50.0))
    print(json.dumps(s, indent=1))
    if args.quick:
        return
    day = datetime.date.today().isoformat()
    held = 100 * s["tokens_held_back"] / max(1, s["tokens_after_stop"])
    out = REPO / "bench" / "results" / f"control-{day}.md"
    out.write_text(
        f"# bench/control_bench.py, {day}\n\n"
        f"Machine: {cpu_model()}, {pinned} for the cost; code {code_version()}.\n\n"
        "## Cost (in-process, one loop, one token per record)\n\n"
        "| | µs/record best | median |\n|---|---|---|\n"
        f"| control off | {c['off_us_per_record']:.2f} | {c['off_median_us']:.2f} |\n"
        f"| control on | {c['on_us_per_record']:.2f} | {c['on_median_us']:.2f} |\n\n"
        f"{c['records']} records, {c['requests']} requests, one control record each; on − off: "
        f"{c['extra_us_per_request']:+.1f} µs per request (best of N; runs on this shared "
        "machine differ by more than that, so: no cost measurable); "
        f"{c['tokens_after_stop_pct']:.1f} % of the tokens came after their request's stop.\n\n"
        "## Saving (real broker, worker, Redis and the Publisher as the engine side)\n\n"
        f"{s['requests']} requests on {s['broker']}, each paced at {s['rate_tokens_per_s']:.0f} "
        f"tokens/s: {s['tokens']} tokens, {s['tokens_after_stop']} after their stop "
        f"(generated for nothing without early stop); the engine side held back "
        f"{s['tokens_held_back']} of them ({held:.0f} %). "
        f"Round trip, stop-firing record published → control record seen: p50 "
        f"{s['round_trip_ms_p50']:.0f} ms, max {s['round_trip_ms_max']:.0f} ms "
        f"({s['stopped']} of {s['requests']} requests seen stopped).\n",
        encoding="utf-8",
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
