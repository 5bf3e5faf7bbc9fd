"""The requests' tables beside their states (core/tables.py), on every StateStore (the
harness of test_state_store.py: memory, Redis, Redis single-key commands behind a proxy,
a real Redis Cluster of 3 masters with a replica each).

The write that opens a request carries its tables; later writes carry none and leave them
as they are; a load returns them only for the requests it asks them for (a worker holding
them compiled asks for none, so a batch moves a plain request's bytes)."""

from __future__ import annotations

from tests.adapters.state.state_contract import Harness
from tests.adapters.state.state_contract import harness as harness  # (the fixture)
from worker.adapters.state.memory_store import MemoryStore
from worker.adapters.state.redis_store import RedisStore
from worker.ports import StateWrite, Stored

Store = MemoryStore | RedisStore
TABLES = bytes(range(256)) * 40 + b"\x00\r\n"  # any bytes, ~10 KB


def tw(
    rid: str,
    seq: int,
    expected: int | None,
    tables: bytes = b"",
    *,
    first: int = -1,
    last: int = -1,
    done: bool = False,
) -> StateWrite:
    return StateWrite(rid, seq, f"{rid}@{seq}".encode(), done, expected, 1, first, last, tables)


def test_the_tables_come_back_only_when_asked_for(harness: Harness) -> None:
    async def body(store: Store) -> None:
        assert await store.save_many([tw("a", 0, None, TABLES), tw("b", 0, None)]) == []
        assert await store.load_many(["a", "b"]) == {"a": Stored(0, b"a@0"), "b": Stored(0, b"b@0")}
        got = await store.load_many(["a", "b", "c"], None, {"a", "b", "c"})
        # b has no tables, c no state: nothing more for either
        assert got == {"a": Stored(0, b"a@0", TABLES), "b": Stored(0, b"b@0"), "c": None}
        got = await store.load_many(["a", "b"], None, {"b"})
        assert got == {"a": Stored(0, b"a@0"), "b": Stored(0, b"b@0")}

    harness.run(body)


def test_later_writes_leave_the_tables_as_they_are(harness: Harness) -> None:
    async def body(store: Store) -> None:
        assert await store.save_many([tw("a", 0, None, TABLES)]) == []
        assert await store.save_many([tw("a", 1, 0)]) == []
        assert await store.save_many([tw("a", 2, 1, done=True)]) == []
        got = await store.load_many(["a"], None, {"a"})
        assert got == {"a": Stored(2, b"a@2", TABLES)}

    harness.run(body)


def test_a_refused_write_does_not_store_its_tables(harness: Harness) -> None:
    async def body(store: Store) -> None:
        assert await store.save_many([tw("a", 0, None)]) == []
        # Expected no state, but there is one: refused, tables and all.
        assert await store.save_many([tw("a", 1, None, TABLES)]) == ["a"]
        assert await store.load_many(["a"], None, {"a"}) == {"a": Stored(0, b"a@0")}

    harness.run(body)


def test_a_retried_opening_write_is_accepted_with_its_tables(harness: Harness) -> None:
    async def body(store: Store) -> None:
        write = tw("a", 0, None, TABLES)
        assert await store.save_many([write]) == []
        assert await store.save_many([write]) == []  # (its reply was lost)
        assert await store.load_many(["a"], None, {"a"}) == {"a": Stored(0, b"a@0", TABLES)}

    harness.run(body)


def test_versioned_loads_bring_the_tables_too(harness: Harness) -> None:
    """Exactly-once: the tables are the request's, not a version's — a load that reads the
    state before an uncommitted batch returns them as well."""

    async def body(store: Store) -> None:
        assert await store.save_many([tw("a", 0, None, TABLES, first=0, last=9)]) == []
        assert await store.save_many([tw("a", 4, 0, first=10, last=19)]) == []
        # The second batch never committed: its records come back from offset 10.
        got = await store.load_many(["a"], [10], {"a"})
        assert got == {"a": Stored(0, b"a@0", TABLES)}
        assert await store.load_many(["a"], [20], {"a"}) == {"a": Stored(4, b"a@4", TABLES)}
        assert await store.load_many(["a"], [20]) == {"a": Stored(4, b"a@4")}

    harness.run(body)


def test_the_first_batch_aborted_and_redone(harness: Harness) -> None:
    async def body(store: Store) -> None:
        opening = tw("a", 2, None, TABLES, first=0, last=9)
        assert await store.save_many([opening]) == []
        # Read again from offset 0: there was no state before that batch.
        assert await store.load_many(["a"], [0], {"a"}) == {"a": None}
        assert await store.save_many([opening]) == []  # the redo writes the same again
        assert await store.load_many(["a"], [10], {"a"}) == {"a": Stored(2, b"a@2", TABLES)}

    harness.run(body)


def test_many_requests_some_asked_for(harness: Harness) -> None:
    rids = [f"r{i}" for i in range(300)]

    async def body(store: Store) -> None:
        writes = [tw(r, 0, None, r.encode() * (i % 3)) for i, r in enumerate(rids)]
        assert await store.save_many(writes) == []
        asked = set(rids[::2])
        got = await store.load_many(rids, None, asked)
        for i, r in enumerate(rids):
            tables = r.encode() * (i % 3) if r in asked and i % 3 else None
            assert got[r] == Stored(0, f"{r}@0".encode(), tables), r

    harness.run(body)
