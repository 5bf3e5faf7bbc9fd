"""A replicated Apache Kafka cluster of three local nodes (tests/support/kafka_cluster.py):
topics on three replicas, one node killed (its partitions' leadership moves to the live
ones, and acks=all writes go on with two in-sync replicas), the node restarted (it
catches up and is back in every partition's in-sync set)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from tests.support.cluster_tools import (
    describe,
    fully_in_sync,
    leaders,
    led_by_live_nodes,
    wait_partitions,
)
from tests.support.cluster_tools import own_cluster as own_cluster
from tests.support.kafka_cluster import KafkaCluster, cluster_config
from tests.support.kafka_io import consume, produce
from tests.support.servers import create_topics
from worker.adapters.broker.kafka_probe import group_coordinator_error, kafka_metadata

pytestmark = pytest.mark.integration

PARTITIONS = 6
# Past broker.session.timeout.ms (3 s), when the controller fences a killed node, with a
# margin for a loaded machine.
FAILOVER_S = 30.0
# A restarted node's start, its catching up, and the leaders adding it back to the ISR.
REJOIN_S = 90.0


def test_cluster_config_replicates_internal_topics_on_up_to_three_nodes() -> None:
    assert cluster_config(1)["offsets.topic.replication.factor"] == "1"
    assert cluster_config(1)["min.insync.replicas"] == "1"
    three = cluster_config(3)
    assert three["transaction.state.log.replication.factor"] == "3"
    assert three["transaction.state.log.min.isr"] == "2"
    assert three["min.insync.replicas"] == "2"
    assert three["default.replication.factor"] == "3"
    assert cluster_config(5)["offsets.topic.replication.factor"] == "3"
    assert cluster_config(5)["default.replication.factor"] == "5"


def test_one_node_of_three_killed_moves_its_leaders_and_rejoins_after_a_restart(
    own_cluster: KafkaCluster,
) -> None:
    cluster = own_cluster
    bootstrap = cluster.bootstrap
    assert len(bootstrap.split(",")) == 3
    first = cluster.nodes[0]
    meta = kafka_metadata(first.host, first.port)
    assert meta is not None and meta.cluster_id == cluster.cluster_id
    assert sorted(node for node, _, _ in meta.brokers) == [1, 2, 3]
    assert all(group_coordinator_error(n.host, n.port) == 0 for n in cluster.nodes)

    topic = f"rf3-{uuid.uuid4().hex[:8]}"
    asyncio.run(create_topics(bootstrap, [topic], PARTITIONS, replication_factor=3))
    parts = wait_partitions(bootstrap, [topic], fully_in_sync(3), 30, "three in-sync replicas")
    assert len(parts) == PARTITIONS
    assert all(sorted(p["replicas"]) == [1, 2, 3] for p in parts.values())
    before = [f"before-{i}".encode() for i in range(30)]
    asyncio.run(produce(bootstrap, topic, before, acks="all", enable_idempotence=True))

    victim_id, led = leaders(parts).most_common(1)[0]
    assert led >= 1
    victim = cluster.node(victim_id)
    victim.kill()
    live = {1, 2, 3} - {victim_id}
    moved = wait_partitions(
        bootstrap, [topic], led_by_live_nodes(live), FAILOVER_S, "leaders on the live nodes"
    )
    assert all(len(p["isr"]) == 2 for p in moved.values())
    # Two in-sync replicas are min.insync.replicas: acks=all writes still succeed.
    during = [f"during-{i}".encode() for i in range(30)]
    asyncio.run(produce(bootstrap, topic, during, acks="all", enable_idempotence=True))
    assert sorted(asyncio.run(consume(bootstrap, topic, 60))) == sorted(before + during)

    victim.start()
    wait_partitions(bootstrap, [topic], fully_in_sync(3), REJOIN_S, "the node back in sync")
    assert kafka_metadata(victim.host, victim.port) is not None
    after = [f"after-{i}".encode() for i in range(10)]
    asyncio.run(produce(bootstrap, topic, after, acks="all", enable_idempotence=True))
    got = asyncio.run(consume(bootstrap, topic, 70))
    assert sorted(got) == sorted(before + during + after)
    assert set(describe(bootstrap, [topic])) == set(parts)
