"""The confluent-kafka adapter at its seams, without a broker: librdkafka's errors as the
worker classifies them, the settings as librdkafka properties, the fetcher's files
(records of a consume that began before a seek are dropped, commits step over markers
only when everything before them was handed out), the incremental lease, and the sink
over a stand-in producer (reply partitions, a refused batch sent again record by record).
The integration and chaos suites run it on the real broker (`kafka_client`)."""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, cast

import confluent_kafka
import pytest
from aiokafka import TopicPartition
from aiokafka import errors as kerrors

from worker.adapters.broker.confluent import txn as confluent_txn
from worker.adapters.broker.confluent.clients import (
    Blocking,
    ConfluentError,
    consumer_config,
    producer_config,
    security_config,
    translated,
)
from worker.adapters.broker.confluent.fetch import Fetcher
from worker.adapters.broker.confluent.sink import ConfluentSink
from worker.adapters.broker.confluent.source import ConfluentSource
from worker.adapters.broker.confluent.txn import ConfluentTransactions, _close
from worker.adapters.broker.kafka_txn import PartitionGone
from worker.failures import HANDLED, Kind, classify
from worker.ports import Batch, OutputsRefused, OutRecord
from worker.run.assignment import Assignment, PartitionLease
from worker.settings import KafkaSecurity, add_flags, from_args

E = confluent_kafka.KafkaError
TP0, TP1 = TopicPartition("in", 0), TopicPartition("in", 1)


def settings(*argv: str) -> Any:
    import argparse

    parser = argparse.ArgumentParser()
    add_flags(parser, {})
    return from_args(parser.parse_args(list(argv)))


@pytest.mark.parametrize(
    ("code", "cls", "kind"),
    [
        (E.MSG_SIZE_TOO_LARGE, kerrors.MessageSizeTooLargeError, Kind.DATA),
        (E.TOPIC_AUTHORIZATION_FAILED, kerrors.TopicAuthorizationFailedError, Kind.CONFIG),
        (
            E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            kerrors.TransactionalIdAuthorizationFailed,
            Kind.CONFIG,
        ),
        (E._TRANSPORT, ConfluentError, Kind.TRANSIENT),
        (E.PRODUCER_FENCED, kerrors.ProducerFenced, Kind.TRANSIENT),
    ],
)
def test_librdkafka_errors_are_classified_as_aiokafka_s(code: int, cls: type, kind: Kind) -> None:
    exc = translated(confluent_kafka.KafkaException(E(code)))
    assert type(exc) is cls
    assert isinstance(exc, HANDLED)
    assert classify(exc) is kind
    assert E(code).name() in str(exc)
    other = ValueError("not Kafka's")
    assert translated(other) is other


def test_security_flags_become_librdkafka_properties(tmp_path: Any) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    s = KafkaSecurity("SASL_SSL", "SCRAM-SHA-512", "u", "p", str(ca), None, None)
    assert security_config(s) == {
        "security.protocol": "sasl_ssl",
        "ssl.ca.location": str(ca),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "u",
        "sasl.password": "p",
    }
    assert security_config(KafkaSecurity("PLAINTEXT", None, None, None, None, None, None)) == {
        "security.protocol": "plaintext"
    }


def test_consumer_and_producer_configs() -> None:
    s = settings("--kafka-client", "confluent", "--guarantee", "exactly-once")
    c = consumer_config(s)
    assert c["group.protocol"] == "consumer"
    assert c["isolation.level"] == "read_committed"
    assert c["enable.auto.commit"] is False
    # (KIP-848: the broker's settings, refused by librdkafka under this protocol)
    assert not {"session.timeout.ms", "heartbeat.interval.ms"} & c.keys()
    assert "partition.assignment.strategy" not in c
    # The rebalance timeout (a member that never gives up what it should is fenced then)
    # outlasts the longest rebalance callback: 5 s of batches + 2 × 30 s of producer calls.
    assert c["max.poll.interval.ms"] == (5 + 60 + 10) * 1000
    p = producer_config(s, "tid")
    assert p["transactional.id"] == "tid" and p["acks"] == "all"
    assert p["partitioner"] == "murmur2_random"
    assert producer_config(s)["enable.idempotence"] is False
    # librdkafka accepts them as they are (a typo in a property name raises here).
    confluent_kafka.Producer({**p, "bootstrap.servers": "127.0.0.1:1"})
    confluent_kafka.Consumer({**c, "bootstrap.servers": "127.0.0.1:1"}).close()


