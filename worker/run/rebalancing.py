"""The runner's side of a rebalance: what it does when partitions are revoked and
assigned (`Runner` inherits it). aiokafka's rebalances are eager (every partition goes,
then the new share comes); KIP-848's (`--kafka-client confluent`) are incremental: only
the partitions that move are revoked, and only their batches fenced."""

from __future__ import annotations

import logging

from aiokafka import AIOKafkaConsumer, TopicPartition

from worker.adapters.broker.confluent.worker import ConfluentClients
from worker.adapters.broker.kafka_source import names, seek_to_time
from worker.adapters.broker.kafka_txn import Transactions
from worker.batch.checkpoint import Checkpoint
from worker.batch.steps import bounded
from worker.failures import HANDLED
from worker.observe.metrics import Metrics
from worker.run.assignment import Assignment
from worker.settings import Settings

log = logging.getLogger("derender.worker")


class Rebalancing:
    s: Settings
    metrics: Metrics
    assignment: Assignment
    checkpoint: Checkpoint | None
    transactions: Transactions | None
    consumer: AIOKafkaConsumer | None
    confluent: ConfluentClients | None

    async def on_revoked(self, revoked: list[TopicPartition]) -> None:
        # The rejoin runs in the background, so lanes may be mid-batch: let those batches
        # produce, save and commit first (their partitions are still ours until the
        # rejoin), within half the session timeout so the rebalance is not held up. One
        # still running after that is fenced: the lease moves on, and its next step raises
        # `Fenced` (were it let on, it could begin a transaction on a producer that the
        # new assignment opened for another lane). Then drop the epochs: a partition
        # that comes back must be claimed anew (another owner may have held it meanwhile).
        # No lane polls until the new assignment is ready (`Assignment` says why).
        # (KIP-848's revocations are incremental: only the moved partitions' batches
        # are fenced, the others go on; the member gives them up after a short wait,
        # `Fetcher.revoke_wait_s`, whatever is still running.)
        moved, wait_s = None, self.s.session_timeout_ms / 2000
        if self.confluent is not None:
            moved, wait_s = revoked, self.confluent.fetcher.revoke_wait_s
        await self.assignment.revoke(wait_s, moved)
        self.metrics.rebalances.inc()
        if self.checkpoint is not None:
            # What waits on --commit-interval-ms commits now (the batches are done): open
            # transactions (closed, their producers would abort them) and pending offsets;
            # else the next owner does those records again.
            try:
                await self.checkpoint.settle(revoked)
            except HANDLED as exc:
                log.warning("committing the revoked partitions' progress failed: %s", exc)
        if self.checkpoint is not None:
            self.checkpoint.forget(revoked)
        if self.transactions is not None:
            await self.transactions.close(revoked)
        for tp in revoked:
            self.metrics.forget_lag(str(tp.partition))
        log.info("partitions revoked: %s", names(revoked))
        if self.confluent is None:
            self.metrics.ready = False
        else:  # (what is left, as an assignment would say)
            left = sorted(self.confluent.assignment() - set(revoked))
            await self.on_assigned([], left)

    async def on_assigned(
        self, assigned: list[TopicPartition], whole: list[TopicPartition] | None = None
    ) -> None:
        """`assigned`: the new partitions; `whole`: all of them (incremental: more)."""
        if whole is None:
            whole = assigned
            if self.confluent is not None:
                whole = sorted({*self.confluent.assignment(), *assigned})
        self.metrics.assigned.set(len(whole))
        self.metrics.ready = True
        log.info("partitions assigned: %s", names(whole))
        try:
            await self._open(assigned)
        finally:
            self.assignment.assigned()  # the lanes poll again, over the new assignment

    async def _open(self, assigned: list[TopicPartition]) -> None:
        if self.transactions is not None:
            try:
                # Fences the partitions' previous owners and settles their transactions,
                # then seeks to the committed offsets (kafka_txn's docstring says why).
                await bounded(
                    self.transactions.open(assigned, self.s.reset or "earliest"),
                    self.s.step_timeout_s,
                    "starting the transactional producers",
                )
            except HANDLED as exc:
                log.warning("starting transactional producers failed, rejoining: %s", exc)
                await self.transactions.drop(
                    [tp for tp in assigned if not self.transactions.ready(tp)]
                )
        if self.s.reset is not None and self.s.reset.isdigit() and self.consumer is not None:
            await bounded(
                seek_to_time(self.consumer, assigned, int(self.s.reset)),
                self.s.step_timeout_s,
                "seeking to --reset",
            )
