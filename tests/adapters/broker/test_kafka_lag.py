"""The group lag as KEDA's Kafka scaler reports it (worker/adapters/broker/kafka_lag.py), on the
session's broker.

Each case is computed two ways: by `GroupLag`, and independently, from what the produced
records and the commits must give, and from a consumer of the group
(`end_offsets` − `committed`). `test_kedas_own_measurement` is the scenario measured with
KEDA v2.21's scaler itself (its pkg/scalers/kafka_scaler.go), and
`test_the_same_total_as_kedas_scaler` asks KEDA's scaler again when its program is built
(`DERENDER_KEDALAG`). Transactions, DeleteRecords and a paused broker need Apache Kafka,
so those cases are skipped on tansu. The lag rule and the gauges, which need no server,
are in test_kafka_lag_rule.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete

from tests.support.server_fixtures import TANSU, kafka_plan, own_apache_kafka
from tests.support.servers import create_topics
from worker.adapters.broker.kafka_lag import GroupLag
from worker.adapters.local.embedded import free_port
from worker.adapters.local.kafka_server import ApacheKafka

integration = pytest.mark.integration

# How long a consumer may take to see records that were acknowledged already.
CONSUME_TIMEOUT_S = 30.0


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def needs_apache_kafka(what: str) -> None:
    if kafka_plan().kind == TANSU:
        pytest.skip(f"tansu lacks {what}")


async def produce(bootstrap: str, topic: str, counts: Mapping[int, int]) -> None:
    """`counts[p]` records to partition p, not transactional: end offset = count."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for partition, n in counts.items():
            for i in range(n):
                await producer.send_and_wait(topic, b"r%d" % i, partition=partition)
    finally:
        await producer.stop()


async def commit(bootstrap: str, group: str, topic: str, offsets: Mapping[int, int]) -> None:
    """Commit these offsets for the group, as its members would."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False
    )
    await consumer.start()
    try:
        tps = {TopicPartition(topic, p): off for p, off in offsets.items()}
        consumer.assign(list(tps))
        await consumer.commit(tps)
    finally:
        await consumer.stop()


async def independent(
    bootstrap: str, group: str, topic: str, partitions: int, isolation_level: str
) -> dict[int, tuple[int, int | None]]:
    """{partition: (end offset, committed offset or None)} through a member of the group,
    which does not use the admin client's OffsetFetch the way `GroupLag` does."""
    # No auto-commit: on stop it would commit the positions it looked up.
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        isolation_level=isolation_level,
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        return {tp.partition: (ends[tp], await consumer.committed(tp)) for tp in tps}
    finally:
        await consumer.stop()


async def sample(bootstrap: str, group: str, topic: str, **options: Any) -> dict[int, int] | None:
    options.setdefault("read_committed", False)
    async with GroupLag(bootstrap, group, topic, **options) as lag:
        return await lag.sample()


# -- against the session's broker ------------------------------------------------------


