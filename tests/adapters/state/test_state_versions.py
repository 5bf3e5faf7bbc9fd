"""Exactly-once's two state versions, on every StateStore (the same harness as
test_state_store.py: memory, Redis, Redis single-key commands behind a proxy, a real Redis
Cluster of 3 masters with a replica each).

Redis sits outside the Kafka transaction, so a batch may save its states and then see its
transaction abort; its records are read again from the partition's committed offset, which
is at or below the last offset of that batch. A versioned write records that offset
(`last_offset`) and keeps the state it replaced; a load from an offset at or below it
returns the state before, and a write from there replaces the uncommitted one. These tests
walk every case the worker meets: commit, abort and redo, a shorter redo, a zombie's late
write, a request's first batch aborted, a retry after a lost reply, and a transaction that
spans batches (`--transaction-ms`): aborted whole, it goes back to the state before it."""

from __future__ import annotations

import pytest

from tests.adapters.state.state_contract import Harness
from tests.adapters.state.state_contract import harness as harness  # (the fixture)
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
    since: int = -1,
) -> StateWrite:
    """A versioned write by the batch of input offsets first..last (of a transaction
    that began at offset `since`; -1: at `first`)."""
    blob = f"{rid}@{seq}{tag}".encode()
    return StateWrite(rid, seq, blob, done, expected, epoch, first, last, since_offset=since)


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


def test_a_transaction_of_several_batches_aborted_goes_back_to_the_state_before_it(
    harness: Harness,
) -> None:
    """One transaction from offset 10 over three batches: each builds on the one before;
    an abort of the transaction reads the committed state again, not the first batch's."""

    async def body(store: Store) -> None:
        await store.save_many([vw("a", 0, None, 0, 9)])  # committed
        assert await store.save_many([vw("a", 3, 0, 10, 19, since=10, tag="-t")]) == []
        assert await load(store, "a", 20) == Stored(3, b"a@3-t")  # the next batch's base
        assert await store.save_many([vw("a", 5, 3, 20, 29, since=10, tag="-t")]) == []
        assert await load(store, "a", 30) == Stored(5, b"a@5-t")
        assert await store.save_many([vw("a", 6, 5, 30, 39, since=10, tag="-t")]) == []
        # The transaction aborted: read again from 10, from the committed state.
        assert await load(store, "a", 10) == Stored(0, b"a@0")
        # Its redo, one batch this time, replaces what the aborted transaction wrote.
        assert await store.save_many([vw("a", 6, 5, 10, 39, since=10)]) == ["a"]
        assert await store.save_many([vw("a", 6, 0, 10, 39, since=10)]) == []
        assert await load(store, "a", 40) == Stored(6, b"a@6")
        assert await load(store, "a", 10) == Stored(0, b"a@0")

    harness.run(body)


def test_the_next_transaction_keeps_the_last_committed_state(harness: Harness) -> None:
    """Committed at 10..39; the next transaction (from 40, two batches) keeps that state as
    the one to go back to, also for a request it first writes in its second batch."""

    async def body(store: Store) -> None:
        await store.save_many([vw("a", 0, None, 0, 9), vw("b", 0, None, 0, 9)])
        await store.save_many([vw("a", 4, 0, 10, 19, since=10)])
        await store.save_many([vw("a", 6, 4, 20, 39, since=10)])  # committed at 40
        assert await store.save_many([vw("a", 8, 6, 40, 49, since=40, tag="-t")]) == []
        assert await store.save_many([vw("b", 2, 0, 50, 59, since=40, tag="-t")]) == []
        assert await store.save_many([vw("a", 9, 8, 50, 59, since=40, tag="-t")]) == []
        # Aborted: both go back to what was committed before 40.
        assert await load(store, "a", 40) == Stored(6, b"a@6")
        assert await load(store, "b", 40) == Stored(0, b"b@0")
        # Committed instead: the next transaction's batches read the last writes.
        assert await load(store, "a", 60) == Stored(9, b"a@9-t")
        assert await load(store, "b", 60) == Stored(2, b"b@2-t")

    harness.run(body)
