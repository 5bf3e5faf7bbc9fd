"""`derender-worker run`: the worker's lifecycle around the one loop (`loop.run_batch`).

The Runner starts the Kafka clients (retrying while the cluster is unreachable), checks
the topics exist, subscribes, runs the lanes, handles rebalances, signals and backoff, and
stops cleanly. What a batch does, in which order, is `loop.run_batch`'s alone; the commit
protocol is `checkpoint.Checkpoint`'s; Kafka's plumbing is `adapters.kafka_source` and
`adapters.kafka_sink`.

Lanes (`--lanes`, default 2): the assigned partitions are dealt out to a few lanes, each
running the loop over its own partitions (`getmany(*partitions)`), all on one event loop.
One lane's core runs while another waits for acks or Redis, which a single batch at a time
leaves idle (about a quarter of a batch at peak). A request's records all sit in one
partition, so no request is in two lanes, and each lane's batch keeps the order, round
trips and guarantees of the loop: lanes are what several workers would be, in one process.

Failures (`failures.classify`): a transient one (Redis or the broker unreachable, or a
step that waited past `step_timeout_s`) backs off with jitter and retries the batch from
its first offsets; after `outage_limit_s` of failing the worker exits 1 so its supervisor
restarts it. A configuration error (a refused credential or ACL, a missing topic) exits 2
at once, with the reason.

Rebalances: no poll spans one, the batches in flight finish first (within half the
session timeout), and a batch that outlives that is fenced at its next step
(`assignment.Assignment` explains each).

Stopping (SIGTERM, SIGINT): no new poll; the batches in flight get `shutdown_timeout_s` to
finish and commit, then are abandoned (nothing of theirs is committed, so the next owner
redoes them); the clients close within `CLOSE_TIMEOUT_S`, the consumer leaving the group so
its partitions move at once; exit 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections import Counter
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from worker.adapters.kafka import (
    make_consumer,
    make_producer,
    make_transactional_producer,
    security_kwargs,
)
from worker.adapters.kafka_lag import GroupLag
from worker.adapters.kafka_sink import KafkaSink
from worker.adapters.kafka_source import KafkaSource, Rebalances, lag, names, seek_to_time
from worker.adapters.kafka_txn import Transactions
from worker.assignment import Assignment, partitions
from worker.checkpoint import Checkpoint, TransactionalCheckpoint
from worker.constants import DLQ
from worker.core.model import Registry
from worker.failures import HANDLED, ConfigError, Outage, OutageTooLong
from worker.loop import BatchReport, bounded, run_batch
from worker.metrics import Metrics
from worker.ports import Batch, Fenced, Sink, StateStore, StateWrite
from worker.settings import EXACTLY_ONCE, Settings

log = logging.getLogger("derender.worker")

# How often consumer lag is sampled (it needs one position lookup per partition).
LAG_EVERY_S = 1.0
# How often the group's committed lag is read from the brokers (KEDA polls every 30 s).
GROUP_LAG_EVERY_S = 10.0
# How often requests that went quiet past their TTL leave the active-requests gauge.
ACTIVE_PRUNE_EVERY_S = 10.0
# The longest closing each client may take at the end (after --shutdown-timeout-s): a
# broker or Redis that does not answer must not hold the exit past the pod's grace period.
CLOSE_TIMEOUT_S = 5.0
# The longest one sample of this worker's own lag may take (it waits on positions).
LAG_SAMPLE_TIMEOUT_S = 1.0


@dataclass
class Totals:
    records: Counter[str] = field(default_factory=Counter)
    outputs: int = 0
    tokens: int = 0
    batches: int = 0


class Runner:
    """One worker process: `settings` (Kafka, lanes, timeouts), `registry` (the models),
    `store` (request states; closed on stop), `metrics` (exported by the caller)."""

    def __init__(
        self,
        settings: Settings,
        registry: Registry,
        store: StateStore,
        metrics: Metrics | None = None,
    ) -> None:
        self.s = settings
        self.registry = registry
        self.store = store
        self.metrics = metrics or Metrics()
        self.totals = Totals()
        self.stopping = asyncio.Event()
        self.consumer: AIOKafkaConsumer | None = None
        self.producer: AIOKafkaProducer | None = None
        self.sink: Sink | None = None
        self.checkpoint: Checkpoint | None = None
        # Exactly-once: the transactional producers, one per owned input partition.
        self.transactions: Transactions | None = None
        # The group's lag as KEDA sees it (committed offsets against the end), sampled on
        # a task of its own: during an outage a sample can take its whole timeout.
        self.group_lag: GroupLag | None = None
        self._group_lag_task: asyncio.Task[None] | None = None
        self.outage = Outage(settings.outage_limit_s, self.stopping, self.metrics.outage_seconds)
        self._last_lag = 0.0
        self._active: dict[str, float] = {}
        self._pruned_at = time.monotonic()
        # The lease on the partitions, the lanes' polls and batches in flight.
        self.assignment = Assignment(on_drop=self.metrics.fenced.inc)

    def __repr__(self) -> str:
        t = self.totals
        return (
            f"<Runner {self.s.group_id} batches={t.batches} records={sum(t.records.values())} "
            f"outputs={t.outputs} tokens={t.tokens}>"
        )

    # -- lifecycle ------------------------------------------------------------------

    def request_stop(self) -> None:
        self.stopping.set()

    async def run(self) -> int:
        """Run until asked to stop (0), an outage outlasts the limit (1) or the worker
        cannot run as configured (2)."""
        started = time.monotonic()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            # Not available off the main thread (tests run workers in threads).
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self.request_stop)
        code = 0
        try:
            await self._start()
            await self._loop()
        except OutageTooLong as exc:
            log.error("giving up: %s", exc)
            code = 1
        except ConfigError as exc:
            log.error("cannot run: %s", exc)
            code = 2
        finally:
            await self._shutdown()
        t = self.totals
        counts = ", ".join(f"{k} {v}" for k, v in sorted(t.records.items())) or "none"
        log.info(
            "stopped after %d records (%s), %d outputs, %d tokens in %.1fs",
            sum(t.records.values()),
            counts,
            t.outputs,
            t.tokens,
            time.monotonic() - started,
        )
        return code

    async def _start(self) -> None:
        exactly_once = self.s.guarantee == EXACTLY_ONCE
        while True:  # the state store first (a Redis Cluster's topology), then Kafka
            try:
                await bounded(self.store.start(), self.s.step_timeout_s, "starting the store")
                break
            except HANDLED as exc:
                await self.outage.failed("starting the state store", exc)
            if self.stopping.is_set():
                return
        while True:
            try:
                await bounded(self._connect(exactly_once), self.s.step_timeout_s, "connecting")
                break
            except HANDLED as exc:
                await self._close_clients()
                await self.outage.failed("connecting to Kafka", exc)
            if self.stopping.is_set():
                return
        assert self.consumer is not None
        self.outage.recovered()
        if exactly_once:
            s = self.s
            self.transactions = Transactions(
                lambda tid: make_transactional_producer(s, tid),
                self.consumer,
                group_id=s.group_id,
                id_prefix=s.transactional_id_prefix,
                output_topic=s.output_topic,
                dlq_topic=s.dlq_topic,
            )
            self.sink = self.transactions
        else:
            assert self.producer is not None
            self.sink = KafkaSink(self.producer, self.s.output_topic, self.s.dlq_topic)
        self.consumer.subscribe(
            [self.s.input_topic], listener=Rebalances(self.on_revoked, self.on_assigned)
        )
        self.group_lag = GroupLag(
            self.s.bootstrap_servers,
            self.s.group_id,
            self.s.input_topic,
            reset="latest" if self.s.reset == "latest" else "earliest",
            **security_kwargs(self.s),
        )
        self._group_lag_task = asyncio.create_task(self._sample_group_lag())
        log.info("consuming %s as group %s", self.s.input_topic, self.s.group_id)

    async def _connect(self, exactly_once: bool) -> None:
        if not exactly_once:  # (exactly-once has a producer per partition instead)
            self.producer = make_producer(self.s)
            await self.producer.start()
        self.consumer = make_consumer(self.s)
        await self.consumer.start()
        await self._check_topics(self.consumer)

    async def _check_topics(self, consumer: AIOKafkaConsumer) -> None:
        """A missing topic is a configuration error: waiting will not create it."""
        existing = await consumer.topics()
        wanted = (self.s.input_topic, self.s.output_topic, self.s.dlq_topic)
        missing = [t for t in wanted if t not in existing]
        if missing:
            raise ConfigError(
                f"topic(s) {', '.join(missing)} do not exist on {self.s.bootstrap_servers} "
                "(create them, or point --input-topic/--output-topic/--dlq-topic elsewhere)"
            )

    async def _shutdown(self) -> None:
        """Close everything at once, each within CLOSE_TIMEOUT_S: the consumer leaves the
        group (unless static membership is on), the producers abort what is open."""
        self.metrics.ready = False
        if self._group_lag_task is not None:
            self._group_lag_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._group_lag_task
        closing = [self._close_clients(), _closed("the state store", self.store.close())]
        if self.group_lag is not None:
            closing.append(_closed("the group lag sampler", self.group_lag.close()))
        if self.transactions is not None:
            closing.append(_closed("the transactional producers", self.transactions.close_all()))
        await asyncio.gather(*closing)

    async def _close_clients(self) -> None:
        consumer, producer, self.consumer, self.producer = (
            self.consumer,
            self.producer,
            None,
            None,
        )
        await asyncio.gather(
            _closed("the consumer", consumer.stop()) if consumer is not None else _nothing(),
            _closed("the producer", producer.stop()) if producer is not None else _nothing(),
        )

    # -- the lanes ------------------------------------------------------------------

    async def _loop(self) -> None:
        if self.stopping.is_set():
            return
        assert self.consumer is not None
        sources = [self.lane_source(i) for i in range(self.s.lanes)]
        # One checkpoint for every lane: commits and rewinds go through the one consumer,
        # the lanes' partitions are disjoint, and a revocation drops an epoch wherever it was.
        if self.transactions is not None:
            self.checkpoint = TransactionalCheckpoint(
                sources[0], self.store, self.transactions, self.assignment.lease
            )
        else:
            self.checkpoint = Checkpoint(sources[0], self.store, self.assignment.lease)
        lanes = [asyncio.create_task(self._lane(i, src)) for i, src in enumerate(sources)]
        stop = asyncio.ensure_future(self.stopping.wait())
        pending: set[asyncio.Future[Any]] = set(lanes)
        try:
            # Until asked to stop, or a lane gives up (an outage past the limit).
            while pending and not stop.done():
                done, pending = await asyncio.wait(
                    pending | {stop}, return_when=asyncio.FIRST_COMPLETED
                )
                pending.discard(stop)
                if any(t.exception() is not None for t in done if t is not stop):
                    break
        finally:
            stop.cancel()
        self.request_stop()
        if pending:  # the batches in flight finish, within the shutdown timeout
            _, late = await asyncio.wait(pending, timeout=self.s.shutdown_timeout_s)
            if late:
                log.warning(
                    "%d batch(es) still running %.0fs after the stop: abandoned, nothing of "
                    "them committed (their partitions' next owner does them again)",
                    len(self.assignment.in_flight),
                    self.s.shutdown_timeout_s,
                )
                for t in late:
                    t.cancel()
                await asyncio.gather(*late, return_exceptions=True)
        failed = [t for t in lanes if not t.cancelled() and t.exception() is not None]
        if failed:
            raise failed[0].exception()  # type: ignore[misc]

    def lane_source(self, lane: int) -> KafkaSource:
        """The source of lane `lane`: its share of the assigned partitions."""
        consumer = self.consumer
        assert consumer is not None
        txns = self.transactions

        def share() -> list[TopicPartition]:
            """The lane's partitions: every `lanes`-th assigned one, in a fixed order
            (under exactly-once, those whose producer is ready)."""
            mine = sorted(consumer.assignment())[lane :: self.s.lanes]
            return mine if txns is None else [tp for tp in mine if txns.ready(tp)]

        return KafkaSource(
            consumer,
            self.s.group_id,
            share,
            timeout_ms=self.s.poll_timeout_ms,
            max_records=self.s.max_batch,
        )

    async def _lane(self, lane: int, source: KafkaSource) -> None:
        checkpoint = self.checkpoint
        assert checkpoint is not None
        while not self.stopping.is_set():
            self.metrics.last_turn = time.monotonic()
            if not self.assignment.settled:  # a rebalance is under way: no poll until done
                await self.assignment.wait_settled(self.s.poll_timeout_ms / 1000)
                continue
            batch = await self.assignment.poll(source.poll)
            if batch is not None:
                with self.assignment.processing():
                    await self._handle(batch, checkpoint)
            if lane == 0 and time.monotonic() - self._last_lag >= LAG_EVERY_S:
                await self._sample_lag()

    async def _handle(self, batch: Batch, checkpoint: Checkpoint) -> None:
        assert self.sink is not None
        try:
            report = await run_batch(
                batch,
                registry=self.registry,
                sink=self.sink,
                checkpoint=checkpoint,
                max_record_bytes=self.s.max_record_bytes,
                observer=self.metrics,
                step_timeout_s=self.s.step_timeout_s,
            )
        except Fenced as exc:
            self.metrics.fenced.inc()
            log.warning("%s: dropped (their next owner does it again)", exc)
            return
        except HANDLED as exc:
            if not self.assignment.lease.holds(batch):  # it failed: its partitions moved
                self.metrics.fenced.inc()
                log.warning(
                    "batch of %s failed after its partitions were revoked (%s: %s): dropped",
                    partitions(batch),
                    type(exc).__name__,
                    exc,
                )
                return
            # Rewind to the batch's first offsets: the next poll fetches it again.
            await checkpoint.abort(batch)
            await self.outage.failed("processing a batch", exc)
            return
        self.outage.recovered()
        self._account(report)

    def _account(self, report: BatchReport) -> None:
        result, m, t = report.result, self.metrics, self.totals
        t.batches += 1
        t.records.update(result.results)
        t.outputs += len(result.outputs)
        t.tokens += result.tokens
        m.batch_size.observe(report.records)
        m.tokens.inc(result.tokens)
        for k, v in result.results.items():
            m.records.labels(k).inc(v)
        # One increment per kind, not per output (a labelled increment costs ~1.8 µs).
        for kind, n in Counter(o.kind for o in result.outputs).items():
            m.outputs.labels(kind).inc(n)
        if result.dead_letters:
            m.outputs.labels(DLQ).inc(len(result.dead_letters))
        self._track_active(report.writes)

    def _track_active(self, writes: list[StateWrite]) -> None:
        now = time.monotonic()
        for w in writes:
            if w.done:
                self._active.pop(w.request_id, None)
            else:
                self._active[w.request_id] = now
        # Prune abandoned requests past their TTL; a scan of every open request, so not
        # on every batch (at peak that scan was 2 % of the worker's CPU).
        if now - self._pruned_at >= ACTIVE_PRUNE_EVERY_S:
            self._pruned_at = now
            cutoff = now - self.s.state_ttl_s
            self._active = {k: v for k, v in self._active.items() if v >= cutoff}
        self.metrics.active_requests.set(len(self._active))

    # -- failures -------------------------------------------------------------------

    # -- rebalances and lag ---------------------------------------------------------

    async def on_revoked(self, revoked: list[TopicPartition]) -> None:
        # The rejoin runs in the background, so lanes may be mid-batch: let those batches
        # produce, save and commit first (their partitions are still ours until the
        # rejoin), within half the session timeout so the rebalance is not held up. One
        # still running after that is fenced: the lease moves on, and its next step raises
        # `Fenced` (were it let on, it could begin a transaction on a producer that the
        # new assignment opened for another lane). Then drop the epochs: a partition
        # that comes back must be claimed anew (another owner may have held it meanwhile).
        # No lane polls until the new assignment is ready (`Assignment` says why).
        await self.assignment.revoke(self.s.session_timeout_ms / 2000)
        self.metrics.rebalances.inc()
        if self.checkpoint is not None:
            self.checkpoint.forget(revoked)
        if self.transactions is not None:
            await self.transactions.close(revoked)
        for tp in revoked:
            self.metrics.forget_lag(str(tp.partition))
        self.metrics.ready = False
        log.info("partitions revoked: %s", names(revoked))

    async def on_assigned(self, assigned: list[TopicPartition]) -> None:
        self.metrics.assigned.set(len(assigned))
        self.metrics.ready = True
        log.info("partitions assigned: %s", names(assigned))
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

    async def _sample_group_lag(self) -> None:
        assert self.group_lag is not None
        while not self.stopping.is_set():
            lags = await self.group_lag.sample()  # every partition: the group's, like KEDA
            if lags is not None:  # (None: not known now; the last values stay)
                self.metrics.set_group_lag(lags)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), GROUP_LAG_EVERY_S)

    async def _sample_lag(self) -> None:
        assert self.consumer is not None
        self._last_lag = time.monotonic()
        try:
            behind = await asyncio.wait_for(lag(self.consumer), LAG_SAMPLE_TIMEOUT_S)
        except TimeoutError:  # (positions not known yet, mid-rebalance: next time)
            return
        for partition, n in behind.items():
            self.metrics.lag.labels(str(partition)).set(n)
        self.metrics.lag_sum.set(sum(behind.values()))


async def _nothing() -> None:
    pass


async def _closed(what: str, closing: Awaitable[None]) -> None:
    """Await a close within CLOSE_TIMEOUT_S; a failure is logged, never raised (closing
    must not hide the real exit reason)."""
    try:
        await asyncio.wait_for(closing, CLOSE_TIMEOUT_S)
    except TimeoutError:
        log.warning("closing %s took longer than %.0fs: left behind", what, CLOSE_TIMEOUT_S)
    except Exception as exc:
        log.warning("closing %s failed: %s: %s", what, type(exc).__name__, exc)
