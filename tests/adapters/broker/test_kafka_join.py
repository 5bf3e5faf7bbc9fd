"""`kafka_join`: the worker's consumer offers sticky and round robin in one JoinGroup, so a
join makes one generation, and a member joining a group makes exactly one more (aiokafka
0.14 alone joins once per assignor, and the second join starts another generation)."""

from __future__ import annotations

import argparse
import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer

from worker.adapters.broker.kafka import make_consumer
from worker.settings import add_flags, from_args

ASSIGNED_WITHIN_S = 30.0
SETTLE_S = 1.0


def _consumer(bootstrap: str, topic: str, group: str, assignor: str) -> AIOKafkaConsumer:
    parser = argparse.ArgumentParser()
    add_flags(parser, {})
    args = parser.parse_args(
        [
            *("--bootstrap-servers", bootstrap, "--input-topic", topic, "--group-id", group),
            *("--assignor", assignor, "--heartbeat-interval-ms", "250"),
        ]
    )
    return make_consumer(from_args(args))


async def _assigned(consumers: list[AIOKafkaConsumer], partitions: int) -> None:
    """Until every consumer has partitions and together they own each one once, then
    SETTLE_S more (heartbeats that would hear of another generation)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ASSIGNED_WITHIN_S
    while True:
        owned = [[tp.partition for tp in c.assignment()] for c in consumers]
        if all(owned) and sorted(p for ps in owned for p in ps) == list(range(partitions)):
            break
        assert loop.time() < deadline, f"not assigned in {ASSIGNED_WITHIN_S} s: {owned}"
        await asyncio.sleep(0.05)
    await asyncio.sleep(SETTLE_S)


def _generation(c: AIOKafkaConsumer) -> Any:
    return c._coordinator.generation


async def _joins(bootstrap: str, topic: str, assignor: str) -> tuple[int, list[int]]:
    group = f"join-{uuid.uuid4().hex[:8]}"
    first = _consumer(bootstrap, topic, group, assignor)
    await first.start()
    try:
        first.subscribe([topic])
        await _assigned([first], 4)
        alone = _generation(first)
        second = _consumer(bootstrap, topic, group, assignor)
        await second.start()
        try:
            second.subscribe([topic])
            await _assigned([first, second], 4)
            return alone, [_generation(first), _generation(second)]
        finally:
            await second.stop()
    finally:
        await first.stop()


@pytest.mark.integration
@pytest.mark.parametrize("assignor", ["sticky", "roundrobin"])
def test_each_join_makes_one_generation(
    kafka_bootstrap: str, new_topic: Callable[..., str], assignor: str
) -> None:
    topic = new_topic(partitions=4, prefix="join")
    alone, both = asyncio.run(_joins(kafka_bootstrap, topic, assignor))
    assert alone == 1
    assert both == [2, 2]


async def _assigned_with_metadata_lost(bootstrap: str, topic: str) -> list[int]:
    """A lone consumer whose client drops the metadata answers right after it subscribes, as
    aiokafka does with a broker that answers with no brokers (one just back from a freeze):
    its partitions, once assigned."""
    c = _consumer(bootstrap, topic, f"join-{uuid.uuid4().hex[:8]}", "sticky")
    await c.start()
    try:
        cluster = c._client.cluster
        assert not cluster.partitions_for_topic(topic)  # (the topic not asked for yet)
        update, dropped = cluster.update_metadata, []

        def drop_two(metadata: Any) -> None:
            if len(dropped) < 2:
                dropped.append(metadata)
                cluster.failed_update(None)
                return
            update(metadata)

        cluster.update_metadata = drop_two
        c.subscribe([topic])
        await _assigned([c], 4)
        assert len(dropped) == 2
        return sorted(tp.partition for tp in c.assignment())
    finally:
        await c.stop()


@pytest.mark.integration
def test_a_leader_without_the_topics_metadata_refreshes_it_before_assigning(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """Without the refresh the leader assigned nothing, and nothing changed until aiokafka's
    next periodic metadata refresh (5 min): `_assigned` gives up after 30 s."""
    topic = new_topic(partitions=4, prefix="join-md")
    assert asyncio.run(_assigned_with_metadata_lost(kafka_bootstrap, topic)) == [0, 1, 2, 3]