def test_kafka_client_flag_is_checked() -> None:
    with pytest.raises(SystemExit):
        settings("--kafka-client", "kafka-python")
    from worker.settings import SettingsError

    with pytest.raises(SettingsError, match="--reset <epoch ms> needs --kafka-client aiokafka"):
        settings("--kafka-client", "confluent", "--reset", "1700000000000")


class Msg:
    """What confluent-kafka's consume returns, as far as the fetcher reads it."""

    def __init__(self, tp: TopicPartition, offset: int, value: bytes = b"v") -> None:
        self.tp, self._offset, self._value = tp, offset, value

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return self.tp.topic

    def partition(self) -> int:
        return self.tp.partition

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes:
        return self._value

    def key(self) -> bytes:
        return b"k"

    def headers(self) -> None:
        return None

    def timestamp(self) -> tuple[int, int]:
        return (1, 1234)


def position(tp: TopicPartition, offset: int) -> confluent_kafka.TopicPartition:
    return confluent_kafka.TopicPartition(tp.topic, tp.partition, offset)


def test_fetcher_files_records_and_drops_those_fetched_before_a_seek() -> None:
    asyncio.run(_fetcher_files_records_and_drops_those_fetched_before_a_seek())


async def _fetcher_files_records_and_drops_those_fetched_before_a_seek() -> None:
    f = Fetcher({}, Blocking(), max_records=10)
    f.loop = asyncio.get_running_loop()
    f._own([TP0, TP1])
    f._file([Msg(TP0, 0), Msg(TP0, 1), Msg(TP1, 5)], [], began=0, highs=None)
    src = ConfluentSource(
        f, "g", lambda: [TP0, TP1], timeout_ms=10, max_records=10, commit_timeout_s=1
    )
    batch = await src.poll()
    assert batch is not None
    assert batch.first == {TP0: 0, TP1: 5} and batch.last == {TP0: 1, TP1: 5}
    assert [r.origin for r in batch.records] == [("in", 0, 0), ("in", 0, 1), ("in", 1, 5)]
    assert batch.records[0].timestamp_ms == 1234 and batch.records[0].partition == TP0
    # A rewind of TP0: what a consume that began before the seek was done returns of TP0
    # is stale (fetched from the old position); TP1's records are kept.
    f._file([Msg(TP0, 2), Msg(TP1, 6)], [], began=0, highs=None)
    src.rewind(batch, [TP0])
    f._file([Msg(TP0, 3), Msg(TP1, 7)], [], began=0, highs=None)
    assert [(tp, m.offset()) for tp, m in f.take([TP0, TP1], 10)] == [(TP1, 6), (TP1, 7)]
    # The seek is done on the fetch thread (queued); consumes after it are kept.
    seek = f._ops.get_nowait()
    seek(_SeekRecorder())
    assert f._applied == f._seeks
    f._file([Msg(TP0, 0)], [], began=f._applied, highs=None)
    assert [(tp, m.offset()) for tp, m in f.take([TP0], 10)] == [(TP0, 0)]


class _SeekRecorder:
    def seek(self, at: Any) -> None:
        self.at = at


def test_a_commit_steps_over_markers_only_past_everything_handed_out() -> None:
    asyncio.run(_a_commit_steps_over_markers_only_past_everything_handed_out())


async def _a_commit_steps_over_markers_only_past_everything_handed_out() -> None:
    f = Fetcher({}, Blocking(), max_records=10)
    f.loop = asyncio.get_running_loop()
    f._own([TP0])
    # Records 0 and 1, then a marker at 2: the position is 3.
    f._file([Msg(TP0, 0), Msg(TP0, 1)], [position(TP0, 3)], began=0, highs={TP0: 3})
    assert f.past_markers({TP0: 1}) == {TP0: 1}  # (nothing handed out yet)
    taken = f.take([TP0], 1)
    f.handed[TP0] = taken[0][1].offset()
    # Record 1 still waits in the file: committing 1 must not skip it.
    assert f.past_markers({TP0: 1}) == {TP0: 1}
    taken = f.take([TP0], 1)
    f.handed[TP0] = taken[0][1].offset()
    assert f.past_markers({TP0: 2}) == {TP0: 3}
    assert f.lag() == {0: 0}


