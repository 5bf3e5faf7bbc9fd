"""Redis round trips and time per batch: one Redis, a 1-master and a 3-master Redis Cluster.

    .venv/bin/python bench/redis_bench.py [BATCH ...]      # default: 64 500

Per batch, as the worker does: one `load_many` and one `save_many` (a compare-and-set for
every request, each a ~100-byte state) of BATCH requests, on local redis-server processes
(`worker/adapters/local/embedded.py`: `RedisServer`; `local_cluster.py`: `LocalRedisCluster`
with a replica per master). Medians over ROUNDS batches after WARMUP; round trips as the
store counts them (one per master touched in cluster mode). Prints one line per store and
batch size.
"""

from __future__ import annotations

import asyncio
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as `python bench/redis_bench.py`: import worker/
    sys.path.insert(0, str(ROOT))

from worker.adapters.local.embedded import RedisServer  # noqa: E402
from worker.adapters.local.local_cluster import LocalRedisCluster  # noqa: E402
from worker.adapters.state.redis_store import RedisStore  # noqa: E402
from worker.ports import StateWrite  # noqa: E402

ROUNDS = 200
WARMUP = 10


async def measure(url: str, mode: str, n: int, wait: int = 0) -> dict[str, float]:
    store = RedisStore(url, mode=mode, key_prefix=f"b{n}{wait}:", wait_replicas=wait)
    ids = [f"chatcmpl-{i:06d}" for i in range(n)]
    blob = b"x" * 100
    load_t, save_t, load_rt, save_rt = [], [], [], []
    try:
        for k in range(ROUNDS + WARMUP):
            t0, r0 = time.perf_counter(), store.round_trips
            got = await store.load_many(ids)
            t1, r1 = time.perf_counter(), store.round_trips
            expected = {r: (s.seq if s is not None else None) for r, s in got.items()}
            writes = [StateWrite(r, k, blob, False, expected[r], 1) for r in ids]
            refused = await store.save_many(writes)
            t2, r2 = time.perf_counter(), store.round_trips
            if refused:
                raise AssertionError(f"{len(refused)} writes refused")
            if k >= WARMUP:
                load_t.append(t1 - t0)
                save_t.append(t2 - t1)
                load_rt.append(r1 - r0)
                save_rt.append(r2 - r1)
    finally:
        await store.close()
    return {
        "load_ms": statistics.median(load_t) * 1000,
        "save_ms": statistics.median(save_t) * 1000,
        "round_trips": statistics.mean(load_rt) + statistics.mean(save_rt),
    }


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [64, 500]
    machine = platform.processor() or platform.machine()
    print(f"# {platform.node()} {machine}, {ROUNDS} batches each")
    with RedisServer() as one, LocalRedisCluster(1, 1) as c1, LocalRedisCluster(3, 1) as c3:
        stores = [
            ("standalone", one.url, "standalone", 0),
            ("cluster, 1 master", c1.url, "cluster", 0),
            ("cluster, 3 masters", c3.url, "cluster", 0),
            ("cluster, 3 masters, WAIT 1", c3.url, "cluster", 1),
            ("proxy mode (1 server)", one.url, "proxy", 0),
        ]
        for name, url, mode, wait in stores:
            for n in sizes:
                r = asyncio.run(measure(url, mode, n, wait))
                print(
                    f"{name:28s} batch {n:4d}: load {r['load_ms']:6.2f} ms, save "
                    f"{r['save_ms']:6.2f} ms, per batch {r['load_ms'] + r['save_ms']:6.2f} ms, "
                    f"{r['round_trips']:.1f} round trips",
                    flush=True,
                )


if __name__ == "__main__":
    main()
