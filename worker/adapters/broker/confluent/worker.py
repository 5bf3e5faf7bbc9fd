"""The worker's Kafka clients on confluent-kafka (`--kafka-client confluent`), as the
runner uses them: connect, subscribe with the rebalance coroutines, each lane's source,
the sinks (a producer per lane) or exactly-once's transactions, the lag, and the close."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import confluent_kafka
from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from worker.adapters.broker.confluent.clients import (
    Blocking,
    callback_timeout_s,
    consumer_config,
    producer_config,
)
from worker.adapters.broker.confluent.describe import describe_member
from worker.adapters.broker.confluent.fetch import Fetcher
from worker.adapters.broker.confluent.group_watch import GroupView, GroupWatch, HeartbeatLog
from worker.adapters.broker.confluent.logs import LibrdkafkaLog
from worker.adapters.broker.confluent.rebalance import Rebalance
from worker.adapters.broker.confluent.sink import ConfluentSink
from worker.adapters.broker.confluent.source import ConfluentSource
from worker.adapters.broker.confluent.txn import ConfluentTransactions
from worker.adapters.broker.kafka import security_kwargs
from worker.observe.propagation import carried_names
from worker.ports import Sink
from worker.settings import EXACTLY_ONCE, Settings

log = logging.getLogger("derender.worker")
# librdkafka's own log lines, through Python's logging (it writes to stderr otherwise),
# each repeated line rate-limited.
LIBRDKAFKA_LOG = LibrdkafkaLog(logging.getLogger("derender.librdkafka"))
# How long a look at the group's coordinator may take (`GroupWatch`).
DESCRIBE_TIMEOUT_S = 5.0


class ConfluentClients:
    """One consumer (its `Fetcher`) and the producers, for one `Runner`."""

    def __init__(
        self,
        s: Settings,
        on_misrouted: Callable[[], object] | None = None,
        on_rejoin: Callable[[], object] = lambda: None,
    ) -> None:
        self.s = s
        self.on_misrouted = on_misrouted
        self.blocking = Blocking()
        logger = HeartbeatLog(LIBRDKAFKA_LOG, lambda: self.watch.heartbeat_timed_out())
        conf = {**consumer_config(s), "logger": logger, "error_cb": self._on_error}
        self.fetcher = Fetcher(conf, self.blocking, s.max_batch)
        self.fetcher.callback_timeout_s = callback_timeout_s(s)
        self.watch = GroupWatch(self.fetcher, self._group_view, on_rejoin)
        self._admin: Any = None
        self.producers: list[Any] = []
        self.transactions: ConfluentTransactions | None = None

    def _on_error(self, error: Any) -> None:
        """The consumer's errors, on the fetch thread (librdkafka logs them too). Every
        broker unreachable: the transactional producers are made again before their next
        transaction (`ConfluentTransactions.brokers_lost`)."""
        txns, loop = self.transactions, self.fetcher.loop
        if error.code() == confluent_kafka.KafkaError._ALL_BROKERS_DOWN and txns and loop:
            loop.call_soon_threadsafe(txns.brokers_lost)

    async def _group_view(self) -> GroupView | None:
        """The coordinator's view of this member (`GroupWatch`), by an admin client made
        the first time it is needed."""
        s = self.s
        member_id = await self.fetcher.call(lambda c: c.memberid(), DESCRIBE_TIMEOUT_S)
        if not member_id:
            return None
        async with asyncio.timeout(DESCRIBE_TIMEOUT_S):
            if self._admin is None:
                admin = AIOKafkaAdminClient(
                    bootstrap_servers=s.bootstrap_servers,
                    client_id=f"derender-worker-{s.group_id}",
                    request_timeout_ms=int(DESCRIBE_TIMEOUT_S * 1000),
                    **security_kwargs(s),
                )
                try:
                    await admin.start()
                except BaseException:
                    await admin.close()
                    raise
                self._admin = admin
            return await describe_member(self._admin, s.group_id, member_id, s.input_topic)

    def _producer(self, transactional_id: str | None = None) -> Any:
        conf = {**producer_config(self.s, transactional_id), "logger": LIBRDKAFKA_LOG}
        return confluent_kafka.Producer(conf)

    async def connect(self) -> None:
        """Create the clients (the consumer joins the group only at `subscribe`)."""
        if self.s.guarantee != EXACTLY_ONCE:  # (exactly-once: a producer per partition)
            self.producers = await asyncio.gather(
                *(self.blocking.run(self._producer, timeout_s=10) for _ in range(self.s.lanes))
            )
        await self.fetcher.start()
        if self.s.guarantee == EXACTLY_ONCE:  # (warm before joining: `ConfluentTransactions`)
            self.transactions = self._transactions()
            await self.transactions.warm()

    def subscribe(self, on_revoked: Rebalance, on_assigned: Rebalance) -> list[Sink]:
        """Join the group; returns each lane's sink (exactly-once: the one Transactions)."""
        s = self.s
        if self.transactions is not None:
            sinks: list[Sink] = [self.transactions]
        else:
            sinks = [
                ConfluentSink(
                    p,
                    self.blocking,
                    s.output_topic,
                    s.dlq_topic,
                    s.control_topic,
                    self.on_misrouted,
                    timeout_s=s.step_timeout_s,
                )
                for p in self.producers
            ]
        self.fetcher.subscribe(s.input_topic, on_revoked, on_assigned)
        return sinks

    def _transactions(self) -> ConfluentTransactions:
        s = self.s
        return ConfluentTransactions(
            self._producer,
            self.fetcher,
            self.blocking,
            group_id=s.group_id,
            input_topic=s.input_topic,
            id_prefix=s.transactional_id_prefix,
            output_topic=s.output_topic,
            dlq_topic=s.dlq_topic,
            control_topic=s.control_topic,
            on_misrouted=self.on_misrouted,
            timeout_s=s.step_timeout_s,
            reset=s.reset or "earliest",
        )

    def lane_source(self, lane: int) -> ConfluentSource:
        """Lane `lane`'s partitions: those numbered `lane` modulo the lanes (fixed, so an
        incremental rebalance never moves a partition between lanes), not being revoked,
        and under exactly-once with their producer ready."""
        s, f, txns = self.s, self.fetcher, self.transactions

        def share() -> list[TopicPartition]:
            mine = [
                tp
                for tp in sorted(f.owned)
                if tp.partition % s.lanes == lane and tp not in f.revoking
            ]
            return mine if txns is None else [tp for tp in mine if txns.ready(tp)]

        return ConfluentSource(
            f,
            s.group_id,
            share,
            timeout_ms=s.poll_timeout_ms,
            max_records=s.max_batch,
            commit_timeout_s=s.step_timeout_s,
            carry=carried_names(s.pass_headers),
        )

    def assignment(self) -> set[TopicPartition]:
        return set(self.fetcher.owned)

    def lag(self) -> dict[int, int]:
        return self.fetcher.lag()

    async def close(self) -> None:
        """Leave the group, then close the producers (each on a pool thread)."""
        await self.watch.stop()
        if self._admin is not None:
            closing_admin, self._admin = self._admin, None
            with contextlib.suppress(Exception):
                await asyncio.wait_for(closing_admin.close(), 5)
        producers, self.producers = self.producers, []
        txns, self.transactions = self.transactions, None
        closing: list[Awaitable[Any]] = [self.fetcher.stop()]
        if txns is not None:
            closing.append(txns.close_all())
        closing += [
            self.blocking.run(_flush_close, p, self.blocking, 2.0, timeout_s=5) for p in producers
        ]
        results = await asyncio.gather(*closing, return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                log.debug("closing a confluent-kafka client: %s", r)


def _flush_close(producer: Any, blocking: Blocking, timeout_s: float) -> None:
    if not blocking.wait_idle(producer, timeout_s):  # (a send's flush still running)
        return
    producer.flush(timeout_s)
    producer.close()
