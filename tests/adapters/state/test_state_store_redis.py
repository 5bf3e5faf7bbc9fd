"""The Redis store beyond the contract of test_state_store.py: redis-server restarted between
and during calls, commands packed by hiredis as redis-py would, the URL's password never
shown, and a key holding no hash failing its request only (standalone, proxy, cluster)."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
import redis.asyncio
import redis.exceptions

from tests.adapters.state.state_contract import DONE_TTL_S, TTL_S, cluster_client, w
from tests.support import servers
from worker.adapters.state.redis_store import RedisStore
from worker.ports import Stored
from worker.urls import redact_url


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
