"""One contract suite for every StateStore: the memory store and the Redis store (against a
real redis-server from the session fixture; in `proxy` mode, single-key commands, on the
same server; and in `cluster` mode against a real Redis Cluster of 3 masters with a
replica each). Each test is a sync wrapper around `asyncio.run`, and each Redis test uses
its own key prefix on the shared server."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field

import pytest
import redis.asyncio
import redis.exceptions
from redis.asyncio.connection import AbstractConnection

from tests.support import servers
from worker.adapters.state.memory_store import MemoryStore
from worker.adapters.state.redis_store import RedisStore
from worker.ports import StateWrite, Stored
from worker.urls import redact_url

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


def test_missing_keys_load_as_none(harness: Harness) -> None:
    async def body(store: MemoryStore | RedisStore) -> None:
        assert await store.load_many(["a", "b"]) == {"a": None, "b": None}
        assert await store.load_many([]) == {}

    harness.run(body)


def test_save_then_load(harness: Harness) -> None:
    odd = bytes(range(256)) + b"\x00\r\n"  # any bytes, NULs and CRLF included

    async def body(store: MemoryStore | RedisStore) -> None:
        refused = await store.save_many(
            [w("a", 0, None), w("b", 3, None, blob=odd), w("ü{x}", 1, None)]
        )
        assert refused == []
        got = await store.load_many(["a", "b", "ü{x}", "c"])
        assert got == {
            "a": Stored(0, b"a@0"),
            "b": Stored(3, odd),
            "ü{x}": Stored(1, "ü{x}@1".encode()),
            "c": None,
        }
        assert await store.save_many([]) == []

    harness.run(body)


def test_write_refused_when_expected_seq_differs(harness: Harness) -> None:
    async def body(store: MemoryStore | RedisStore) -> None:
        assert await store.save_many([w("a", 4, None)]) == []
        assert await store.save_many([w("a", 6, 5)]) == ["a"]
        assert await store.save_many([w("a", 6, 3)]) == ["a"]
        assert (await store.load_many(["a"]))["a"] == Stored(4, b"a@4")
        assert await store.save_many([w("a", 6, 4)]) == []
        assert (await store.load_many(["a"]))["a"] == Stored(6, b"a@6")

    harness.run(body)


def test_seqs_beyond_double_precision_are_compared_exactly(harness: Harness) -> None:
    """A seq may be up to 2**63 - 1; Lua numbers are doubles, equal for 2**60 and 2**60 + 1."""
    big = 2**60

    async def body(store: MemoryStore | RedisStore) -> None:
        assert await store.save_many([w("a", big, None)]) == []
        assert await store.save_many([w("a", big + 2, big + 1)]) == ["a"]
        assert await store.save_many([w("a", big + 1, big, blob=b"other")]) == []
        assert (await store.load_many(["a"]))["a"] == Stored(big + 1, b"other")
        top = 2**63 - 1
        assert await store.save_many([w("a", top, big + 1)]) == []
        assert (await store.load_many(["a"]))["a"] == Stored(top, b"a@" + str(top).encode())

    harness.run(body)


def test_write_refused_when_state_exists_but_none_expected(harness: Harness) -> None:
    async def body(store: MemoryStore | RedisStore) -> None:
        assert await store.save_many([w("a", 0, None)]) == []
        assert await store.save_many([w("a", 0, None, blob=b"other")]) == ["a"]
        assert (await store.load_many(["a"]))["a"] == Stored(0, b"a@0")

    harness.run(body)


def test_write_refused_when_state_expected_but_gone(harness: Harness) -> None:
    async def body(store: MemoryStore | RedisStore) -> None:
        assert await store.save_many([w("a", 3, 2)]) == ["a"]
        assert (await store.load_many(["a"]))["a"] is None

    harness.run(body)


def test_older_epoch_is_fenced_newer_is_accepted(harness: Harness) -> None:
    async def body(store: MemoryStore | RedisStore) -> None:
        assert await store.save_many([w("a", 0, None, epoch=2)]) == []
        # A zombie of epoch 1 read seq 0 too: refused although its seq matches.
        assert await store.save_many([w("a", 1, 0, epoch=1)]) == ["a"]
        assert (await store.load_many(["a"]))["a"] == Stored(0, b"a@0")
        # The same epoch goes on, and a newer owner takes over.
        assert await store.save_many([w("a", 1, 0, epoch=2)]) == []
        assert await store.save_many([w("a", 2, 1, epoch=3)]) == []
        # Now epoch 2 is the zombie.
        assert await store.save_many([w("a", 3, 2, epoch=2)]) == ["a"]
        assert (await store.load_many(["a"]))["a"] == Stored(2, b"a@2")

    harness.run(body)


def test_the_same_write_again_is_accepted(harness: Harness) -> None:
    """A retry after a lost reply re-sends a write that was applied: not a refusal."""

    async def body(store: MemoryStore | RedisStore) -> None:
        first = [w("a", 0, None), w("b", 5, None)]
        assert await store.save_many(first) == []
        assert await store.save_many(first) == []
        assert await store.save_many([w("a", 1, 0), w("b", 6, 5)]) == []
        assert await store.save_many([w("a", 1, 0), w("b", 6, 5)]) == []
        # Same seq but other bytes, or another epoch: a different write, refused.
        assert await store.save_many([w("a", 1, 0, blob=b"x")]) == ["a"]
        assert await store.save_many([w("b", 6, 5, epoch=2)]) == ["b"]

    harness.run(body)


def test_a_batch_reports_exactly_its_refused_writes(harness: Harness) -> None:
    async def body(store: MemoryStore | RedisStore) -> None:
        assert await store.save_many([w(f"r{i}", 0, None) for i in range(6)]) == []
        batch = [w(f"r{i}", 1, 0 if i % 2 == 0 else 7) for i in range(6)]
        assert await store.save_many(batch) == ["r1", "r3", "r5"]
        got = await store.load_many([f"r{i}" for i in range(6)])
        assert [s.seq if s else None for s in got.values()] == [1, 0, 1, 0, 1, 0]

    harness.run(body)


def test_tombstones_get_the_short_ttl(harness: Harness) -> None:
    async def body(store: MemoryStore | RedisStore) -> None:
        assert await store.save_many([w("live", 0, None), w("done", 0, None, done=True)]) == []
        live = await harness.ttl_s(store, "live")
        done = await harness.ttl_s(store, "done")
        assert live is not None and TTL_S - 5 < live <= TTL_S
        assert done is not None and DONE_TTL_S - 5 < done <= DONE_TTL_S
        # A live state that becomes a tombstone: its TTL is replaced, not kept.
        assert await store.save_many([w("live", 1, 0, done=True)]) == []
        done = await harness.ttl_s(store, "live")
        assert done is not None and DONE_TTL_S - 5 < done <= DONE_TTL_S

    harness.run(body)


def test_every_write_refreshes_the_ttl(harness: Harness) -> None:
    async def body(store: MemoryStore | RedisStore) -> None:
        assert await store.save_many([w("a", 0, None)]) == []
        await harness.advance(SHORT_TTL_S * 0.6)
        assert await store.save_many([w("a", 1, 0)]) == []
        await harness.advance(SHORT_TTL_S * 0.6)
        # 1.2 TTLs after the first write, but only 0.6 after the last.
        assert (await store.load_many(["a"]))["a"] == Stored(1, b"a@1")

    harness.run(body, ttl_s=SHORT_TTL_S, done_ttl_s=SHORT_TTL_S)


def test_expired_state_loads_as_none(harness: Harness) -> None:
    async def body(store: MemoryStore | RedisStore) -> None:
        assert await store.save_many([w("live", 0, None), w("done", 0, None, done=True)]) == []
        await harness.advance(SHORT_TTL_S / 2 + 0.05)
        got = await store.load_many(["live", "done"])
        assert got == {"live": Stored(0, b"live@0"), "done": None}
        await harness.advance(SHORT_TTL_S / 2 + 0.05)
        assert await store.load_many(["live", "done"]) == {"live": None, "done": None}
        # Gone means gone for compare-and-set too.
        assert await store.save_many([w("live", 1, 0)]) == ["live"]
        assert await store.save_many([w("done", 0, None)]) == []
        assert await harness.ttl_s(store, "live") is None

    harness.run(body, ttl_s=SHORT_TTL_S, done_ttl_s=SHORT_TTL_S / 2)


def test_claimed_epochs_strictly_increase(harness: Harness) -> None:
    async def body(store: MemoryStore | RedisStore) -> None:
        epochs = [await store.claim_epoch("g/t/0") for _ in range(5)]
        assert epochs == sorted(set(epochs)) and epochs[0] >= 1
        other = await store.claim_epoch("g/t/1")
        assert other >= 1
        assert await store.claim_epoch("g/t/0") > epochs[-1]

    harness.run(body)


def test_claimed_epochs_survive_a_new_store_instance(harness: Harness) -> None:
    """A restarted worker must never be handed an epoch its predecessor had."""
    if harness.kind == "memory":
        pytest.skip("a memory store's epochs live as long as the store")
    seen: list[int] = []

    async def body(store: MemoryStore | RedisStore) -> None:
        seen.append(await store.claim_epoch("g/t/0"))

    harness.run(body)
    harness.run(body)
    assert seen[1] > seen[0]


@pytest.fixture
def socket_sends(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts the writes redis-py makes to its sockets (one per round trip)."""
    sends = [0]
    original = AbstractConnection.send_packed_command

    async def counting(
        self: AbstractConnection, command: object, check_health: bool = True
    ) -> None:
        sends[0] += 1
        await original(self, command, check_health)  # type: ignore[arg-type]

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counting)
    yield sends


