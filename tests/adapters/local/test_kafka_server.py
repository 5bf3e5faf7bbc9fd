"""Apache Kafka 4.x itself (worker/adapters/local/kafka_server.py): a KRaft broker + controller
from Maven Central's jars, started once for the module, doing what tansu cannot:
transactions with `read_committed` consumers, idempotent producers, topic configs such as
`max.message.bytes`, and records that outlive a crash and a new broker on the same data.

The first run resolves Kafka with mvn into ~/.cache/derender-kafka (a minute or so); the
module is skipped when java or mvn is missing (it fails instead with
DERENDER_REQUIRE_APACHE_KAFKA=1). Each test is a sync wrapper around `asyncio.run` and
uses its own topics.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import MessageSizeTooLargeError, for_code

from tests.support.kafka_io import consume, produce
from tests.support.server_fixtures import apache_required
from worker.adapters.broker.kafka_probe import group_coordinator_error
from worker.adapters.local.kafka_server import ApacheKafka, MissingToolError, kafka_metadata

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kafka() -> Iterator[ApacheKafka]:
    try:
        broker = ApacheKafka()
    except MissingToolError as e:
        if apache_required():  # CI: a missing JDK or Maven is a failure there
            raise
        pytest.skip(str(e))
    with broker:
        yield broker


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


async def create_topic(
    bootstrap: str, name: str, partitions: int = 1, configs: dict[str, str] | None = None
) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        response = await admin.create_topics(
            [NewTopic(name, partitions, 1, topic_configs=configs or {})]
        )
    finally:
        await admin.close()
    # Errors come back per topic as codes, not as exceptions.
    for topic, code, *_ in response.topic_errors:
        if code != 0:
            raise for_code(code)(f"creating topic {topic!r}")


def test_ready_broker_reports_itself(kafka: ApacheKafka) -> None:
    meta = kafka_metadata(kafka.host, kafka.port)
    assert meta is not None
    assert meta.cluster_id == kafka.cluster_id
    assert meta.brokers == ((1, kafka.host, kafka.port),)
    assert meta.controller_id == 1
    # A started broker coordinates consumer groups already (__consumer_offsets is loaded).
    assert group_coordinator_error(kafka.host, kafka.port) == 0


def test_idempotent_produce_and_consume_in_a_group(kafka: ApacheKafka) -> None:
    topic, group = unique("plain"), unique("g")
    first = [f"r{i}".encode() for i in range(20)]
    later = [f"s{i}".encode() for i in range(5)]

    async def scenario() -> None:
        await create_topic(kafka.bootstrap, topic, partitions=3)
        await produce(kafka.bootstrap, topic, first, enable_idempotence=True, acks="all")
        assert sorted(await consume(kafka.bootstrap, topic, 20, group)) == sorted(first)
        await produce(kafka.bootstrap, topic, later, enable_idempotence=True, acks="all")
        # The group resumes from its committed offsets: only the new records.
        assert sorted(await consume(kafka.bootstrap, topic, 5, group)) == sorted(later)

    asyncio.run(scenario())


def test_read_committed_sees_committed_transactions_only(kafka: ApacheKafka) -> None:
    topic = unique("txn")
    committed = [b"a1", b"a2", b"a3"]
    aborted = [b"x1", b"x2"]
    # Committed after the aborted one: once a consumer has it, everything before it in the
    # partition was decided, so nothing of the aborted transaction can still show up.
    last = [b"b1"]

    async def scenario() -> None:
        await create_topic(kafka.bootstrap, topic)
        producer = AIOKafkaProducer(
            bootstrap_servers=kafka.bootstrap, transactional_id=unique("tx")
        )
        await producer.start()
        try:
            for values, commit in ((committed, True), (aborted, False), (last, True)):
                await producer.begin_transaction()
                for value in values:
                    await producer.send(topic, value)
                if commit:
                    await producer.commit_transaction()
                else:
                    await producer.abort_transaction()
        finally:
            await producer.stop()
        seen = await consume(kafka.bootstrap, topic, 4, isolation_level="read_committed")
        assert seen == committed + last
        # The aborted records were written all the same: read_committed filtered them.
        everything = await consume(kafka.bootstrap, topic, 6)
        assert everything == committed + aborted + last

    asyncio.run(scenario())


def test_topic_max_message_bytes_is_enforced(kafka: ApacheKafka) -> None:
    topic = unique("small")

    async def scenario() -> None:
        await create_topic(kafka.bootstrap, topic, configs={"max.message.bytes": "10000"})
        # The producer's own limit (max_request_size, 1 MiB) lets both through: the
        # broker is the one that refuses the large one.
        await produce(kafka.bootstrap, topic, [b"x" * 5_000])
        with pytest.raises(MessageSizeTooLargeError):
            await produce(kafka.bootstrap, topic, [b"x" * 20_000])
        assert await consume(kafka.bootstrap, topic, 1) == [b"x" * 5_000]

    asyncio.run(scenario())


def test_paused_broker_answers_nothing_until_resumed(kafka: ApacheKafka) -> None:
    kafka.pause()
    try:
        assert kafka.paused
        # The kernel still accepts the connection; the frozen JVM never replies.
        assert kafka_metadata(kafka.host, kafka.port, timeout_s=0.5) is None
    finally:
        kafka.resume()
    assert not kafka.paused
    deadline = time.monotonic() + 10
    while not kafka.ready():
        assert time.monotonic() < deadline, "the broker did not answer again after SIGCONT"
        time.sleep(0.1)


def test_records_survive_kill_and_restart(kafka: ApacheKafka) -> None:
    topic = unique("durable")
    values = [f"d{i}".encode() for i in range(10)]
    asyncio.run(create_topic(kafka.bootstrap, topic))
    asyncio.run(produce(kafka.bootstrap, topic, values, acks="all"))
    port, pid = kafka.port, kafka.pid
    kafka.kill()  # SIGKILL: no clean shutdown, the logs are recovered at the next start
    assert not kafka.running
    kafka.start()
    assert (kafka.port, kafka.running) == (port, True)
    assert kafka.pid != pid
    assert asyncio.run(consume(kafka.bootstrap, topic, 10)) == values


def test_a_kept_data_dir_serves_a_new_broker_on_other_ports(tmp_path: Path) -> None:
    data = tmp_path / "kafka-data"
    topic = unique("kept")
    values = [b"one", b"two", b"three"]
    with ApacheKafka(data_dir=data) as first:
        cluster_id, ports = first.cluster_id, (first.port, first.controller_port)
        asyncio.run(create_topic(first.bootstrap, topic))
        asyncio.run(produce(first.bootstrap, topic, values, acks="all"))
    assert (data / "meta.properties").is_file()
    with ApacheKafka(data_dir=data) as second:
        assert second.cluster_id == cluster_id
        assert (second.port, second.controller_port) != ports
        assert asyncio.run(consume(second.bootstrap, topic, 3)) == values
