"""`run --guarantee exactly-once` end to end on the real Apache Kafka broker: each input
partition's outputs, offsets and states in one transaction; a read_committed consumer sees
every output exactly once, with no dedupe."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from tokenizers import Tokenizer

from tests.chaos.tools import group_offsets, records_counted, scrape, wait_counted, wait_until
from tests.integration.harness import (
    WorkerProcess,
    done_count,
    interleave,
    make_generations,
    publish,
    read_all,
    verify,
)
from tests.support.server_fixtures import TANSU, kafka_plan
from tests.support.servers import free_port

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("kafka_client")]

EOS = ("--guarantee", "exactly-once")


@pytest.fixture(autouse=True)
def _transactions() -> None:
    if kafka_plan().kind == TANSU:
        pytest.skip("tansu has no transactions")


def _committed_to(
    bootstrap: str,
    group: str,
    topics: dict[str, str],
    ends: dict[int, int],
    timeout_s: float,
    by: str,
) -> None:
    """Wait until the group's committed offsets are the input's `ends` (all 4 partitions)."""
    want = {p: ends.get(p, 0) for p in range(4)}
    wait_until(
        lambda: group_offsets(bootstrap, group, topics["input"], 4) == want,
        timeout_s,
        f"{by} to commit the offsets {want}",
    )


def read_committed(bootstrap: str, topic: str, requests: int) -> list:  # type: ignore[type-arg]
    return asyncio.run(
        read_all(
            bootstrap,
            topic,
            lambda o: done_count(o) >= requests,
            isolation_level="read_committed",
        )
    )


@pytest.mark.parametrize("lanes", [1, 2])
def test_hundreds_of_interleaved_requests_once_each(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
    lanes: int,
) -> None:
    gens = make_generations(deepseek, 300, seed=701)
    port = free_port()
    worker = worker_factory(*EOS, "--lanes", str(lanes), metrics_port=port)
    ends = asyncio.run(publish(kafka_bootstrap, topics["input"], interleave(gens, seed=702)))
    outputs = read_committed(kafka_bootstrap, topics["output"], len(gens))
    verdict = verify(outputs, gens)
    assert verdict.repeats == 0, verdict
    # The offsets went in with the transactions: the group's committed offsets are the
    # input's ends, and the lag KEDA would read (committed against the last stable
    # offset) falls to 0 on the worker's own gauge.
    _committed_to(kafka_bootstrap, worker.group_id, topics, ends, 30, "the transactions")
    wait_until(
        lambda: scrape(port).get("derender_group_lag_sum") == 0.0,
        30,
        "derender_group_lag_sum 0",
    )
    assert worker.stop() == 0, worker.log_tail()
    assert "stopped after" in worker.log_tail()


async def publish_in_transactions(
    bootstrap: str, topic: str, records: list[dict[str, Any]], per_transaction: int
) -> dict[int, int]:
    """An engine that writes its chunks transactionally: every transaction's commit marker
    takes an offset. Returns the end offset per partition (markers included)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"engine-{topic}")
    await producer.start()
    try:
        for at in range(0, len(records), per_transaction):
            async with producer.transaction():
                for r in records[at : at + per_transaction]:
                    await producer.send(topic, json.dumps(r).encode(), key=r["request_id"].encode())
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed")
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(4)]
        ends = await consumer.end_offsets(tps)
    finally:
        await consumer.stop()
    return {tp.partition: off for tp, off in ends.items()}


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_a_transactional_input_topic_leaves_no_lag(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
    guarantee: str,
) -> None:
    """The commit markers of the engine's transactions take offsets: the worker commits
    past them (its position), so the group's lag reaches 0 — KEDA can scale to zero."""
    gens = make_generations(deepseek, 40, seed=711)
    worker = worker_factory("--guarantee", guarantee)
    ends = asyncio.run(
        publish_in_transactions(kafka_bootstrap, topics["input"], interleave(gens, seed=712), 25)
    )
    outputs = read_committed(kafka_bootstrap, topics["output"], len(gens))
    verify(outputs, gens)
    wait_until(
        lambda: group_offsets(kafka_bootstrap, worker.group_id, topics["input"], 4) == ends,
        30,
        f"the group to commit past the markers, to {ends}",
    )
    assert worker.stop() == 0, worker.log_tail()


