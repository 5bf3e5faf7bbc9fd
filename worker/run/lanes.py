"""What the runner's lanes are made of: each lane's source (its share of the assigned
partitions) and the one checkpoint they all go through."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiokafka import AIOKafkaConsumer, TopicPartition

from worker.adapters.broker.kafka_source import KafkaSource
from worker.adapters.broker.kafka_txn import Transactions
from worker.batch.checkpoint import Behind, Checkpoint
from worker.batch.transactional import TransactionalCheckpoint
from worker.observe.propagation import carried_names
from worker.ports import StateStore
from worker.run.assignment import Assignment
from worker.settings import Settings


def lane_source(
    consumer: AIOKafkaConsumer, s: Settings, lane: int, txns: Transactions | None
) -> KafkaSource:
    """The source of lane `lane`: every `lanes`-th assigned partition, in a fixed order
    (under exactly-once, those whose producer is ready)."""

    def share() -> list[TopicPartition]:
        mine = sorted(consumer.assignment())[lane :: s.lanes]
        return mine if txns is None else [tp for tp in mine if txns.ready(tp)]

    return KafkaSource(
        consumer,
        s.group_id,
        share,
        timeout_ms=s.poll_timeout_ms,
        max_records=s.max_batch,
        carry=carried_names(s.pass_headers),
    )


def make_checkpoint(
    s: Settings,
    source: KafkaSource,
    store: StateStore,
    txns: Transactions | None,
    assignment: Assignment,
    track: Callable[[asyncio.Future[None]], None],
) -> Checkpoint:
    """One checkpoint for every lane: commits and rewinds go through the one consumer, the
    lanes' partitions are disjoint, and a revocation drops an epoch wherever it was.
    Exactly-once: transactions over --commit-interval-ms, committed in the background;
    at-least-once: commits in the background, one per partition per --commit-interval-ms
    (checkpoint.py, step 6). Each background commit is handed to `track`."""
    if txns is not None:
        return TransactionalCheckpoint(
            source,
            store,
            txns,
            assignment.lease,
            interval_s=s.commit_interval_ms / 1000,
            timeout_s=s.step_timeout_s,
            track=track,
        )
    behind = Behind(
        source.ends, source.commit_ends, s.step_timeout_s, track, s.commit_interval_ms / 1000
    )
    return Checkpoint(source, store, assignment.lease, behind)
