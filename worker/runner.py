"""`derender-worker run`: the pipeline between Kafka and Redis.

Per `getmany` batch, in this order (CONTRACT.md §4, §6):
  1. decode every record (bad ones are dead-lettered, never crash the partition);
  2. load every state the batch needs: one Redis round trip;
  3. step the core over the records, in order;
  4. produce all outputs and dead letters, and await every ack;
  5. save every state: one Redis round trip, compare-and-set on seq and owner epoch;
  6. commit `offset + 1` per partition.
A crash anywhere before 6 redelivers the batch; the seq check then turns what was
already applied into no-ops and the rest produces the same bytes again.

Lanes (`--lanes`, default 2): the assigned partitions are dealt out to a few lanes, each
running the loop above over its own partitions (`getmany(*partitions)`), all on one event
loop. One lane's core runs while another waits for acks or Redis, which a single batch
at a time leaves idle (about a quarter of a batch at peak). A request's records all sit
in one partition, so no request is in two lanes, and each lane's batch keeps the order,
round trips and guarantees above: lanes are what several workers would be, in one process.

Redis or broker failures: back off with jitter and retry the batch from its first
offsets (aiokafka does not rewind by itself, #1046); after `outage_limit_s` of failing,
exit non-zero so the supervisor restarts the worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import CommitFailedError, IllegalStateError, KafkaError
from aiokafka.partitioner import DefaultPartitioner
from redis.exceptions import RedisError

from worker.adapters.kafka import make_consumer, make_producer
from worker.adapters.store import StateStore
from worker.core.model import Registry
from worker.metrics import Metrics
from worker.pipeline import (
    H_REQUEST_ID,
    InRecord,
    OutRecord,
    batch_request_ids,
    decode_batch,
    process_batch,
)
from worker.settings import Settings

log = logging.getLogger("derender.worker")

# Backoff between retries of a failed batch: doubles from the first value up to the
# cap, with full jitter so a fleet of workers does not retry in lockstep.
BACKOFF_FIRST_S = 0.1
BACKOFF_CAP_S = 5.0
# How often consumer lag is sampled (it needs one position lookup per partition).
LAG_EVERY_S = 1.0
# How often requests that went quiet past their TTL leave the active-requests gauge.
ACTIVE_PRUNE_EVERY_S = 10.0
# Output keys whose partition is remembered (per topic), about 100 bytes each.
PARTITION_CACHE_MAX = 100_000

RETRYABLE = (RedisError, KafkaError, ConnectionError, TimeoutError, OSError)


class OutageTooLong(Exception):
    """Redis or the broker stayed unavailable past the configured limit."""


@dataclass
class Totals:
    records: Counter[str] = field(default_factory=Counter)
    outputs: int = 0
    tokens: int = 0
    batches: int = 0


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        await self.runner.on_revoked(list(revoked))

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        await self.runner.on_assigned(list(assigned))


class Runner:
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
        # Owner epoch per partition, claimed on first use after each assignment.
        self._epochs: dict[TopicPartition, int] = {}
        self._outage_since: float | None = None
        self._failures = 0
        self._last_lag = 0.0
        self._active: dict[str, float] = {}
        self._pruned_at = time.monotonic()
        self._partitioner = DefaultPartitioner()
        # topic → (its partitions, key → partition): see _send_batches.
        self._partition_cache: dict[str, tuple[list[int], dict[bytes | None, int]]] = {}
        # One future per batch being processed (resolved when it is done), so that a
        # rebalance can let the batches in flight commit before the partitions move.
        self._in_flight: set[asyncio.Future[None]] = set()

    # -- lifecycle ------------------------------------------------------------------

    def request_stop(self) -> None:
        self.stopping.set()

    async def run(self) -> int:
        """Run until asked to stop (0) or an outage outlasts the limit (1)."""
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
        while True:
            try:
                self.producer = make_producer(self.s)
                await self.producer.start()
                self.consumer = make_consumer(self.s)
                await self.consumer.start()
                break
            except RETRYABLE as exc:
                await self._close_clients()
                await self._backoff("connecting to Kafka", exc)
            if self.stopping.is_set():
                return
        self._recovered()
        self.consumer.subscribe([self.s.input_topic], listener=_Listener(self))
        log.info("consuming %s as group %s", self.s.input_topic, self.s.group_id)

    async def _shutdown(self) -> None:
        self.metrics.ready = False
        await self._close_clients()
        try:
            await self.store.close()
        except Exception as exc:  # closing must not hide the real exit reason
            log.warning("closing the state store failed: %s", exc)

    async def _close_clients(self) -> None:
        # Consumer first: stop() leaves the group (unless static membership is on).
        if self.consumer is not None:
            try:
                await self.consumer.stop()
            except Exception as exc:
                log.warning("stopping the consumer failed: %s", exc)
            self.consumer = None
        if self.producer is not None:
            try:
                await self.producer.stop()
            except Exception as exc:
                log.warning("stopping the producer failed: %s", exc)
            self.producer = None

    # -- the loop -------------------------------------------------------------------

    async def _loop(self) -> None:
        lanes = [asyncio.create_task(self._lane(i)) for i in range(self.s.lanes)]
        done, pending = await asyncio.wait(lanes, return_when=asyncio.FIRST_EXCEPTION)
        failed = [t for t in done if t.exception() is not None]
        if failed:
            # One lane gave up (an outage past the limit): the others finish their batch.
            self.request_stop()
            await asyncio.gather(*pending, return_exceptions=True)
            raise failed[0].exception()  # type: ignore[misc]

    def _share(self, lane: int) -> list[TopicPartition]:
        """The partitions of a lane: every `lanes`-th assigned one, in a fixed order."""
        assert self.consumer is not None
        return sorted(self.consumer.assignment())[lane :: self.s.lanes]

    async def _lane(self, lane: int) -> None:
        assert self.consumer is not None
        poll_s = self.s.poll_timeout_ms / 1000
        while not self.stopping.is_set():
            self.metrics.last_turn = time.monotonic()
            mine = self._share(lane)
            if not mine:  # fewer partitions than lanes (or none yet): wait for more
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.stopping.wait(), timeout=poll_s)
                continue
            batch = await self.consumer.getmany(
                *mine, timeout_ms=self.s.poll_timeout_ms, max_records=self.s.max_batch
            )
            if batch:
                done = asyncio.get_running_loop().create_future()
                self._in_flight.add(done)
                try:
                    await self._handle(batch)
                finally:
                    self._in_flight.discard(done)
                    done.set_result(None)
            if lane == 0 and time.monotonic() - self._last_lag >= LAG_EVERY_S:
                await self._sample_lag()

    async def _handle(self, batch: dict[TopicPartition, list[Any]]) -> None:
        assert self.consumer is not None
        records: list[InRecord] = []
        partition_of: list[TopicPartition] = []
        first: dict[TopicPartition, int] = {}
        last: dict[TopicPartition, int] = {}
        for tp, msgs in batch.items():
            first[tp] = msgs[0].offset
            last[tp] = msgs[-1].offset
            for m in msgs:
                key = m.key.decode("utf-8", errors="replace") if m.key is not None else None
                records.append(
                    InRecord(
                        m.value if m.value is not None else b"",
                        key,
                        m.timestamp,
                        (tp.topic, tp.partition, m.offset),
                    )
                )
                partition_of.append(tp)
        try:
            await self._process(records, partition_of, first, last)
        except RETRYABLE as exc:
            # Rewind to the batch's first offsets: the next poll fetches it again.
            for tp, offset in first.items():
                if tp in self.consumer.assignment():
                    self.consumer.seek(tp, offset)
            await self._backoff("processing a batch", exc)
            return
        self._recovered()

    async def _process(
        self,
        records: list[InRecord],
        partition_of: list[TopicPartition],
        first: dict[TopicPartition, int],
        last: dict[TopicPartition, int],
    ) -> None:
        assert self.consumer is not None and self.producer is not None
        m = self.metrics
        stage = m.stage_seconds
        t0 = time.perf_counter()
        # 1) decode
        decoded = decode_batch(records, self.s.max_record_bytes)
        t1 = time.perf_counter()
        stage.labels("decode").observe(t1 - t0)
        # 2) load states: one round trip (plus an epoch claim right after a rebalance)
        for tp in last:
            if tp not in self._epochs:
                self._epochs[tp] = await self.store.claim_epoch(
                    f"{self.s.group_id}/{tp.topic}/{tp.partition}"
                )
                m.redis_round_trips.labels("claim_epoch").inc()
        stored = await self.store.load_many(batch_request_ids(decoded))
        m.redis_round_trips.labels("load").inc()
        t2 = time.perf_counter()
        stage.labels("redis_load").observe(t2 - t1)
        # 3) the core
        result = process_batch(decoded, stored, self.registry)
        t3 = time.perf_counter()
        stage.labels("core").observe(t3 - t2)
        # 4) produce and await every ack
        await self._produce(result.outputs, result.dead_letters)
        t4 = time.perf_counter()
        stage.labels("produce").observe(t4 - t3)
        now_ms = time.time() * 1000
        m.latency.observe_many(
            max(now_ms - rec.timestamp_ms, 0.0) / 1000
            for rec in records
            if rec.timestamp_ms is not None
        )
        # 5) save states: one round trip, compare-and-set
        rid_partition = {d.request_id: partition_of[i] for i, d in enumerate(decoded)}
        writes = list(result.writes.values())
        for w in writes:
            tp = rid_partition.get(w.request_id)
            w.epoch = self._epochs.get(tp, 0) if tp is not None else 0
        m.state_bytes.observe_many(len(w.blob) for w in writes)
        refused = await self.store.save_many(writes) if writes else []
        if writes:
            m.redis_round_trips.labels("save").inc()
        t5 = time.perf_counter()
        stage.labels("redis_save").observe(t5 - t4)
        # 6) commit what was saved; a refused write means another owner moved on
        offsets = {tp: off + 1 for tp, off in last.items()}
        if refused:
            m.conflicts.inc(len(refused))
            lost = {rid_partition[r] for r in refused if r in rid_partition}
            log.warning(
                "%d state writes refused (partitions %s moved on); not committing them",
                len(refused),
                sorted(f"{tp.topic}/{tp.partition}" for tp in lost),
            )
            for tp in lost:
                offsets.pop(tp, None)
                self._epochs.pop(tp, None)
                if tp in self.consumer.assignment():
                    self.consumer.seek(tp, first[tp])
        if offsets:
            try:
                await self.consumer.commit(offsets)
            except (CommitFailedError, IllegalStateError) as exc:
                # A rebalance took the partitions: the new owner redoes the batch.
                log.warning("commit refused after a rebalance: %s", exc)
        stage.labels("commit").observe(time.perf_counter() - t5)
        # bookkeeping
        t = self.totals
        t.batches += 1
        t.records.update(result.results)
        t.outputs += len(result.outputs)
        t.tokens += result.tokens
        m.batch_size.observe(len(records))
        m.tokens.inc(result.tokens)
        for k, v in result.results.items():
            m.records.labels(k).inc(v)
        # One increment per kind, not per output (a labelled increment costs ~1.8 µs).
        for kind, n in Counter(o.kind for o in result.outputs).items():
            m.outputs.labels(kind).inc(n)
        if result.dead_letters:
            m.outputs.labels("dlq").inc(len(result.dead_letters))
        self._track_active(writes)

    async def _produce(self, outputs: list[OutRecord], dead: list[OutRecord]) -> None:
        # Why batches and not one `await producer.send()` per output: each send is a
        # coroutine with a metadata check, the partitioner and an accumulator append,
        # ~12 µs of CPU per record, about a fifth of the worker's whole per-record cost.
        # Filling one record batch per partition and handing it over with `send_batch`
        # costs ~6 µs (bench/README.md). Partitions are the ones `send` would pick (the
        # default partitioner: murmur2 of the key), so every output of a request still
        # goes to one partition, in order.
        futures = await self._send_batches(
            self.s.output_topic, [(o.key.encode(), o.value, o.headers) for o in outputs]
        )
        futures += await self._send_batches(
            self.s.dlq_topic, [(d.key.encode() or None, d.value, d.headers) for d in dead]
        )
        if futures:
            await asyncio.gather(*futures)

    async def _send_batches(
        self, topic: str, records: list[tuple[bytes | None, bytes, list[tuple[str, bytes]]]]
    ) -> list[Any]:
        """Append records to one batch per partition (a full batch is sent and replaced);
        returns the delivery futures of every batch."""
        producer = self.producer
        assert producer is not None
        if not records:
            return []
        partitions = sorted(await producer.partitions_for(topic))
        # aiokafka's partitioner hashes in pure Python (~1 µs a key); a request's key
        # recurs in batch after batch, so its partition is kept while the topic's
        # partitions stay the same (the cache is dropped when it grows past its bound).
        cached = self._partition_cache.get(topic)
        if cached is None or cached[0] != partitions or len(cached[1]) > PARTITION_CACHE_MAX:
            cached = self._partition_cache[topic] = (partitions, {})
        partition_of = cached[1]
        batches: dict[int, Any] = {}
        futures = []
        for key, value, headers in records:
            partition = partition_of.get(key)
            if partition is None:
                partition = self._partitioner(key, partitions, partitions)
                partition_of[key] = partition
            batch = batches.get(partition)
            if batch is None:
                batch = batches[partition] = producer.create_batch()
            if batch.append(key=key, value=value, timestamp=None, headers=headers) is None:
                futures.append(await producer.send_batch(batch, topic, partition=partition))
                # A fresh batch always takes its first record, whatever its size.
                batch = batches[partition] = producer.create_batch()
                batch.append(key=key, value=value, timestamp=None, headers=headers)
        for partition, batch in batches.items():
            futures.append(await producer.send_batch(batch, topic, partition=partition))
        return futures

    def _track_active(self, writes: list[Any]) -> None:
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

    async def _backoff(self, what: str, exc: BaseException) -> None:
        now = time.monotonic()
        if self._outage_since is None:
            self._outage_since = now
            log.warning("%s failed, retrying: %s: %s", what, type(exc).__name__, exc)
        elapsed = now - self._outage_since
        if elapsed > self.s.outage_limit_s:
            raise OutageTooLong(
                f"{what} kept failing for {elapsed:.0f}s (limit {self.s.outage_limit_s:.0f}s); "
                f"last error: {type(exc).__name__}: {exc}"
            )
        self._failures += 1
        delay = random.uniform(0, min(BACKOFF_CAP_S, BACKOFF_FIRST_S * 2**self._failures))
        self.metrics.outage_seconds.inc(delay)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stopping.wait(), timeout=delay)

    def _recovered(self) -> None:
        if self._outage_since is not None:
            log.info("recovered after %.1fs", time.monotonic() - self._outage_since)
        self._outage_since = None
        self._failures = 0

    # -- rebalances and lag ---------------------------------------------------------

    async def on_revoked(self, revoked: list[TopicPartition]) -> None:
        # The rejoin runs in the background, so lanes may be mid-batch: let those batches
        # produce, save and commit first (their partitions are still ours until the
        # rejoin), within half the session timeout so the rebalance is not held up. One
        # still running after that is fenced like a zombie: its commit is refused and the
        # owner epoch turns its state writes away. Then drop the epochs: a partition
        # that comes back must be claimed anew (another owner may have held it meanwhile).
        if self._in_flight:
            await asyncio.wait(list(self._in_flight), timeout=self.s.session_timeout_ms / 2000)
        self.metrics.rebalances.inc()
        for tp in revoked:
            self._epochs.pop(tp, None)
            if self._has_lag(tp):
                self.metrics.lag.remove(str(tp.partition))
        self.metrics.ready = False
        log.info("partitions revoked: %s", _names(revoked))

    async def on_assigned(self, assigned: list[TopicPartition]) -> None:
        self.metrics.assigned.set(len(assigned))
        self.metrics.ready = True
        log.info("partitions assigned: %s", _names(assigned))
        if self.s.reset is not None and self.s.reset.isdigit() and self.consumer is not None:
            await self._seek_to_time(assigned, int(self.s.reset))

    async def _seek_to_time(self, assigned: list[TopicPartition], ts_ms: int) -> None:
        """`--reset <epoch ms>`: a partition the group never committed starts at that time."""
        assert self.consumer is not None
        fresh = [tp for tp in assigned if await self.consumer.committed(tp) is None]
        if not fresh:
            return
        found = await self.consumer.offsets_for_times({tp: ts_ms for tp in fresh})
        for tp, ot in found.items():
            if ot is not None:
                self.consumer.seek(tp, ot.offset)
            else:
                await self.consumer.seek_to_end(tp)

    def _has_lag(self, tp: TopicPartition) -> bool:
        return any(
            s.labels.get("partition") == str(tp.partition)
            for metric in self.metrics.lag.collect()
            for s in metric.samples
        )

    async def _sample_lag(self) -> None:
        assert self.consumer is not None
        self._last_lag = time.monotonic()
        total = 0
        for tp in self.consumer.assignment():
            hw = self.consumer.highwater(tp)
            if hw is None:
                continue
            try:
                pos = await self.consumer.position(tp)
            except (KafkaError, IllegalStateError):
                continue
            lag = max(hw - pos, 0)
            total += lag
            self.metrics.lag.labels(str(tp.partition)).set(lag)
        self.metrics.lag_sum.set(total)


def _names(tps: list[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}/{tp.partition}" for tp in sorted(tps)) or "none"


__all__ = ["H_REQUEST_ID", "OutageTooLong", "Runner"]