@integration
def test_lag_is_end_minus_committed_per_partition(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic, group = new_topic(partitions=3, prefix="lag"), unique("g")
    produced = {0: 7, 1: 4, 2: 5}
    committed = {0: 2, 1: 4, 2: 1}

    async def scenario() -> None:
        await produce(kafka_bootstrap, topic, produced)
        await commit(kafka_bootstrap, group, topic, committed)
        lag = GroupLag(kafka_bootstrap, group, topic, read_committed=False)
        try:
            got = await lag.sample()
            assert got == {p: produced[p] - committed[p] for p in produced} == {0: 5, 1: 0, 2: 4}
            seen = await independent(kafka_bootstrap, group, topic, 3, "read_uncommitted")
            assert got == {p: end - (c or 0) for p, (end, c) in seen.items()}
            # Lag falls only when the group commits: the admin API reads the commits,
            # not anyone's position.
            await commit(kafka_bootstrap, group, topic, {0: 7})
            assert await lag.sample() == {0: 0, 1: 0, 2: 4}
            # Only some partitions (e.g. those assigned to this worker).
            assert await lag.sample([2, 5]) == {2: 4}
            assert await lag.sample([]) == {}
        finally:
            await lag.close()
        # Exactly-once's call (read_committed=True) measures the same: the high watermark.
        assert await sample(kafka_bootstrap, group, topic, read_committed=True) == {
            0: 0,
            1: 0,
            2: 4,
        }

    asyncio.run(scenario())


@integration
def test_a_partition_the_group_never_committed(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic, group = new_topic(partitions=3, prefix="lag"), unique("g")

    async def scenario() -> None:
        # Partition 1 never committed, and partition 2 empty and never committed.
        await produce(kafka_bootstrap, topic, {0: 3, 1: 5})
        await commit(kafka_bootstrap, group, topic, {0: 1})
        seen = await independent(kafka_bootstrap, group, topic, 3, "read_uncommitted")
        assert seen == {0: (3, 1), 1: (5, None), 2: (0, None)}
        # reset="earliest" (the worker's default): a new owner reads the whole log.
        assert await sample(kafka_bootstrap, group, topic) == {0: 2, 1: 5, 2: 0}
        # reset="latest": KEDA's default rule, 1 per partition never committed, so that
        # one replica stays to commit.
        assert await sample(kafka_bootstrap, group, topic, reset="latest") == {
            0: 2,
            1: 1,
            2: 1,
        }
        # A group nobody ever used: every partition is uncommitted.
        assert await sample(kafka_bootstrap, unique("nobody"), topic) == {0: 3, 1: 5, 2: 0}

    asyncio.run(scenario())


@integration
def test_never_committed_counts_from_the_log_start_not_from_zero(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    needs_apache_kafka("DeleteRecords")
    topic, group = new_topic(partitions=1, prefix="lag"), unique("g")
    tp = TopicPartition(topic, 0)

    async def scenario() -> None:
        await produce(kafka_bootstrap, topic, {0: 5})
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
        await admin.start()
        try:
            # What retention does to the head of a partition: the log now starts at 2.
            assert await admin.delete_records({tp: RecordsToDelete(2)}) == {tp: 2}
        finally:
            await admin.close()
        # 3 records are left to read, and KEDA v2.21 (offsetResetPolicy: earliest) says 3.
        assert await sample(kafka_bootstrap, group, topic) == {0: 3}
        assert await sample(kafka_bootstrap, group, topic, reset="latest") == {0: 1}

    asyncio.run(scenario())


async def wait_end(bootstrap: str, tp: TopicPartition, end: int) -> None:
    """Until the high watermark of `tp` is `end`. A transaction's commit marker is written
    after the commit returns: the next record could otherwise take the marker's offset."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        deadline = time.monotonic() + CONSUME_TIMEOUT_S
        while (await consumer.end_offsets([tp]))[tp] != end:
            assert time.monotonic() < deadline, f"{tp} never reached {end}"
            await asyncio.sleep(0.05)
    finally:
        await consumer.stop()


async def keda_scenario(bootstrap: str, topic: str, group: str) -> AIOKafkaProducer:
    """The scenario measured with KEDA's scaler: p0 10 records / committed 4, p1 20 / 20, p2
    7 in a transaction left open / never committed, p3 5 / never committed. Returns the
    producer whose transaction is open (the caller aborts and stops it)."""
    await produce(bootstrap, topic, {0: 10, 1: 20, 3: 5})
    await commit(bootstrap, group, topic, {0: 4, 1: 20})
    pending = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=unique("open"))
    await pending.start()
    await pending.begin_transaction()
    for i in range(7):
        await pending.send_and_wait(topic, b"o%d" % i, partition=2)
    return pending


# What KEDA v2.21's scaler reported for that scenario, per partition (its metric is the
# sum before the cap: 8 and 18).
KEDA_LATEST = {0: 6, 1: 0, 2: 1, 3: 1}
KEDA_EARLIEST = {0: 6, 1: 0, 2: 7, 3: 5}


@integration
def test_kedas_own_measurement(kafka_bootstrap: str, new_topic: Callable[..., str]) -> None:
    """The same numbers as KEDA, per partition, under either guarantee's call: the high
    watermark counts the open transaction's 7 records (the last stable offset of p2 is
    0), and a partition never committed counts 1 (latest) or end − log start (earliest)."""
    needs_apache_kafka("transactions")
    topic, group = new_topic(partitions=4, prefix="keda"), unique("g")

    async def scenario() -> None:
        pending = await keda_scenario(kafka_bootstrap, topic, group)
        try:
            seen = await independent(kafka_bootstrap, group, topic, 4, "read_uncommitted")
            assert seen == {0: (10, 4), 1: (20, 20), 2: (7, None), 3: (5, None)}
            stable = await independent(kafka_bootstrap, group, topic, 4, "read_committed")
            assert stable[2] == (0, None)  # what a read_committed end would have said
            for read_committed in (False, True):
                latest = await sample(
                    kafka_bootstrap, group, topic, reset="latest", read_committed=read_committed
                )
                earliest = await sample(
                    kafka_bootstrap, group, topic, reset="earliest", read_committed=read_committed
                )
                assert latest == KEDA_LATEST and sum(latest.values()) == 8
                assert earliest == KEDA_EARLIEST and sum(earliest.values()) == 18
        finally:
            await pending.abort_transaction()
            await pending.stop()
        # Aborted: the 7 records and the abort marker stay in the log, so KEDA's rule for
        # a partition never committed (earliest) now counts 8 there.
        await wait_end(kafka_bootstrap, TopicPartition(topic, 2), 8)
        assert await sample(kafka_bootstrap, group, topic) == {**KEDA_EARLIEST, 2: 8}

    asyncio.run(scenario())


@integration
def test_an_exactly_once_group_against_the_high_watermark(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """A read_committed member that commits its position: the records of a transaction
    still open count (KEDA's end is the high watermark), and once it commits and they are
    read, the lag is 0 (the position steps over the commit marker)."""
    needs_apache_kafka("transactions")
    topic, group = new_topic(partitions=1, prefix="txn"), unique("g")
    tp = TopicPartition(topic, 0)

    async def read(member: AIOKafkaConsumer, n: int) -> list[int]:
        got: list[int] = []
        deadline = time.monotonic() + CONSUME_TIMEOUT_S
        while len(got) < n and time.monotonic() < deadline:
            batch = await member.getmany(tp, timeout_ms=500)
            got += [m.offset for m in batch.get(tp, [])]
        return got

    async def scenario() -> None:
        done = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, transactional_id=unique("a"))
        pending = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, transactional_id=unique("b"))
        member = AIOKafkaConsumer(
            bootstrap_servers=kafka_bootstrap,
            group_id=group,
            isolation_level="read_committed",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await done.start()
        await pending.start()
        await member.start()
        open_ = False
        try:
            # A committed transaction: records at 0, 1, 2 and its commit marker at 3.
            async with done.transaction():
                for i in range(3):
                    await done.send_and_wait(topic, b"c%d" % i, partition=0)
            await wait_end(kafka_bootstrap, tp, 4)
            # One left open: records at 4 and 5, no marker yet.
            await pending.begin_transaction()
            open_ = True
            for i in range(2):
                await pending.send_and_wait(topic, b"o%d" % i, partition=0)

            member.assign([tp])
            assert await read(member, 3) == [0, 1, 2]
            position = await member.position(tp)
            assert position == member.last_stable_offset(tp) == 4
            assert member.highwater(tp) == 6
            await member.commit({tp: position})
            assert await independent(kafka_bootstrap, group, topic, 1, "read_uncommitted") == {
                0: (6, 4)
            }
            # Nothing is readable yet, but KEDA counts the open transaction's 2 records.
            for read_committed in (True, False):
                got = await sample(kafka_bootstrap, group, topic, read_committed=read_committed)
                assert got == {0: 2}

            # The engine commits: marker at 6, high watermark 7. The member reads 4 and 5
            # and commits its position, past the marker: no lag left.
            await pending.commit_transaction()
            open_ = False
            await wait_end(kafka_bootstrap, tp, 7)
            assert await read(member, 2) == [4, 5]
            position = await member.position(tp)
            assert position == 7
            await member.commit({tp: position})
            assert await sample(kafka_bootstrap, group, topic, read_committed=True) == {0: 0}

            # The pitfall of KAFKA-6607 (librdkafka#2539): committing `last offset + 1` (6)
            # leaves the marker counted, a lag of 1 that stays.
            await member.commit({tp: 6})
            assert await sample(kafka_bootstrap, group, topic, read_committed=True) == {0: 1}
        finally:
            if open_:
                await pending.abort_transaction()
            for client in (member, pending, done):
                await client.stop()

    asyncio.run(scenario())


@integration
def test_the_same_total_as_kedas_scaler(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """KEDA's own scalers (tests/autoscale/keda, built by `make autoscale`; the `kafka` and
    `apache-kafka` triggers) on the same group at the same moment: their metric, uncapped
    (`allowIdleConsumers`), is our sum. Runs only when DERENDER_KEDALAG names the program:
    `make test` does not build KEDA."""
    kedalag = os.environ.get("DERENDER_KEDALAG", "")
    if not kedalag or not os.access(kedalag, os.X_OK):
        pytest.skip("set DERENDER_KEDALAG to the kedalag program to compare with KEDA")
    needs_apache_kafka("transactions")
    topic, group = new_topic(partitions=4, prefix="keda"), unique("g")

    def keda(policy: str, allow_idle: bool, trigger: str) -> float:
        meta = {
            "bootstrapServers": kafka_bootstrap,
            "consumerGroup": group,
            "topic": topic,
            "lagThreshold": "1",
            "offsetResetPolicy": policy,
            "allowIdleConsumers": str(allow_idle).lower(),
        }
        argv = [kedalag, "-type", trigger, "-once"]
        for k, v in meta.items():
            argv += ["-meta", f"{k}={v}"]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True)
        poll = json.loads(out.stdout.splitlines()[-1])
        assert not poll.get("error"), poll
        return float(poll["value"])

    async def scenario() -> None:
        pending = await keda_scenario(kafka_bootstrap, topic, group)
        try:
            for policy, expected in (("latest", KEDA_LATEST), ("earliest", KEDA_EARLIEST)):
                ours = await sample(kafka_bootstrap, group, topic, reset=policy)
                assert ours == expected
                for trigger in ("kafka", "apache-kafka"):  # (sarama, kafka-go)
                    uncapped = await asyncio.to_thread(keda, policy, True, trigger)
                    assert uncapped == sum(ours.values()), trigger
                    # KEDA's cap (threshold 1, 4 partitions), which the worker leaves to it.
                    capped = await asyncio.to_thread(keda, policy, False, trigger)
                    assert capped == min(sum(ours.values()), 4), trigger
        finally:
            await pending.abort_transaction()
            await pending.stop()

    asyncio.run(scenario())


@integration
def test_a_missing_topic_gives_nothing_and_is_not_created(kafka_bootstrap: str) -> None:
    absent = unique("absent")

    async def scenario() -> None:
        started = time.monotonic()
        assert await sample(kafka_bootstrap, unique("g"), absent, timeout_s=2) is None
        assert time.monotonic() - started < 5
        # Brokers with auto.create.topics.enable (tansu) create a topic that a Metadata
        # request names: the probe must not do that.
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
        await admin.start()
        try:
            assert absent not in await admin.list_topics()
        finally:
            await admin.close()

    asyncio.run(scenario())


@integration
def test_an_unreachable_broker_gives_nothing_quickly() -> None:
    bootstrap = f"127.0.0.1:{free_port()}"  # nothing listens there

    async def scenario() -> None:
        lag = GroupLag(bootstrap, "g", "t", read_committed=True, timeout_s=1.0)
        try:
            for _ in range(4):  # again and again: each sample tries anew
                started = time.monotonic()
                assert await lag.sample() is None
                assert time.monotonic() - started < 3
        finally:
            await lag.close()

    asyncio.run(scenario())


# -- a broker of its own, paused and resumed ---------------------------------------------


@pytest.fixture
def own_broker() -> Iterator[ApacheKafka]:
    """Pausing the session's broker would stall other tests' clients: one of its own."""
    yield from own_apache_kafka("a process to pause")


@integration
def test_a_broker_that_stops_answering_gives_nothing_then_lag_again(
    own_broker: ApacheKafka,
) -> None:
    bootstrap = own_broker.bootstrap
    topic, group = "in", unique("g")

    async def scenario() -> None:
        await create_topics(bootstrap, [topic], 2)
        await produce(bootstrap, topic, {0: 3, 1: 2})
        await commit(bootstrap, group, topic, {0: 1, 1: 2})
        lag = GroupLag(bootstrap, group, topic, read_committed=True, timeout_s=1.0)
        try:
            assert await lag.sample() == {0: 2, 1: 0}
            own_broker.pause()  # connections stay open, nothing answers
            try:
                started = time.monotonic()
                assert await lag.sample() is None
                assert time.monotonic() - started < 3
            finally:
                own_broker.resume()
            deadline = time.monotonic() + 30
            while (got := await lag.sample()) is None:
                assert time.monotonic() < deadline, "no lag after the broker came back"
                await asyncio.sleep(0.2)
            assert got == {0: 2, 1: 0}
        finally:
            await lag.close()

    asyncio.run(scenario())