def test_a_full_partition_is_paused_until_its_lane_drains_it() -> None:
    asyncio.run(_a_full_partition_is_paused_until_its_lane_drains_it())


async def _a_full_partition_is_paused_until_its_lane_drains_it() -> None:
    f = Fetcher({}, Blocking(), max_records=2)
    f.loop = asyncio.get_running_loop()
    f._own([TP0])
    f._file([Msg(TP0, i) for i in range(8)], [], began=0, highs=None)
    assert TP0 in f._paused
    calls: list[str] = []

    class Consumer:
        def pause(self, parts: list[Any]) -> None:
            calls.append("pause")

        def resume(self, parts: list[Any]) -> None:
            calls.append("resume")

    f._assigned = {TP0}
    f._apply_pauses(Consumer())
    f.take([TP0], 7)
    assert TP0 not in f._paused
    f._apply_pauses(Consumer())
    f._apply_pauses(Consumer())
    assert calls == ["pause", "resume"]


def test_an_incremental_revocation_fences_only_batches_of_the_moved_partitions() -> None:
    lease = PartitionLease()
    a = Batch([], {TP0: 0}, {TP0: 1}, generation=lease.generation)
    b = Batch([], {TP1: 0}, {TP1: 1}, generation=lease.generation)
    both = Batch([], {TP0: 0, TP1: 0}, {TP0: 1, TP1: 1}, generation=lease.generation)
    lease.revoke([TP1])
    assert lease.holds(a) and not lease.holds(b) and not lease.holds(both)
    # TP1 comes back: a batch polled since is held.
    later = Batch([], {TP1: 2}, {TP1: 3}, generation=lease.generation)
    assert lease.holds(later)
    lease.revoke()  # (an eager revocation: everything)
    assert not lease.holds(a) and not lease.holds(later)


def test_an_incremental_revocation_lets_the_other_lanes_poll_on() -> None:
    asyncio.run(_an_incremental_revocation_lets_the_other_lanes_poll_on())


async def _an_incremental_revocation_lets_the_other_lanes_poll_on() -> None:
    assignment = Assignment()
    await assignment.revoke(0.1, [TP1])
    assert assignment.settled
    await assignment.revoke(0.1)
    assert not assignment.settled


class RebalancingConsumer:
    """librdkafka's consumer as the fetch thread drives it: `consume` runs the rebalance
    callbacks the test queues, as librdkafka runs them inside a consume, then returns the
    records fed of the assigned partitions that are not paused. As librdkafka's, a
    partition's pause outlives its unassignment."""

    def __init__(self) -> None:
        self.events: queue.SimpleQueue[tuple[str, list[int]]] = queue.SimpleQueue()
        self.fed: queue.SimpleQueue[Msg] = queue.SimpleQueue()
        self.assigned: set[int] = set()
        self.paused: set[int] = set()
        self.held: list[Msg] = []
        self.unassigned: list[int] = []
        self.committed: list[list[tuple[int, int]]] = []
        self.callbacks: dict[str, Callable[..., None]] = {}
        # What changed the assignment and each request to the leaders, in order.
        self.calls: list[tuple[str, list[int]]] = []

    def subscribe(self, topics: list[str], **callbacks: Callable[..., None]) -> None:
        self.callbacks = callbacks

    def consume(self, n: int, timeout_s: float) -> list[Any]:
        try:
            kind, partitions = self.events.get(timeout=timeout_s)
        except queue.Empty:
            pass
        else:
            parts = [confluent_kafka.TopicPartition("in", p) for p in partitions]
            self.callbacks[kind](self, parts)
        while not self.fed.empty():
            self.held.append(self.fed.get_nowait())
        ready = [m for m in self.held if m.partition() in self.assigned - self.paused]
        self.held = [m for m in self.held if m not in ready]
        return ready

    def incremental_assign(self, parts: list[Any]) -> None:
        self.calls.append(("assign", sorted(p.partition for p in parts)))
        self.assigned |= {p.partition for p in parts}

    def incremental_unassign(self, parts: list[Any]) -> None:
        self.calls.append(("unassign", sorted(p.partition for p in parts)))
        self.unassigned += [p.partition for p in parts]
        self.assigned -= {p.partition for p in parts}

    def offsets_for_times(self, parts: list[Any], timeout_s: float) -> list[Any]:
        assert all(p.offset == confluent_kafka.OFFSET_END for p in parts)
        self.calls.append(("leaders", sorted(p.partition for p in parts)))
        return parts

    def pause(self, parts: list[Any]) -> None:
        self.paused |= {p.partition for p in parts}

    def resume(self, parts: list[Any]) -> None:
        self.paused -= {p.partition for p in parts}

    def position(self, parts: list[Any]) -> list[Any]:
        return []

    def get_watermark_offsets(self, *args: Any, **kwargs: Any) -> tuple[int, int]:
        return (0, -1)

    def consumer_group_metadata(self) -> str:
        return "metadata"

    def commit(self, offsets: list[Any], asynchronous: bool) -> None:
        self.committed.append([(p.partition, p.offset) for p in offsets])

    def close(self) -> None:
        pass