# A commit interval far longer than the tests: whatever becomes visible before it is up was
# committed by a stop or a revocation, not by the interval.
LONG = ("--commit-interval-ms", "30000", "--transaction-timeout-ms", "60000")
COMMITTED = "read_committed"


def _nothing_committed_yet(bootstrap: str, topics: dict[str, str], group: str) -> None:
    """The outputs are in the output topic, but only in open transactions."""
    uncommitted = asyncio.run(read_all(bootstrap, topics["output"], lambda o: done_count(o) > 0))
    assert done_count(uncommitted) > 0
    committed = asyncio.run(
        read_all(
            bootstrap, topics["output"], lambda o: False, 1.5, isolation_level="read_committed"
        )
    )
    assert committed == []
    assert group_offsets(bootstrap, group, topics["input"], 4) == {p: 0 for p in range(4)}


def test_transactions_span_batches_and_a_stop_commits_them(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
) -> None:
    """`--commit-interval-ms`: a partition's transaction stays open over its batches; a
    SIGTERM commits what is open (a stop must not leave the next owner to do it again)."""
    gens = make_generations(deepseek, 30, seed=721)
    port = free_port()
    worker = worker_factory(*EOS, *LONG, metrics_port=port)
    records = interleave(gens, seed=722)
    ends = asyncio.run(publish(kafka_bootstrap, topics["input"], records))
    wait_counted(port, len(records))
    _nothing_committed_yet(kafka_bootstrap, topics, worker.group_id)
    assert worker.stop() == 0, worker.log_tail()
    verdict = verify(read_committed(kafka_bootstrap, topics["output"], len(gens)), gens)
    assert verdict.repeats == 0, verdict
    assert group_offsets(kafka_bootstrap, worker.group_id, topics["input"], 4) == {
        p: ends.get(p, 0) for p in range(4)
    }


def test_a_revocation_commits_the_open_transactions_before_the_partitions_move(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
    kafka_client: str,
) -> None:
    """A second worker joins while the first holds open transactions: the first commits
    them in its revocation, so the second finds the offsets at the ends and does nothing
    again (were they aborted, it would redo every record). With KIP-848 (confluent) only
    the partitions that move are revoked: theirs are committed, the others' transactions
    stay open until their interval."""
    gens = make_generations(deepseek, 30, seed=731)
    port, port2 = free_port(), free_port()
    first = worker_factory(*EOS, *LONG, metrics_port=port)
    records = interleave(gens, seed=732)
    ends = asyncio.run(publish(kafka_bootstrap, topics["input"], records))
    wait_counted(port, len(records))
    _nothing_committed_yet(kafka_bootstrap, topics, first.group_id)
    second = worker_factory(*EOS, *LONG, metrics_port=port2)
    if kafka_client == "confluent":
        found = wait_until(
            lambda: re.search(r"partitions assigned: (.+)", second.log_text()), 30, "assigned"
        )
        moved = {int(p.rsplit("/", 1)[1]) for p in found.group(1).split(", ")}
        assert 0 < len(moved) < 4, found.group(0)
        want = {p: ends.get(p, 0) if p in moved else 0 for p in range(4)}
        wait_until(
            lambda: group_offsets(kafka_bootstrap, first.group_id, topics["input"], 4) == want,
            25,
            f"the revocation to commit the moved partitions' offsets {want}",
        )
        assert first.stop() == 0, first.log_tail()  # (its stop commits the rest)
        _committed_to(kafka_bootstrap, first.group_id, topics, ends, 25, "the stop")
    else:
        _committed_to(kafka_bootstrap, first.group_id, topics, ends, 25, "the revocation")
    verdict = verify(read_committed(kafka_bootstrap, topics["output"], len(gens)), gens)
    assert verdict.repeats == 0, verdict
    wait_until(lambda: scrape(port2).get("derender_assigned_partitions", 0) > 0, 30, "assigned")
    assert sum(records_counted(port2).values()) == 0
    assert second.stop() == 0, second.log_tail()
    if first.alive:
        assert first.stop() == 0, first.log_tail()
