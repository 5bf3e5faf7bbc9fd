"""`ConfluentTransactions`: producers started ahead of need and in the background, and
made again under their own transactional ids after every broker was unreachable."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, cast

import pytest
from aiokafka import TopicPartition
from aiokafka import errors as kerrors

from worker.adapters.broker.confluent import txn
from worker.adapters.broker.confluent.clients import Blocking
from worker.adapters.broker.confluent.txn import WARM_PRODUCERS, ConfluentTransactions

TP0, TP1 = TopicPartition("in", 0), TopicPartition("in", 1)


class TxnProducer:
    """A transactional producer as `ConfluentTransactions` starts and begins one: its
    transactional id, whether it was initialized, and whether a transaction began."""

    def __init__(self, tid: str, fail_init: bool = False) -> None:
        self.tid, self.fail_init = tid, fail_init
        self.inits = self.begun = 0
        self.closed = False

    def init_transactions(self, timeout_s: float) -> None:
        if self.fail_init:
            raise kerrors.KafkaConnectionError("no broker")
        self.inits += 1

    def begin_transaction(self) -> None:
        self.begun += 1

    def abort_transaction(self, timeout_s: float) -> None:
        pass

    def purge(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def transactions(make: Any, fetcher: Any = None) -> ConfluentTransactions:
    """`ConfluentTransactions` over fake producers made by `make(tid)`."""
    return ConfluentTransactions(
        make,
        cast(Any, fetcher),
        Blocking(),
        group_id="g",
        input_topic="in",
        id_prefix="t-",
        output_topic="out",
        dlq_topic="dlq",
    )


def test_after_every_broker_was_lost_each_producer_is_made_again_under_its_own_id() -> None:
    # (librdkafka may keep a retired broker as a producer's group coordinator after a
    # re-bootstrap: its next send_offsets_to_transaction would never return.)
    asyncio.run(_after_every_broker_was_lost_each_producer_is_made_again())


async def _after_every_broker_was_lost_each_producer_is_made_again() -> None:
    made: list[TxnProducer] = []
    unreachable = False

    def make(tid: str) -> TxnProducer:
        made.append(TxnProducer(tid, fail_init=unreachable))
        return made[-1]

    txns = transactions(make)
    await txns.warm()
    await txns.open([TP0, TP1])
    before = {tp: txns._sinks[tp].producer for tp in (TP0, TP1)}
    # (`open` refills the warm producers in the background: every one of them is made
    # before the outage below, so wait for the refill before noting which they are.)
    assert txns._filling is not None
    await txns._filling
    warm = list(txns._warm)
    assert len(warm) == WARM_PRODUCERS
    await txns.begin([TP0])
    assert txns._sinks[TP0].producer is before[TP0]  # (no outage: the same producer)
    txns._open.clear()

    txns.brokers_lost()
    await txns.begin([TP0])
    renewed = txns._sinks[TP0].producer
    assert renewed is not before[TP0]
    assert (renewed.tid, renewed.inits, renewed.begun) == (before[TP0].tid, 1, 1)
    # A warm producer made before the outage is made again when a partition takes it.
    taken = TopicPartition("in", 2)
    await txns.open([taken])
    await txns.opened()
    got = txns._sinks[taken].producer
    assert got.tid in {p.tid for p in warm} and got not in warm and got.inits == 1

    # Still unreachable: the partition is dropped, and its next producer takes the id over.
    txns.brokers_lost()
    unreachable = True
    with pytest.raises(kerrors.KafkaConnectionError):
        await txns.begin([TP1])
    assert not txns.ready(TP1) and txns._heir[TP1] == before[TP1].tid
    await txns.close_all()
    # (Closed on pool threads: done before this loop ends.)
    for _ in range(200):
        if all(p.closed for p in made):
            break
        await asyncio.sleep(0.01)
    assert all(p.closed for p in made)


class CommitFetcher:
    """The fetcher as a commit uses it: group metadata, offsets past the markers."""

    async def assigned_metadata(self, tps: list[TopicPartition], timeout_s: float) -> object:
        return object()

    def past_markers(self, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        return dict(offsets)


class SendingProducer(TxnProducer):
    """`send_offsets_to_transaction` waits until released (a retired coordinator: never)."""

    def __init__(self, tid: str) -> None:
        super().__init__(tid)
        self.release = threading.Event()
        self.committed = 0

    def send_offsets_to_transaction(self, *args: Any) -> None:
        self.release.wait(5.0)

    def commit_transaction(self, timeout_s: float) -> None:
        self.committed += 1


def test_a_commit_under_way_or_begun_before_every_broker_was_lost_gives_up() -> None:
    asyncio.run(_a_commit_under_way_or_begun_before_the_outage_gives_up())


async def _a_commit_under_way_or_begun_before_the_outage_gives_up() -> None:
    made: list[SendingProducer] = []

    def make(tid: str) -> SendingProducer:
        made.append(SendingProducer(tid))
        return made[-1]

    txns = transactions(make, CommitFetcher())
    await txns.open([TP0, TP1])
    await txns.opened()
    first = {tp: txns._sinks[tp].producer for tp in (TP0, TP1)}
    await txns.begin([TP0, TP1])
    # TP0's offsets are on their way when every broker is lost; TP1 began before it.
    committing = asyncio.ensure_future(txns.commit({TP0: 10}))
    await asyncio.sleep(0.05)
    txns.brokers_lost()
    failed = await asyncio.wait_for(committing, 2.0)
    assert failed == [TP0] and txns._heir[TP0] == first[TP0].tid
    assert await txns.commit({TP1: 10}) == [TP1]
    assert first[TP0].committed == first[TP1].committed == 0
    for p in made:
        p.release.set()
    await txns.close_all()
    for _ in range(200):
        if all(p.closed for p in made):
            break
        await asyncio.sleep(0.01)


class HeldProducer(TxnProducer):
    """One whose `init_transactions` waits for `gate` (a producer made again while the
    partition's revocation runs)."""

    def __init__(self, tid: str, gate: threading.Event) -> None:
        super().__init__(tid)
        self.gate = gate

    def init_transactions(self, timeout_s: float) -> None:
        assert self.gate.wait(10)
        super().init_transactions(timeout_s)


def test_a_partition_revoked_while_its_producer_is_made_again_is_given_up_cleanly() -> None:
    # Seen on a fleet under load: the revocation kept the partition's old producer warm,
    # the remaking `begin` then closed that one and put the new one on the revoked
    # partition; the next partition took the closed producer from the warm ones and its
    # `begin_transaction` ended the worker ("Producer has been closed").
    asyncio.run(_a_partition_revoked_while_its_producer_is_made_again())


async def _a_partition_revoked_while_its_producer_is_made_again() -> None:
    made: list[TxnProducer] = []
    gate = threading.Event()
    hold = False

    def make(tid: str) -> TxnProducer:
        made.append(HeldProducer(tid, gate) if hold else TxnProducer(tid))
        return made[-1]

    txns = transactions(make)
    await txns.warm()
    await txns.open([TP0])
    assert txns._filling is not None
    await txns._filling
    old = txns._sinks[TP0].producer
    txns.brokers_lost()
    hold = True
    begin = asyncio.create_task(txns.begin([TP0]))
    while not any(isinstance(p, HeldProducer) for p in made):
        await asyncio.sleep(0.001)
    await txns.close([TP0])  # (the revocation, while the new producer initializes)
    gate.set()
    with pytest.raises(kerrors.KafkaError, match="given up"):
        await begin
    assert not txns.ready(TP0)
    renewed = next(p for p in made if isinstance(p, HeldProducer))
    for _ in range(200):  # (closed on a pool thread)
        if renewed.closed:
            break
        await asyncio.sleep(0.01)
    assert renewed.closed and not old.closed
    # Every partition that comes next gets an open producer and begins.
    hold = False
    nexts = [TopicPartition("in", n) for n in range(2, 2 + 2 * WARM_PRODUCERS)]
    await txns.open(nexts)
    await txns.opened()
    await txns.begin(nexts)
    assert not any(txns._sinks[tp].producer.closed for tp in nexts)
    await txns.close_all()


def test_a_partition_with_a_warm_producer_does_not_wait_for_another_ones_start() -> None:
    # Seen at a scale-out: a joiner given more partitions than it had warm producers
    # started none of them until every new producer was initialized (0.5-1 s).
    asyncio.run(_a_warm_partition_does_not_wait_for_a_cold_ones_start())


async def _a_warm_partition_does_not_wait_for_a_cold_ones_start() -> None:
    gate = threading.Event()
    hold = False

    def make(tid: str) -> TxnProducer:
        return HeldProducer(tid, gate) if hold else TxnProducer(tid)

    txns = transactions(make)
    await txns.warm()
    hold = True  # (every producer started from now on waits for the gate)
    parts = [TopicPartition("in", n) for n in range(WARM_PRODUCERS + 2)]
    await asyncio.wait_for(txns.open(parts), 1.0)
    warm, cold = parts[:WARM_PRODUCERS], parts[WARM_PRODUCERS:]
    assert all(txns.ready(tp) for tp in warm)
    assert not any(txns.ready(tp) for tp in cold)
    await txns.open(cold)  # (asked again while starting: not started twice)
    gate.set()
    await asyncio.wait_for(txns.opened(), 5.0)
    assert all(txns.ready(tp) for tp in parts)
    producers = [txns._sinks[tp].producer for tp in parts]
    assert len({id(p) for p in producers}) == len(parts)
    assert all(p.inits == 1 for p in producers)
    await txns.close_all()


def test_a_partition_revoked_while_its_producer_starts_is_not_opened() -> None:
    asyncio.run(_a_partition_revoked_while_its_producer_starts())


async def _a_partition_revoked_while_its_producer_starts() -> None:
    gate = threading.Event()
    made: list[TxnProducer] = []

    def make(tid: str) -> TxnProducer:
        made.append(HeldProducer(tid, gate))
        return made[-1]

    txns = transactions(make)
    await txns.open([TP0])
    await txns.close([TP0])  # (revoked before its producer was initialized)
    gate.set()
    await asyncio.wait_for(txns.opened(), 5.0)
    while txns._tasks:  # (the refill too)
        await asyncio.sleep(0.01)
    assert not txns.ready(TP0) and TP0 not in txns.lost
    # Its producer was initialized and never used: kept warm, and the next one takes it.
    started = made[0]
    assert started in txns._warm and not started.closed
    await txns.open([TP1])
    assert txns.ready(TP1) and txns._sinks[TP1].producer.inits == 1
    await txns.close_all()


class Owner:
    """The fetcher as `_reopen` uses it: the partitions owned, their committed offsets."""

    def __init__(self, owned: set[TopicPartition]) -> None:
        self.owned, self.revoking = owned, set[TopicPartition]()
        self.sought: list[tuple[TopicPartition, int]] = []

    async def committed(self, tps: list[TopicPartition], timeout_s: float) -> dict[Any, int]:
        return {tp: 7 for tp in tps}

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.sought.append((tp, offset))


def test_a_producer_that_fails_to_start_is_started_again_while_the_partition_is_ours(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(txn, "REOPEN_AFTER_S", 0.01)
    asyncio.run(_a_producer_that_fails_to_start_is_started_again())


async def _a_producer_that_fails_to_start_is_started_again() -> None:
    failing = True

    def make(tid: str) -> TxnProducer:
        return TxnProducer(tid, fail_init=failing)

    owner = Owner({TP0})
    txns = transactions(make, owner)
    await txns.open([TP0])
    await txns.opened()
    assert not txns.ready(TP0) and TP0 in txns.lost
    failing = False
    for _ in range(500):  # (tried again every REOPEN_AFTER_S until it starts)
        if txns.ready(TP0):
            break
        await asyncio.sleep(0.01)
    assert txns.ready(TP0) and TP0 not in txns.lost
    assert owner.sought and owner.sought[-1] == (TP0, 7)  # (read again from its commit)
    await txns.close_all()


def test_a_transactional_id_refused_while_a_producer_starts_ends_the_worker() -> None:
    asyncio.run(_a_transactional_id_refused_while_a_producer_starts())


async def _a_transactional_id_refused_while_a_producer_starts() -> None:
    class Refused(TxnProducer):
        def init_transactions(self, timeout_s: float) -> None:
            raise kerrors.TransactionalIdAuthorizationFailed("t-g-in-w: denied")

    txns = transactions(Refused)
    await txns.open([TP0])
    await txns.opened()
    with pytest.raises(kerrors.TransactionalIdAuthorizationFailed, match="denied"):
        txns.ready(TP0)
    txns.refused = None
    await txns.close_all()
