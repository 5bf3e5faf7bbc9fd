"""`derender-worker run`: the worker's lifecycle around the one loop (`loop.run_batch`).

The Runner starts the Kafka clients (retrying while the cluster is unreachable), checks
the topics exist, subscribes, runs the lanes, handles rebalances, signals and backoff, and
stops cleanly. What a batch does, in which order, is `loop.run_batch`'s alone; the commit
protocol is `checkpoint.Checkpoint`'s; Kafka's plumbing is `adapters.broker.kafka_source` and
`adapters.broker.kafka_sink`.

Lanes (`--lanes`, default 2): the assigned partitions are dealt out to a few lanes, each
running the loop over its own partitions (`getmany(*partitions)`), all on one event loop.
One lane's core runs while another waits for acks or Redis, which a single batch at a time
leaves idle (about a quarter of a batch at peak). A request's records all sit in one
partition, so no request is in two lanes, and each lane's batch keeps the order, round
trips and guarantees of the loop: lanes are what several workers would be, in one process.

Failures (`failures.classify`): a transient one (Redis or the broker unreachable, or a
step that waited past `step_timeout_s`) backs off with jitter and retries the batch from
its first offsets; after `outage_limit_s` of failing the worker exits 1 so its supervisor
restarts it. Kafka steps that time out twice in a row mean stalled clients: every Kafka
client is replaced in-process (`_rebuild`), the outage clock still running. A
configuration error (a refused credential or ACL, a missing topic) exits 2 at once.

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
from collections.abc import Awaitable
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from worker.adapters.broker.confluent.worker import ConfluentClients
from worker.adapters.broker.kafka import (
    check_access,
    check_bootstrapped,
    fetch_each_partition,
    make_consumer,
    make_producer,
    make_transactional_producer,
    security_kwargs,
    wait_longer_when_whole,
    within_limit,
)
from worker.adapters.broker.kafka_access import refusal
from worker.adapters.broker.kafka_lag import GroupLag
from worker.adapters.broker.kafka_sink import KafkaSink
from worker.adapters.broker.kafka_source import KafkaSource, Rebalances, lag
from worker.adapters.broker.kafka_txn import Transactions
from worker.batch.checkpoint import Checkpoint
from worker.batch.loop import run_batch
from worker.batch.steps import bounded
from worker.core.model import Registry
from worker.failures import HANDLED, ClientsStalled, ConfigError, Outage, OutageTooLong
from worker.observe.metrics import Metrics
from worker.observe.tracing import traced_run_batch
from worker.ports import Batch, Fenced, Sink, StateStore
from worker.run import stop_signal
from worker.run.accounts import Accounts
from worker.run.assignment import Assignment, partitions
from worker.run.health import Health
from worker.run.lanes import lane_source, make_checkpoint
from worker.run.rebalancing import Rebalancing
from worker.run.stoppable import unless_stopped
from worker.settings import CONFLUENT, EXACTLY_ONCE, Settings

log = logging.getLogger("derender.worker")

# How often consumer lag is sampled (it needs one position lookup per partition).
LAG_EVERY_S = 1.0
# How often the group's committed lag is read from the brokers (KEDA polls every 30 s).
GROUP_LAG_EVERY_S = 10.0
# The longest closing each client may take at the end (after --shutdown-timeout-s): a
# broker or Redis that does not answer must not hold the exit past the pod's grace period.
CLOSE_TIMEOUT_S = 5.0
# The longest one sample of this worker's own lag may take (it waits on positions).
LAG_SAMPLE_TIMEOUT_S = 1.0


class Runner(Rebalancing):
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
        self.accounts = Accounts(self.metrics, settings.state_ttl_s)
        self.totals = self.accounts.totals
        self.stopping = asyncio.Event()
        self.consumer: AIOKafkaConsumer | None = None
        # `--kafka-client confluent`: its clients instead of `consumer` and `producers`.
        self.confluent: ConfluentClients | None = None
        # A producer per lane: aiokafka keeps one produce request in flight per broker.
        self.producers: list[AIOKafkaProducer] = []
        self.sinks: list[Sink] = []  # per lane (exactly-once: the one `Transactions`)
        self.checkpoint: Checkpoint | None = None
        # Exactly-once: the transactional producers, one per owned input partition.
        self.transactions: Transactions | None = None
        # The group's lag as KEDA sees it (committed offsets against the end), sampled on
        # a task of its own: during an outage a sample can take its whole timeout.
        self.group_lag: GroupLag | None = None
        self._group_lag_task: asyncio.Task[None] | None = None
        self.outage = Outage(settings.outage_limit_s, self.stopping, self.metrics.outage_seconds)
        self._last_lag = 0.0
        self.health = Health(self.outage)
        # The lease on the partitions, the lanes' polls and batches in flight.
        self.assignment = Assignment(on_drop=self.metrics.fenced.inc)
        self.run_batch = run_batch  # (in spans, when OTEL_* asks: `run` sets it)

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
        if stop_signal.requested():  # (one that came while the loop was starting)
            self.request_stop()
        code = 0
        try:
            self.run_batch = traced_run_batch(self.s, run_batch)
            await self._start_store()
            fresh = True
            while not self.stopping.is_set():
                await self._start(fresh)
                try:
                    await self._loop()
                    break
                except ClientsStalled as exc:
                    await self._rebuild(exc)
                    fresh = False
        except OutageTooLong as exc:
            log.error("giving up: %s", exc)
            code = 1
        except (ConfigError, *HANDLED) as exc:  # (a right refused mid-run: named)
            if (refused := refusal(self.s, exc)) is None:
                raise
            log.error("cannot run: %s", refused)
            code = 2
        finally:
            await self._shutdown()
        log.info("stopped after %s in %.1fs", self.totals.summary(), time.monotonic() - started)
        return code

    async def _start_store(self) -> None:
        """The state store first (a Redis Cluster's topology), then Kafka."""
        while not self.stopping.is_set():  # (a stop cuts a start short: nothing to finish)
            try:
                start = bounded(self.store.start(), self.s.step_timeout_s, "starting the store")
                await unless_stopped(start, self.stopping)
                return
            except HANDLED as exc:
                await self.outage.failed("starting the state store", exc)

    async def _start(self, fresh: bool) -> None:
        """Connect the Kafka clients and subscribe. A rebuild (`fresh` False) does not
        end the outage that caused it: only a batch done does, so clients that stall
        again and again still meet the outage limit."""
        exactly_once = self.s.guarantee == EXACTLY_ONCE
        while not self.stopping.is_set():
            try:
                connect = bounded(self._connect(exactly_once), self.s.step_timeout_s, "connecting")
                await unless_stopped(connect, self.stopping)
                break
            except HANDLED as exc:
                await self._close_clients()
                await self.outage.failed("connecting to Kafka", exc)
        if self.stopping.is_set():
            return
        if fresh:
            self.outage.recovered()
        s, misrouted = self.s, self.metrics.misrouted.inc
        if self.confluent is not None:
            self.sinks = self.confluent.subscribe(self.on_revoked, self.on_assigned)
            self.transactions = self.confluent.transactions  # type: ignore[assignment]
        elif exactly_once:
            assert self.consumer is not None
            self.transactions = Transactions(
                lambda tid: make_transactional_producer(s, tid),
                self.consumer,
                group_id=s.group_id,
                id_prefix=s.transactional_id_prefix,
                output_topic=s.output_topic,
                dlq_topic=s.dlq_topic,
                control_topic=s.control_topic,
                on_misrouted=misrouted,
            )
            self.sinks = [self.transactions]
        else:
            self.sinks = [
                KafkaSink(p, s.output_topic, s.dlq_topic, s.control_topic, misrouted)
                for p in self.producers
            ]
        if self.consumer is not None:
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
        # (Every partition: the group's lag, as KEDA reads it.)
        self._group_lag_task = asyncio.create_task(
            self.group_lag.export(GROUP_LAG_EVERY_S, self.metrics.set_group_lag, self.stopping)
        )
        log.info("consuming %s as group %s", self.s.input_topic, self.s.group_id)

    async def _connect(self, exactly_once: bool) -> None:
        # (A refused login or right: exit 2, not an outage.)
        self.s = within_limit(self.s, await check_access(self.s))
        if self.s.kafka_client == CONFLUENT:
            m = self.metrics
            self.confluent = ConfluentClients(self.s, m.misrouted.inc, m.group_rejoins.inc)
            await self.confluent.connect()
            return
        if not exactly_once:  # (exactly-once has a producer per partition instead)
            self.producers = [make_producer(self.s) for _ in range(self.s.lanes)]
            await asyncio.gather(*(p.start() for p in self.producers))
        self.consumer = make_consumer(self.s)
        await self.consumer.start()
        check_bootstrapped(self.consumer)
        fetch_each_partition(self.consumer)  # (lanes: no lockstep on one fetch)
        wait_longer_when_whole(self.consumer, self.s.fetch_whole_wait_ms)

    async def _shutdown(self) -> None:
        """Close everything at once, each within CLOSE_TIMEOUT_S: the consumer leaves the
        group (unless static membership is on), the producers abort what is open."""
        self.metrics.ready = False
        await asyncio.gather(self._close_kafka(), _closed("the state store", self.store.close()))

    async def _rebuild(self, why: ClientsStalled) -> None:
        """Replace every Kafka client, keeping the store, the registry and the outage.
        The lanes have stopped; what they had not committed is done again by whoever
        gets the partitions (this worker's new consumer, most likely): the old consumer
        leaves the group if it still can, else its session times out; under exactly-once
        the new producers fence the old transactional ids."""
        log.warning("Kafka clients stalled (%s): replacing them", why)
        self.metrics.client_rebuilds.inc()
        self.metrics.ready = False
        await self._close_kafka()
        self.metrics.assigned.set(0)
        self.assignment.reset()
        self.health.stalls = 0

    async def _close_kafka(self) -> None:
        if self._group_lag_task is not None:
            self._group_lag_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._group_lag_task
        group_lag, txns = self.group_lag, self.transactions
        self._group_lag_task = self.group_lag = self.transactions = None
        self.sinks, self.checkpoint = [], None
        closing = [self._close_clients()]
        if group_lag is not None:
            closing.append(_closed("the group lag sampler", group_lag.close()))
        if txns is not None:
            closing.append(_closed("the transactional producers", txns.close_all()))
        await asyncio.gather(*closing)

    async def _close_clients(self) -> None:
        clients = [("the consumer", self.consumer), *(("a producer", p) for p in self.producers)]
        self.consumer, self.producers, confluent = None, [], self.confluent
        self.confluent = None
        closing = [_closed(k, c.stop()) for k, c in clients if c is not None]
        if confluent is not None:
            closing.append(_closed("the confluent-kafka clients", confluent.close()))
        await asyncio.gather(*closing)

    # -- the lanes ------------------------------------------------------------------

    async def _loop(self) -> None:
        if self.stopping.is_set():
            return
        sources = [self.lane_source(i) for i in range(self.s.lanes)]
        self.checkpoint = make_checkpoint(
            self.s, sources[0], self.store, self.transactions, self.assignment, self._behind
        )
        halt = asyncio.Event()  # the lanes stop polling: a stop, or the clients rebuilt
        lanes = [asyncio.create_task(self._lane(i, src, halt)) for i, src in enumerate(sources)]
        stop = asyncio.ensure_future(self.stopping.wait())
        pending: set[asyncio.Future[Any]] = set(lanes)
        stalled = False
        try:
            # Until asked to stop, or a lane gives up (an outage past the limit, or
            # clients that stalled: those are rebuilt, the worker goes on).
            while pending and not stop.done():
                done, pending = await asyncio.wait(
                    pending | {stop}, return_when=asyncio.FIRST_COMPLETED
                )
                pending.discard(stop)
                errors = [t.exception() for t in done if t is not stop]
                if any(e is not None for e in errors):
                    stalled = all(isinstance(e, ClientsStalled) for e in errors if e)
                    break
        finally:
            stop.cancel()
        halt.set()
        if not stalled:
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
        failed = [e for t in lanes if not t.cancelled() and (e := t.exception()) is not None]
        if failed:  # (an outage past its limit before stalled clients: it ends the run)
            raise min(failed, key=lambda e: isinstance(e, ClientsStalled))

    def lane_source(self, lane: int) -> KafkaSource:
        """The source of lane `lane`: its share of the assigned partitions."""
        if self.confluent is not None:
            return self.confluent.lane_source(lane)  # type: ignore[return-value]
        assert self.consumer is not None
        return lane_source(self.consumer, self.s, lane, self.transactions)

    async def _lane(self, lane: int, source: KafkaSource, halt: asyncio.Event) -> None:
        checkpoint, sink = self.checkpoint, self.sinks[lane % len(self.sinks)]
        assert checkpoint is not None
        while not halt.is_set() and not self.stopping.is_set():
            self.metrics.last_turn = time.monotonic()
            if not self.assignment.settled:  # a rebalance is under way: no poll until done
                await self.assignment.wait_settled(self.s.poll_timeout_ms / 1000)
                continue
            batch = await self.assignment.poll(source.poll)
            if batch is None and (failed := checkpoint.failed(source.share())) is not None:
                await self._failed(*failed, checkpoint)  # (a commit in the background)
            elif batch is not None:
                with self.assignment.processing():
                    await self._handle(batch, checkpoint, sink)
            if self.assignment.settled and (due := checkpoint.due(source.share())):
                with self.assignment.processing():  # (--commit-interval-ms: commits due)
                    await self._commit_due(due, checkpoint)
            if lane == 0 and time.monotonic() - self._last_lag >= LAG_EVERY_S:
                await self._sample_lag()
        # Its pending and running commits, or open transactions (bounded; failed: redone).
        try:
            await checkpoint.settle(source.share())
        except HANDLED as exc:
            log.warning("committing lane %d's progress at its end failed: %s", lane, exc)

    async def _handle(self, batch: Batch, checkpoint: Checkpoint, sink: Sink) -> None:
        try:
            report = await self.run_batch(
                batch,
                registry=self.registry,
                sink=sink,
                checkpoint=checkpoint,
                max_record_bytes=self.s.max_record_bytes,
                observer=self.metrics,
                step_timeout_s=self.s.step_timeout_s,
                control=self.s.control_topic is not None,
            )
        except Fenced as exc:
            self.metrics.fenced.inc()
            log.warning("%s: dropped (their next owner does it again)", exc)
            await checkpoint.abort(batch)  # (what stays here, after an incremental one)
            return
        except HANDLED as exc:
            await self._failed(batch, exc, checkpoint)
            return
        if checkpoint.behind is None:  # (else it is through when its commit is: health.py)
            self.health.through()
        self.accounts.batch(report)

    async def _commit_due(self, due: list[TopicPartition], checkpoint: Checkpoint) -> None:
        """Commit what waited --commit-interval-ms between batches: exactly-once's open
        transactions (a failed one gave its partitions up: rejoined, done again), or
        at-least-once's pending offsets (in the background)."""
        try:
            await checkpoint.commit_due(due)
        except HANDLED as exc:  # (a commit that never returns: its producer is in doubt)
            log.warning("committing between batches failed: %s", exc)
            checkpoint.forget(due)
            if self.transactions is not None:
                await self.transactions.drop(due)

    def _behind(self, commit: asyncio.Future[None]) -> None:
        """A batch's commit, running in the background: a revocation waits for it."""
        self.assignment.track(commit)
        commit.add_done_callback(self.health.committed)

    async def _failed(self, batch: Batch, exc: BaseException, checkpoint: Checkpoint) -> None:
        """A batch failed (an outage): rewound to be done again, and counted."""
        if not self.assignment.lease.holds(batch):  # it failed: its partitions moved
            self.metrics.fenced.inc()
            log.warning(
                "batch of %s failed after its partitions were revoked (%s: %s): dropped",
                partitions(batch),
                type(exc).__name__,
                exc,
            )
            await checkpoint.abort(batch)  # (what stays here, after an incremental one)
            return
        await checkpoint.abort(batch)  # (rewound: the next poll fetches it again)
        await self.health.failed(exc)

    # -- lag (the rebalance callbacks: `Rebalancing`) --------------------------------

    async def _sample_lag(self) -> None:
        self._last_lag = time.monotonic()
        try:
            if self.confluent is not None:
                behind = self.confluent.lag()
            else:
                assert self.consumer is not None
                behind = await asyncio.wait_for(lag(self.consumer), LAG_SAMPLE_TIMEOUT_S)
        except TimeoutError:  # (positions not known yet, mid-rebalance: next time)
            return
        for partition, n in behind.items():
            self.metrics.lag.labels(str(partition)).set(n)
        self.metrics.lag_sum.set(sum(behind.values()))


async def _closed(what: str, closing: Awaitable[None]) -> None:
    """Await a close within CLOSE_TIMEOUT_S; a failure is logged, never raised (closing
    must not hide the real exit reason)."""
    try:
        await asyncio.wait_for(closing, CLOSE_TIMEOUT_S)
    except TimeoutError:
        log.warning("closing %s took longer than %.0fs: left behind", what, CLOSE_TIMEOUT_S)
    except Exception as exc:
        log.warning("closing %s failed: %s: %s", what, type(exc).__name__, exc)
