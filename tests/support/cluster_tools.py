"""A test's own replicated Apache Kafka cluster (tests/support/kafka_cluster.py) and
what its tests ask of it: which node leads which partition, and which replicas are in sync."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from tests.support.kafka_cluster import KafkaCluster
from tests.support.server_fixtures import TANSU, apache_required, kafka_plan
from worker.adapters.local.kafka_server import MissingToolError

# The internal topic whose one partition's leader is every transactional id's coordinator
# (the cluster, like the single node, keeps it on one partition).
TRANSACTION_STATE = "__transaction_state"

# (topic, partition) → the partition's metadata: "leader", "replicas", "isr".
Partitions = dict[tuple[str, int], dict[str, Any]]


@pytest.fixture
def own_cluster() -> Iterator[KafkaCluster]:
    """Three nodes of this test's own, started at once and closed after the test."""
    if kafka_plan().kind == TANSU:
        pytest.skip("a cluster needs Apache Kafka")
    try:
        cluster = KafkaCluster(3, progress=lambda _: None)
    except MissingToolError as e:
        if apache_required():
            raise
        pytest.skip(str(e))
    with cluster:
        yield cluster


def describe(bootstrap: str, topics: list[str]) -> Partitions:
    """Every partition of `topics` as the cluster reports it now."""

    async def ask() -> list[dict[str, Any]]:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
        await admin.start()
        try:
            return list(await admin.describe_topics(topics))
        finally:
            await admin.close()

    return {
        (t["topic"], p["partition"]): p
        for t in asyncio.run(ask())
        for p in t["partitions"]
        if t["error_code"] == 0
    }


def wait_partitions(
    bootstrap: str,
    topics: list[str],
    cond: Callable[[Partitions], bool],
    timeout_s: float,
    what: str,
) -> Partitions:
    """Describe `topics` until `cond` holds for their partitions (all of them listed)."""
    deadline = time.monotonic() + timeout_s
    parts: Partitions = {}
    while True:
        try:
            parts = describe(bootstrap, topics)
        except Exception:  # a node just killed may fail the request: ask again
            parts = {}
        listed = {topic for topic, _ in parts}
        if listed == set(topics) and cond(parts):
            return parts
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}: {parts}")
        time.sleep(0.2)


def leaders(parts: Partitions) -> Counter[int]:
    """How many of the partitions each node leads."""
    return Counter(p["leader"] for p in parts.values())


def led_by_live_nodes(live: set[int]) -> Callable[[Partitions], bool]:
    """Every partition has a leader among `live` and no replica outside it in sync."""
    return lambda parts: all(p["leader"] in live and set(p["isr"]) <= live for p in parts.values())


def fully_in_sync(size: int) -> Callable[[Partitions], bool]:
    return lambda parts: all(len(p["isr"]) == size for p in parts.values())
