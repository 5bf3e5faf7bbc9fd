"""What the Redis Cluster tests share (test_redis_cluster.py, test_redis_cluster_start.py and
tests/chaos/test_redis_cluster.py): a state write, one store's run, a worker started on a
cluster, and waiting until every node knows the others by name."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from tests.support import servers
from worker.adapters.local.embedded import free_port
from worker.adapters.state.redis_store import RedisStore
from worker.ports import StateWrite


def w(rid: str, seq: int, expected: int | None, *, epoch: int = 1, tag: str = "") -> StateWrite:
    return StateWrite(rid, seq, f"{rid}@{seq}{tag}".encode(), False, expected, epoch)


def run(url: str, body: Callable[[RedisStore], Awaitable[None]], prefix: str | None = None) -> None:
    async def main() -> None:
        store = RedisStore(url, key_prefix=prefix or f"t{uuid.uuid4().hex[:8]}:", mode="cluster")
        try:
            await body(store)
        finally:
            await store.close()

    asyncio.run(main())


ROOT = Path(__file__).resolve().parents[3]


def worker_argv(redis_url: str, *extra: str) -> list[str]:
    """`derender-worker run --redis-mode cluster` against a broker nobody listens on: the
    state store starts first, so this shows what the store's start does on its own."""
    return [
        sys.executable, "-m", "worker", "run",
        "--redis-mode", "cluster",
        "--redis-url", redis_url,
        "--bootstrap-servers", f"127.0.0.1:{free_port()}",
        "--metrics-port", "0",
        *extra,
    ]  # fmt: skip


def worker_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("DERENDER_")}


def run_worker(redis_url: str, *extra: str, timeout_s: float) -> subprocess.CompletedProcess[str]:
    """The worker (`worker_argv`) run to its end."""
    return subprocess.run(
        worker_argv(redis_url, *extra),
        cwd=ROOT,
        env=worker_env(),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def wait_all_named(node: servers.ClusterNode, count: int, timeout_s: float = 30) -> None:
    """Until `node`'s CLUSTER SLOTS reply names `count` nodes (masters and replicas)."""
    deadline = time.monotonic() + timeout_s
    while True:
        named = {(n[0], int(n[1])) for entry in node.call("CLUSTER", "SLOTS") for n in entry[2:]}
        if len(named) == count:
            return
        assert time.monotonic() < deadline, f"{node.addr} names {len(named)} of {count} nodes"
        time.sleep(0.05)
