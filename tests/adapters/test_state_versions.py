"""Exactly-once's two state versions, on every StateStore (the same harness as
test_state_store.py: memory, Redis, Redis single-key commands behind a proxy, a real Redis
Cluster of 3 masters with a replica each).

Redis sits outside the Kafka transaction, so a batch may save its states and then see its
transaction abort; its records are read again from the partition's committed offset, which
is at or below the last offset of that batch. A versioned write records that offset
(`last_offset`) and keeps the state it replaced; a load from an offset at or below it
returns the state before, and a write from there replaces the uncommitted one. These tests
walk every case the worker meets: commit, abort and redo, a shorter redo, a zombie's late
write, a request's first batch aborted, a retry after a lost reply."""

from __future__ import annotations

import pytest

from tests.adapters.test_state_store import Harness
from tests.adapters.test_state_store import harness as harness  # (the fixture)
from worker.adapters.state.memory_store import MemoryStore
from worker.adapters.state.redis_store import RedisStore
from worker.ports import StateWrite, Stored

Store = MemoryStore | RedisStore


def vw(
    rid: str,
    seq: int,
    expected: int | None,
    first: int,
    last: int,
    *,
    epoch: int = 1,
    done: bool = False,
    tag: str = "",
) -> StateWrite:
    """A versioned write by the batch of input offsets first..last."""
    blob = f"{rid}@{seq}{tag}".encode()
    return StateWrite(rid, seq, blob, done, expected, epoch, first, last)


async def load(store: Store, rid: str, first: int) -> Stored | None:
    return (await store.load_many([rid], [first]))[rid]


def test_a_committed_batch_is_what_the_next_batch_builds_on(harness: Harness) -> None:
    async def body(store: Store) -> None:
        assert await store.save_many([vw("a", 0, None, 0, 9)]) == []
        # The next batch starts past 9: the write above committed.
        assert await load(store, "a", 10) == Stored(0, b"a@0")
        assert await store.save_many([vw("a", 3, 0, 10, 19)]) == []
        assert await load(store, "a", 20) == Stored(3, b"a@3")

    harness.run(body)


def test_an_aborted_batch_is_passed_over_and_its_redo_replaces_it(harness: Harness) -> None:
    async def body(store: Store) -> None:
        await store.save_many([vw("a", 0, None, 0, 9)])
        await store.save_many([vw("a", 5, 0, 10, 19, tag="-aborted")])
        # Its transaction aborted: the partition is read again from 10.
        assert await load(store, "a", 10) == Stored(0, b"a@0")
        # A write expecting the aborted state's seq is refused; the redo's is applied.
        assert await store.save_many([vw("a", 7, 5, 10, 19)]) == ["a"]
        assert await store.save_many([vw("a", 5, 0, 10, 19)]) == []
        assert await load(store, "a", 20) == Stored(5, b"a@5")
        # …and the state before the redo is still the committed one, not the aborted one.
        assert await load(store, "a", 10) == Stored(0, b"a@0")

    harness.run(body)


def test_a_shorter_redo_then_the_rest(harness: Harness) -> None:
    """A new owner with a smaller batch: 10..15 first (replacing the aborted 10..19),
    then 16..25 builds on the redo."""

    async def body(store: Store) -> None:
        await store.save_many([vw("a", 0, None, 0, 9)])
        await store.save_many([vw("a", 6, 0, 10, 19, tag="-aborted")])
        assert await load(store, "a", 10) == Stored(0, b"a@0")
        assert await store.save_many([vw("a", 3, 0, 10, 15, epoch=2)]) == []
        assert await load(store, "a", 16) == Stored(3, b"a@3")
        assert await store.save_many([vw("a", 6, 3, 16, 25, epoch=2)]) == []
        assert await load(store, "a", 26) == Stored(6, b"a@6")
        assert await load(store, "a", 16) == Stored(3, b"a@3")

    harness.run(body)


def test_the_first_batch_of_a_request_aborted(harness: Harness) -> None:
    async def body(store: Store) -> None:
        await store.save_many([vw("a", 2, None, 0, 9, tag="-aborted")])
        assert await load(store, "a", 0) is None
        # Its redo expects no state and replaces the aborted one; there is nothing before.
        assert await store.save_many([vw("a", 2, None, 0, 9)]) == []
        assert await load(store, "a", 10) == Stored(2, b"a@2")
        assert await load(store, "a", 0) is None

    harness.run(body)


def test_a_zombie_writing_between_the_new_owners_load_and_save(harness: Harness) -> None:
    """The new owner (epoch 2) loads the committed state; the zombie (epoch 1), frozen on
    the same batch, saves before the new owner does. The new owner's write still applies
    (the zombie's is an uncommitted batch's); the zombie's later writes are fenced."""

    async def body(store: Store) -> None:
        await store.save_many([vw("a", 0, None, 0, 9)])
        assert await load(store, "a", 10) == Stored(0, b"a@0")  # new owner loads
        assert await store.save_many([vw("a", 4, 0, 10, 19, tag="-zombie")]) == []
        assert await store.save_many([vw("a", 4, 0, 10, 22, epoch=2)]) == []
        assert await load(store, "a", 23) == Stored(4, b"a@4")
        assert await store.save_many([vw("a", 9, 4, 20, 29, tag="-zombie")]) == ["a"]

    harness.run(body)


def test_the_same_versioned_write_again_is_accepted(harness: Harness) -> None:
    async def body(store: Store) -> None:
        await store.save_many([vw("a", 0, None, 0, 9)])
        write = vw("a", 4, 0, 10, 19)
        assert await store.save_many([write]) == []
        assert await store.save_many([write]) == []  # the reply was lost; sent again
        assert await load(store, "a", 20) == Stored(4, b"a@4")
        assert await load(store, "a", 10) == Stored(0, b"a@0")

    harness.run(body)


def test_unversioned_loads_and_writes_ignore_the_versions(harness: Harness) -> None:
    """At-least-once after exactly-once (a guarantee switched): the stored state is the
    state, and a plain write drops the versions."""

    async def body(store: Store) -> None:
        await store.save_many([vw("a", 0, None, 0, 9)])
        await store.save_many([vw("a", 5, 0, 10, 19)])
        assert (await store.load_many(["a"]))["a"] == Stored(5, b"a@5")
        plain = StateWrite("a", 6, b"a@6", False, 5, 1)
        assert await store.save_many([plain]) == []
        assert (await store.load_many(["a"]))["a"] == Stored(6, b"a@6")
        # Versioned again: the plain write counts as committed.
        assert await load(store, "a", 0) == Stored(6, b"a@6")

    harness.run(body)


@pytest.mark.parametrize("done", [False, True])
def test_many_requests_in_one_batch(harness: Harness, done: bool) -> None:
    async def body(store: Store) -> None:
        rids = [f"r{i}" for i in range(300)]
        assert await store.save_many([vw(r, 0, None, 0, 9) for r in rids]) == []
        # Every other request aborted in the next batch.
        await store.save_many([vw(r, 1, 0, 10, 19, tag="-x") for r in rids[::2]])
        got = await store.load_many(rids, [10] * len(rids))
        assert got == {r: Stored(0, f"{r}@0".encode()) for r in rids}
        writes = [vw(r, 1, 0, 10, 19, done=done) for r in rids]
        assert await store.save_many(writes) == []
        got = await store.load_many(rids, [20] * len(rids))
        assert got == {r: Stored(1, f"{r}@1".encode()) for r in rids}

    harness.run(body)
