"""The state-store contract's harness, shared by test_state_store.py, test_state_tables.py and
test_state_versions.py: `harness` (a fixture: the memory store, and the Redis store on the
session's redis-server, in proxy mode and on the Redis Cluster), its fake clock, and `w`,
one state write."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import pytest
import redis.asyncio
import redis.exceptions

from worker.adapters.state.memory_store import MemoryStore
from worker.adapters.state.redis_store import RedisStore
from worker.ports import StateWrite

TTL_S = 3600
DONE_TTL_S = 600
# Short TTLs for the expiry test: long enough for the writes to land first.
SHORT_TTL_S = 0.5
BATCH = 500


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@dataclass
class Harness:
    """Builds a store of one kind, and reads what only that kind can show (TTLs)."""

    kind: str
    redis_url: str | None = None
    clock: FakeClock = field(default_factory=FakeClock)
    prefix: str = field(default_factory=lambda: f"test:{uuid.uuid4().hex[:8]}:")

    def make(
        self, ttl_s: float = TTL_S, done_ttl_s: float = DONE_TTL_S
    ) -> MemoryStore | RedisStore:
        if self.kind == "memory":
            return MemoryStore(ttl_s, done_ttl_s, self.prefix, now=self.clock)
        assert self.redis_url is not None
        return RedisStore(self.redis_url, ttl_s, done_ttl_s, self.prefix, mode=self.mode)

    @property
    def mode(self) -> str:
        return {"redis-cluster": "cluster", "redis-proxy": "proxy"}.get(self.kind, "standalone")

    def client(self) -> redis.asyncio.Redis | redis.asyncio.RedisCluster:
        """A plain redis-py client of the server (routing by key in a cluster)."""
        assert self.redis_url is not None
        if self.kind == "redis-cluster":
            return cluster_client(self.redis_url)
        return redis.asyncio.Redis.from_url(self.redis_url)

    def trips_per_batch(self, request_ids: list[str]) -> int:
        """Round trips of one batch over these keys: 1, or in a cluster the masters
        serving their slots (known after the store's first call)."""
        return 1 if self.kind != "redis-cluster" else self.masters_touched

    masters_touched: int = 1

    async def ttl_s(self, store: MemoryStore | RedisStore, request_id: str) -> float | None:
        """Seconds left before the request's state expires (None: no state)."""
        if isinstance(store, MemoryStore):
            return store.ttl_left_s(request_id)
        client = self.client()
        try:
            pttl = int(await client.pttl(store.key(request_id)))
        finally:
            await client.aclose()
        return None if pttl < 0 else pttl / 1000

    async def advance(self, seconds: float) -> None:
        if self.kind == "memory":
            self.clock.t += seconds
        else:
            await asyncio.sleep(seconds)

    def run(
        self,
        body: Callable[[MemoryStore | RedisStore], Awaitable[None]],
        ttl_s: float = TTL_S,
        done_ttl_s: float = DONE_TTL_S,
    ) -> None:
        async def main() -> None:
            store = self.make(ttl_s, done_ttl_s)
            try:
                await body(store)
            finally:
                await store.close()

        asyncio.run(main())


def cluster_client(seeds: str) -> redis.asyncio.RedisCluster:
    """redis-py's own cluster client on the first seed node: the tests' independent view."""
    first = seeds.split(",")[0]
    return redis.asyncio.RedisCluster.from_url(first if "://" in first else f"redis://{first}")


@pytest.fixture(
    params=[
        "memory",
        pytest.param("redis", marks=pytest.mark.integration),
        # single-key commands only (Redis Cluster behind a proxy): the same contract
        pytest.param("redis-proxy", marks=pytest.mark.integration),
        # a real Redis Cluster, 3 masters with a replica each: the same contract
        pytest.param("redis-cluster", marks=pytest.mark.integration),
    ]
)
def harness(request: pytest.FixtureRequest) -> Harness:
    if request.param == "redis-cluster":
        return Harness(request.param, redis_url=request.getfixturevalue("redis_cluster_url"))
    if request.param != "memory":
        return Harness(request.param, redis_url=request.getfixturevalue("redis_url"))
    return Harness("memory")


def w(
    rid: str,
    seq: int,
    expected: int | None,
    *,
    epoch: int = 1,
    done: bool = False,
    blob: bytes | None = None,
) -> StateWrite:
    if blob is None:
        blob = f"{rid}@{seq}".encode()
    return StateWrite(rid, seq, blob, done, expected, epoch)