async def until(check: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not check() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    return check()


def test_a_revocation_gives_the_moved_partitions_up_within_its_wait() -> None:
    asyncio.run(_a_revocation_gives_the_moved_partitions_up_within_its_wait())


async def _a_revocation_gives_the_moved_partitions_up_within_its_wait() -> None:
    consumer = RebalancingConsumer()
    f = Fetcher({}, Blocking(), max_records=10)
    f.loop, f.consumer = asyncio.get_running_loop(), consumer
    f.callback_timeout_s, f.revoke_wait_s = 30.0, 0.2
    release = asyncio.Event()
    assigned: list[list[TopicPartition]] = []

    async def on_revoked(tps: list[TopicPartition]) -> None:
        await release.wait()  # (a batch of a moved partition that takes its time)

    async def on_assigned(tps: list[TopicPartition]) -> None:
        assigned.append(tps)

    f.subscribe("in", on_revoked, on_assigned)
    try:
        consumer.events.put(("on_assign", [0, 1]))
        assert await until(lambda: f.owned == {TP0, TP1}, 2.0)
        assert await f.assigned_metadata([TP1], 1.0) == "metadata"
        began = time.monotonic()
        consumer.events.put(("on_revoke", [1]))
        # The fetch thread returns to consuming (the unmoved TP0) long before the worker
        # is done with TP1.
        assert await until(lambda: f.owned == {TP0}, 2.0)
        assert time.monotonic() - began < 1.0 and consumer.unassigned == [1]
        # What the worker still runs for TP1 commits nothing of it: its transaction gets
        # no group metadata, its offsets are left out.
        with pytest.raises(PartitionGone):
            await f.assigned_metadata([TP1], 1.0)
        assert await f.assigned_metadata([TP0], 1.0) == "metadata"
        await f.commit([position(TP0, 5), position(TP1, 7)], 1.0)
        assert consumer.committed == [[(0, 5)]]
        # TP1 back before its revocation is over here: assigned only after it.
        consumer.events.put(("on_assign", [1]))
        await asyncio.sleep(0.3)
        assert f.owned == {TP0} and assigned == [[TP0, TP1]]
        release.set()
        assert await until(lambda: f.owned == {TP0, TP1}, 2.0)
        assert assigned == [[TP0, TP1], [TP1]]
    finally:
        release.set()
        await f.stop()


async def taken(f: Fetcher, tp: TopicPartition, timeout_s: float) -> list[int]:
    """The offsets of the first records of `tp` a lane takes within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if got := [m.offset() for _, m in f.take([tp], 10)]:
            return got
        await asyncio.sleep(0.01)
    return []


def test_a_partition_paused_when_it_was_revoked_is_fetched_again_when_it_comes_back() -> None:
    asyncio.run(_a_partition_paused_when_revoked_is_fetched_again_when_it_comes_back())


async def _a_partition_paused_when_revoked_is_fetched_again_when_it_comes_back() -> None:
    consumer = RebalancingConsumer()
    f = Fetcher({}, Blocking(), max_records=2)
    f.loop, f.consumer = asyncio.get_running_loop(), consumer

    async def nothing(tps: list[TopicPartition]) -> None:
        pass

    f.subscribe("in", nothing, nothing)
    try:
        consumer.events.put(("on_assign", [0]))
        assert await until(lambda: f.owned == {TP0}, 2.0)
        for i in range(8):  # (a file full: paused until its lane drains it)
            consumer.fed.put(Msg(TP0, i))
        assert await until(lambda: consumer.paused == {0}, 2.0)
        # Revoked full (a broker restart fences the member), then back, as after a rejoin.
        consumer.events.put(("on_revoke", [0]))
        assert await until(lambda: not f.owned, 2.0)
        consumer.events.put(("on_assign", [0]))
        assert await until(lambda: f.owned == {TP0}, 2.0)
        consumer.fed.put(Msg(TP0, 8))
        assert await taken(f, TP0, 2.0) == [8]
    finally:
        await f.stop()


class AbortRecorder:
    def __init__(self, open_transaction: bool) -> None:
        self.open_transaction = open_transaction
        self.calls: list[str] = []

    def abort_transaction(self, timeout_s: float) -> None:
        self.calls.append("abort")
        if not self.open_transaction:
            raise confluent_kafka.KafkaException(confluent_kafka.KafkaError(E._STATE))

    def purge(self) -> None:
        self.calls.append("purge")

    def close(self) -> None:
        self.calls.append("close")


def test_a_producer_closed_with_its_transaction_open_aborts_it() -> None:
    # (Left open, it would hold every read_committed reader of the partitions it wrote
    # until the broker's transaction timeout.)
    busy, idle = AbortRecorder(open_transaction=True), AbortRecorder(open_transaction=False)
    _close(busy, Blocking())
    _close(idle, Blocking())
    assert busy.calls == ["abort", "close"]
    assert idle.calls == ["abort", "purge", "close"]


class StuckFlush(AbortRecorder):
    def __init__(self) -> None:
        super().__init__(open_transaction=False)
        self.release = threading.Event()

    def flush(self, timeout_s: float) -> int:
        self.calls.append("flush")
        self.release.wait(timeout_s)
        self.calls.append("flushed")
        return 0


def test_a_producer_is_closed_only_once_a_call_that_outlasted_its_bound_ends() -> None:
    asyncio.run(_a_producer_is_closed_only_once_a_call_that_outlasted_its_bound_ends())


async def _a_producer_is_closed_only_once_a_call_that_outlasted_its_bound_ends() -> None:
    # (librdkafka: a handle closed while another thread flushes it breaks that flush.)
    blocking, producer = Blocking(), StuckFlush()
    with pytest.raises(TimeoutError):
        await blocking.run(producer.flush, 10.0, timeout_s=0.05)
    closing = asyncio.ensure_future(blocking.run(_close, producer, blocking))
    await asyncio.sleep(0.3)
    assert producer.calls == ["flush"] and not closing.done()
    producer.release.set()
    await asyncio.wait_for(closing, 2.0)
    assert producer.calls == ["flush", "flushed", "abort", "purge", "close"]


class ReopenFetcher:
    """The fetcher as a dropped partition's restart uses it: the committed offsets, and
    the seek, which notes whether a lane could poll the partition by then."""

    def __init__(self, txns: Any, committed: int, timeouts: int = 0) -> None:
        self.txns = txns
        self.owned, self.revoking = {TP0}, set[TopicPartition]()
        self.offset = committed
        self.timeouts = timeouts  # (reads that time out first)
        self.seeks: list[tuple[int, bool]] = []

    async def committed(self, tps: list[TopicPartition], timeout_s: float) -> dict[Any, int]:
        await asyncio.sleep(0.01)  # (a round trip: the lanes run meanwhile)
        if self.timeouts:
            self.timeouts -= 1
            raise TimeoutError
        return {tp: self.offset for tp in tps}

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.seeks.append((offset, self.txns.ready(tp)))


class InitRecorder:
    def init_transactions(self, timeout_s: float) -> None:
        pass


def test_a_dropped_partition_is_sought_to_its_committed_offset_before_it_is_ready(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # (Ready first, a lane could take records buffered past the failed transaction into a
    # new one, its states built on the failed one's: those records then count as done.)
    monkeypatch.setattr(confluent_txn, "REOPEN_AFTER_S", 0.0)
    asyncio.run(_a_dropped_partition_is_sought_before_it_is_ready())
    # (A read that times out is tried again: the partition must not stay unready.)
    asyncio.run(_a_dropped_partition_is_sought_before_it_is_ready(timeouts=2))


async def _a_dropped_partition_is_sought_before_it_is_ready(timeouts: int = 0) -> None:
    txns = ConfluentTransactions(
        lambda tid: InitRecorder(),
        cast(Any, None),
        Blocking(),
        group_id="g",
        input_topic="in",
        id_prefix="t-",
        output_topic="out",
        dlq_topic="dlq",
    )
    fetcher = ReopenFetcher(txns, committed=106, timeouts=timeouts)
    txns.fetcher = cast(Any, fetcher)
    await txns.drop([TP0])
    assert not txns.ready(TP0)
    deadline = time.monotonic() + 5.0
    while not txns.ready(TP0) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert fetcher.seeks == [(106, False)]
    assert txns.ready(TP0)
    await txns.close_all()


class FakeProducer:
    """librdkafka's producer as the sink uses it: `produce` queues, `flush` delivers,
    refusing (with the broker's error) every record of a flush that holds one over
    `limit` bytes, as the broker refuses a whole record batch."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.queued: list[tuple[str, bytes, int, Any]] = []
        self.delivered: list[tuple[str, bytes, int]] = []

    def produce(self, topic: str, value: bytes, key: Any, partition: int, **kw: Any) -> None:
        self.queued.append((topic, value, partition, kw["on_delivery"]))

    def flush(self, timeout: float) -> int:
        queued, self.queued = self.queued, []
        too_big = any(len(v) > self.limit for _, v, _, _ in queued)
        for topic, value, partition, cb in queued:
            if too_big:
                cb(E(E.MSG_SIZE_TOO_LARGE), None)
            else:
                self.delivered.append((topic, value, partition))
                cb(None, None)
        return 0

    def list_topics(self, topic: str, timeout: float) -> Any:
        from types import SimpleNamespace

        return SimpleNamespace(topics={topic: SimpleNamespace(partitions={0: 0, 1: 1})})


def out(value: bytes, partition: int | None = None) -> OutRecord:
    return OutRecord("req", value, [], "chunk", TP0, partition)


def test_the_sink_routes_reply_partitions_and_isolates_a_refused_record() -> None:
    asyncio.run(_the_sink_routes_reply_partitions_and_isolates_a_refused_record())


async def _the_sink_routes_reply_partitions_and_isolates_a_refused_record() -> None:
    producer = FakeProducer(limit=10)
    misrouted: list[int] = []
    sink = ConfluentSink(
        producer, Blocking(), "out", "dlq", on_misrouted=lambda: misrouted.append(1)
    )
    await sink.send([out(b"a", 1), out(b"b", 7)], [])
    # Partition 1 exists; 7 does not: the key's partition (-1: librdkafka's partitioner).
    assert producer.delivered == [("out", b"a", 1), ("out", b"b", -1)]
    assert misrouted == [1]
    producer.delivered.clear()
    with pytest.raises(OutputsRefused) as refused:
        await sink.send([out(b"ok"), out(b"x" * 20), out(b"ok2")], [out(b"dead")])
    assert [r.value for r, _ in refused.value.refused] == [b"x" * 20]
    assert sorted(v for _, v, _ in producer.delivered) == [b"dead", b"ok", b"ok2"]


class ErrorMsg(Msg):
    def __init__(self, tp: TopicPartition, code: int) -> None:
        super().__init__(tp, -1)
        self.code = code

    def error(self) -> Any:  # type: ignore[override]
        return E(self.code)


def test_a_refused_right_in_a_consume_ends_the_lanes_naming_its_topic() -> None:
    asyncio.run(_a_refused_right_in_a_consume_ends_the_lanes_naming_its_topic())


async def _a_refused_right_in_a_consume_ends_the_lanes_naming_its_topic() -> None:
    f = Fetcher({}, Blocking(), max_records=10)
    f.loop = asyncio.get_running_loop()
    f._own([TP0])
    src = ConfluentSource(f, "g", lambda: [TP0], timeout_ms=10, max_records=10, commit_timeout_s=1)
    # A transport error is librdkafka's to retry: logged, the lane goes on.
    f._file([ErrorMsg(TP0, E._TRANSPORT)], [], began=0, highs=None)
    assert await src.poll() is None
    f._file([ErrorMsg(TP0, E.TOPIC_AUTHORIZATION_FAILED)], [], began=0, highs=None)
    with pytest.raises(kerrors.TopicAuthorizationFailedError, match="in/0"):
        await src.poll()


def test_a_lanes_batches_are_shared_out_among_its_partitions() -> None:
    asyncio.run(_a_lanes_batches_are_shared_out_among_its_partitions())


async def _a_lanes_batches_are_shared_out_among_its_partitions() -> None:
    # (Taken in order, a backlog of the first partition filled every batch: the others
    # waited until it was drained.)
    f = Fetcher({}, Blocking(), max_records=4)
    f.loop = asyncio.get_running_loop()
    f._own([TP0, TP1])
    f._file([Msg(TP0, i) for i in range(100)] + [Msg(TP1, i) for i in range(3)], [], 0, None)
    first = f.take([TP0, TP1], 4)
    second = f.take([TP0, TP1], 4)
    assert sorted((tp.partition, m.offset()) for tp, m in first) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    # The rest of TP1 and more of TP0.
    assert sorted((tp.partition, m.offset()) for tp, m in second) == [
        (0, 2),
        (0, 3),
        (0, 4),
        (1, 2),
    ]
    third = f.take([TP0, TP1], 4)
    assert [(tp.partition, m.offset()) for tp, m in third] == [(0, 5), (0, 6), (0, 7), (0, 8)]
    # Each partition's records in order throughout.
    for tp in (TP0, TP1):
        offsets = [m.offset() for t, m in first + second + third if t == tp]
        assert offsets == sorted(offsets)


def test_the_leaders_are_woken_after_each_rebalance_callback() -> None:
    asyncio.run(_the_leaders_are_woken_after_each_rebalance_callback())


async def _the_leaders_are_woken_after_each_rebalance_callback() -> None:
    # librdkafka pauses every assigned partition while a callback runs, and resuming
    # them does not wake a broker thread that was left with nothing to fetch: it slept
    # up to a second, and the partitions that stayed got nothing meanwhile. A request to
    # the leaders after the callback (twice: librdkafka's main thread may resume them
    # late) wakes them.
    consumer = RebalancingConsumer()
    f = Fetcher({}, Blocking(), max_records=10)
    f.loop, f.consumer = asyncio.get_running_loop(), consumer

    async def nothing(tps: list[TopicPartition]) -> None:
        pass

    f.subscribe("in", nothing, nothing)
    try:
        consumer.events.put(("on_assign", [0, 1]))
        assert await until(lambda: len(consumer.calls) >= 3, 2.0)
        assert consumer.calls == [("assign", [0, 1]), ("leaders", [0, 1]), ("leaders", [0, 1])]
        consumer.events.put(("on_revoke", [1]))
        assert await until(lambda: len(consumer.calls) >= 6, 2.0)
        assert consumer.calls[3:] == [("unassign", [1]), ("leaders", [0]), ("leaders", [0])]
        await asyncio.sleep(0.4)  # (and no more until the next callback)
        assert len(consumer.calls) == 6
        consumer.events.put(("on_revoke", [0]))  # (nothing left: no leader to wake)
        assert await until(lambda: not f.owned, 2.0)
        await asyncio.sleep(0.4)
        assert consumer.calls[6:] == [("unassign", [0])]
    finally:
        await f.stop()
