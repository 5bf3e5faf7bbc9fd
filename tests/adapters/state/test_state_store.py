"""One contract suite for every StateStore (the harness: state_contract.py): the memory store and
the Redis store (against a real redis-server from the session fixture; in `proxy` mode, single-key
commands, on the same server; and in `cluster` mode against a real Redis Cluster of 3 masters with a
replica each). Each test is a sync wrapper around `asyncio.run`, and each Redis test uses its own
key prefix on the shared server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from redis.asyncio.connection import AbstractConnection

from tests.adapters.state.state_contract import BATCH, DONE_TTL_S, SHORT_TTL_S, TTL_S, Harness, w
from tests.adapters.state.state_contract import harness as harness  # (the fixture)
from worker.adapters.state.memory_store import MemoryStore
from worker.adapters.state.redis_store import RedisStore
from worker.ports import Stored


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