def test_one_round_trip_per_batch(harness: Harness, socket_sends: list[int]) -> None:
    ids = [f"req-{i}" for i in range(BATCH)]

    async def body(store: MemoryStore | RedisStore) -> None:
        def trips() -> tuple[int, int]:
            return store.round_trips, socket_sends[0]

        # The first command of a client also opens its connection (HELLO, SETINFO), and
        # in a cluster reads the slot map: do that outside the measured calls.
        await store.claim_epoch("warm-up")
        if isinstance(store, RedisStore) and store.mode == "cluster":
            await store.load_many(ids)  # opens a connection to every master
            harness.masters_touched = len(store._cluster.masters)  # type: ignore[union-attr]
            assert harness.masters_touched == 3  # 500 requests: every master
        per_batch = harness.trips_per_batch(ids)
        steps = [
            lambda: store.load_many(ids),
            lambda: store.save_many([w(r, 0, None) for r in ids]),
            lambda: store.load_many(ids),
            # Half accepted, half refused: still one round trip.
            lambda: store.save_many([w(r, 1, 0 if i % 2 else 9) for i, r in enumerate(ids)]),
            lambda: store.load_many(ids),
        ]
        for step in steps:
            before = trips()
            await step()
            after = trips()
            assert after[0] == before[0] + per_batch
            if harness.kind in ("redis", "redis-cluster"):
                assert after[1] == before[1] + per_batch
            if isinstance(store, RedisStore):  # what the batch loop reports
                assert store.last_round_trips == per_batch
        got = await store.load_many(ids)
        assert [s.seq if s else None for s in got.values()] == [0, 1] * (BATCH // 2)

    harness.run(body)


@pytest.mark.integration
def test_redis_restart_between_calls(restartable_redis: servers.RedisServer) -> None:
    """Down: every call raises (the caller backs off and retries). Back, empty and without
    the scripts: calls work again, the first script call reloading them in one extra trip."""

    async def body() -> None:
        store = RedisStore(restartable_redis.url, key_prefix="derender:")
        try:
            assert await store.save_many([w("a", 0, None)]) == []
            restartable_redis.stop()
            with pytest.raises((redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)):
                await store.load_many(["a"])
            with pytest.raises((redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)):
                await store.save_many([w("a", 1, 0)])
            with pytest.raises((redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)):
                await store.claim_epoch("g/t/0")
            restartable_redis.start()
            # No persistence: the restarted server is empty (state and script cache).
            before = store.round_trips
            assert await store.load_many(["a"]) == {"a": None}
            assert store.round_trips == before + 2  # NOSCRIPT, then load the scripts + retry
            before = store.round_trips
            assert await store.save_many([w("a", 0, None), w("b", 0, None)]) == []
            assert store.round_trips == before + 1
            assert await store.load_many(["a", "b"]) == {
                "a": Stored(0, b"a@0"),
                "b": Stored(0, b"b@0"),
            }
            before = store.round_trips
            assert await store.save_many([w("a", 1, 0)]) == []
            assert store.round_trips == before + 1
        finally:
            await store.close()

    asyncio.run(body())


@pytest.mark.integration
def test_redis_restart_while_idle_fails_one_call_at_most(
    restartable_redis: servers.RedisServer,
) -> None:
    """A restart while the store is idle leaves a stale pooled connection: the next call
    may fail on it (redis-py finds out only when reading the reply; nothing was applied),
    and the caller's retry reconnects."""

    async def body() -> None:
        store = RedisStore(restartable_redis.url)
        try:
            assert await store.save_many([w("a", 0, None)]) == []
            restartable_redis.restart()
            failures = 0
            while True:
                try:
                    refused = await store.save_many([w("a", 0, None)])
                    break
                except redis.exceptions.ConnectionError:
                    failures += 1
                    assert failures == 1
            assert refused == []
            assert await store.load_many(["a"]) == {"a": Stored(0, b"a@0")}
        finally:
            await store.close()

    asyncio.run(body())


def test_commands_are_packed_by_hiredis_byte_for_byte_as_redis_py_would() -> None:
    """The store swaps redis-py's Python command packer for hiredis's: same RESP bytes."""
    pytest.importorskip("hiredis")
    store = RedisStore("redis://localhost:1")
    conn = store._client.connection_pool.make_connection()
    plain = redis.asyncio.connection.Connection()
    cmds = [
        ("SCRIPT LOAD", "return 1"),
        ("EVALSHA", "ab" * 20, 2, "derender:{ü}", "k2", "", "7", b"\x00\r\n" * 3, 3600000),
        ("HMGET", "k", "seq", "state"),
        ("SET", "k", memoryview(b"mv"), bytearray(b"ba"), 2.5),
    ]
    try:
        assert type(conn).__name__ == "HiredisConnection"
        for cmd in cmds:
            assert b"".join(conn.pack_command(*cmd)) == b"".join(plain.pack_command(*cmd))
        assert b"".join(conn.pack_commands(cmds)) == b"".join(plain.pack_commands(cmds))
        with pytest.raises(redis.exceptions.DataError):
            conn.pack_command("SET", "k", object())
    finally:
        asyncio.run(store.close())


def test_the_url_password_is_never_shown() -> None:
    url = "rediss://worker:s3cr%40t@redis.example:6380/2"
    assert redact_url(url) == "rediss://worker:***@redis.example:6380/2"
    assert redact_url("redis://:pw@[::1]:6379/0") == "redis://:***@[::1]:6379/0"
    assert redact_url("redis://localhost:6379") == "redis://localhost:6379"

    async def body() -> None:
        store = RedisStore(url)
        try:
            assert "s3cr" not in repr(store)
        finally:
            await store.close()

    asyncio.run(body())


@pytest.mark.integration
@pytest.mark.parametrize("mode", ["standalone", "proxy", "cluster"])
def test_a_key_holding_no_hash_fails_its_request_only(
    request: pytest.FixtureRequest, mode: str
) -> None:
    """A stray non-hash value under the prefix (WRONGTYPE) is a data error of one request:
    through the real loop it gets `state_corrupt`, the batch's other request is answered,
    the offsets are committed, and the failed state replaces the stray value."""
    from tests.support.helpers import ListSink, ListSource, chunk
    from worker.batch.checkpoint import Checkpoint
    from worker.batch.loop import run_batch
    from worker.config import load_registry
    from worker.ports import Batch, InRecord

    prefix = f"test:{uuid.uuid4().hex[:8]}:"
    url = request.getfixturevalue("redis_cluster_url" if mode == "cluster" else "redis_url")

    async def body() -> None:
        store = RedisStore(url, TTL_S, DONE_TTL_S, prefix, mode=mode)
        client: redis.asyncio.Redis | redis.asyncio.RedisCluster = (
            cluster_client(url) if mode == "cluster" else redis.asyncio.Redis.from_url(url)
        )
        try:
            await client.set(store.key("bad"), b"not a hash")
            assert await store.load_many(["bad"]) == {"bad": Stored(-1, b"")}
            records = [chunk("bad", 0, [100]), chunk("good", 0, [100])]
            ins = [InRecord(json.dumps(r).encode(), r["request_id"]) for r in records]
            source, sink = ListSource(), ListSink()
            report = await run_batch(
                Batch(ins, {None: 0}, {None: 1}),
                registry=load_registry(None),
                sink=sink,
                checkpoint=Checkpoint(source, store),
                max_record_bytes=1 << 20,
            )
            by_request = {o.key: o for o in sink.outputs}
            assert json.loads(by_request["bad"].value)["error"]["code"] == "state_corrupt"
            assert by_request["good"].kind == "chunk"
            assert report.refused == [] and source.committed == {None: 2}
            assert await client.type(store.key("bad")) == b"hash"
        finally:
            await client.aclose()
            await store.close()

    asyncio.run(body())
