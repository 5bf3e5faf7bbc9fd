"""A KIP-848 member whose heartbeat answer was lost (`group_watch`), on a broker of its
own that the test pauses: librdkafka sends the timed-out heartbeat again, the
coordinator does not repeat the revocation the lost answer carried, and the member kept
every partition while the one that joined waited for its rebalance timeout. The worker's
consumer (`ConfluentClients`) notices, joins again, and the group settles. The decision
itself, without a broker: tests/adapters/broker/test_confluent_watch.py."""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import confluent_kafka
import confluent_kafka.admin
import pytest
from aiokafka import TopicPartition

from tests.support.server_fixtures import own_apache_kafka
from tests.support.servers import create_topics
from worker.adapters.broker.confluent.worker import ConfluentClients
from worker.adapters.local.kafka_server import ApacheKafka
from worker.settings import add_flags, from_args

integration = pytest.mark.integration

PARTITIONS = 4
# Longer than the local broker's heartbeat interval (its heartbeats' timeout), and
# placed just after a member joins: the answer that tells the first member to give
# partitions up is the one that times out.
PAUSE_S = 2.5


# A member's session long enough that the pause expires nobody: the coordinator, its
# timers frozen with it, would fence the members at once when it resumes, and a fenced
# member joins again by itself.
BROKER_CONFIG = {
    "group.consumer.session.timeout.ms": "20000",
    "broker.session.timeout.ms": "20000",
}
# Set-ups whose first member heard of its revocation before the pause, and so had
# nothing to miss, are begun again, at most this many times.
ATTEMPTS = 4


@pytest.fixture
def own_broker() -> Iterator[ApacheKafka]:
    """Pausing the session's broker would stall other tests' clients: one of its own."""
    yield from own_apache_kafka("KIP-848 groups and a process to pause", BROKER_CONFIG)


class Joiner:
    """A plain KIP-848 member of the group, polled on a thread of its own."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        self.owned: set[int] = set()
        self.consumer = confluent_kafka.Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer"}
        )
        self.consumer.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked)
        self.running = True
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _assigned(self, _: Any, parts: list[Any]) -> None:
        self.owned |= {p.partition for p in parts}

    def _revoked(self, _: Any, parts: list[Any]) -> None:
        self.owned -= {p.partition for p in parts}

    def _poll(self) -> None:
        while self.running:
            self.consumer.consume(100, 0.05)

    def close(self) -> None:
        self.running = False
        self.thread.join(10)
        self.consumer.close()


def worker_settings(bootstrap: str, topic: str, group: str) -> Any:
    parser = argparse.ArgumentParser()
    add_flags(parser, {})
    argv = ["--kafka-client", "confluent", "--bootstrap-servers", bootstrap]
    argv += ["--input-topic", topic, "--output-topic", "out", "--group-id", group]
    return from_args(parser.parse_args(argv))


async def until(what: str, ok: Any, timeout_s: float) -> float:
    began = time.monotonic()
    while not ok():
        assert time.monotonic() - began < timeout_s, f"{what}: not within {timeout_s:.0f}s"
        await asyncio.sleep(0.05)
    return time.monotonic() - began


def members(bootstrap: str, group: str) -> int:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    return len(admin.describe_consumer_groups([group])[group].result(10).members)


@integration
def test_a_member_that_missed_its_revocation_joins_again_and_the_group_settles(
    own_broker: ApacheKafka,
) -> None:
    bootstrap, topic = own_broker.bootstrap, "in"

    async def attempt() -> bool:
        """False when the set-up missed (the first member heard in time)."""
        group = f"g-{uuid.uuid4().hex[:8]}"
        clients = ConfluentClients(worker_settings(bootstrap, topic, group))

        async def revoked(tps: list[TopicPartition]) -> None:
            return None

        async def assigned(tps: list[TopicPartition]) -> None:
            return None

        await clients.connect()
        clients.subscribe(revoked, assigned)
        joiner = None
        try:
            mine, fetcher = clients.fetcher.held, clients.fetcher
            await until("the first member's assignment", lambda: len(mine()) == PARTITIONS, 30)
            callbacks = fetcher.callbacks
            joiner = Joiner(bootstrap, group, topic)
            while await asyncio.to_thread(members, bootstrap, group) < 2:
                await asyncio.sleep(0.01)
            # Paused before the first member's next heartbeat (half a second apart): the
            # answer that carries its revocation times out.
            own_broker.pause()
            await asyncio.sleep(PAUSE_S)
            if fetcher.callbacks != callbacks:  # (it was told before the pause)
                return False
            own_broker.resume()
            took = await until("the joiner's partitions", lambda: joiner.owned, 20)
            settled = await until(
                "a settled group",
                lambda: (
                    mine() | joiner.owned == set(range(PARTITIONS)) and not mine() & joiner.owned
                ),
                10,
            )
            # The group settled by the watch's doing.
            assert clients.watch.rejoins == 1, (took, settled)
            # And the coordinator's view (ConsumerGroupDescribe) is what the members hold.
            seen = await clients._group_view()
            assert seen is not None
            assert (seen.target, seen.others) == (mine(), joiner.owned)
            return True
        finally:
            if own_broker.paused:
                own_broker.resume()
            if joiner is not None:
                await asyncio.to_thread(joiner.close)
            await clients.close()

    async def scenario() -> None:
        await create_topics(bootstrap, [topic], PARTITIONS)
        for _ in range(ATTEMPTS):
            if await attempt():
                return
        pytest.fail(f"the first member heard of its revocation before the pause {ATTEMPTS} times")

    asyncio.run(scenario())
