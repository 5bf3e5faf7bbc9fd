"""Steady load on the input topic from its own thread, and the output topic read back."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from worker.constants import H_PART, H_REQUEST_ID, H_SEQ

TICK_S = 0.01


class SteadyLoad:
    """Publishes `records` (request id, value) at `rate` a second until stopped or out of
    records; notes each request's input partition."""

    def __init__(self, bootstrap: str, topic: str, records: list[tuple[str, bytes]], rate: float):
        self.bootstrap, self.topic, self.records, self.rate = bootstrap, topic, records, rate
        self.partition_of: dict[str, int] = {}
        # input partition → (request id, seq, CreateTime s) of each record sent there
        self.inputs: dict[int, list[tuple[str, int, float]]] = {}
        self._seq: dict[str, int] = {}  # the next seq per request (each is sent in order)
        self.sent = 0
        self.error: BaseException | None = None
        self._burst: list[tuple[str, bytes]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def burst(self, records: list[tuple[str, bytes]]) -> None:
        """Publish `records` at once, besides the steady rate (a backlog, as a scale-out
        on lag meets)."""
        self._burst.extend(records)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:
            self.error = exc

    async def _main(self) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=2)
        await producer.start()
        try:
            pending = []
            start = time.perf_counter()
            i = 0
            while i < len(self.records) and not self._stop.is_set():
                due = min(len(self.records), int((time.perf_counter() - start) * self.rate) + 1)
                while i < due:
                    rid, value = self.records[i]
                    fut = await producer.send(self.topic, value, key=rid.encode())
                    pending.append((rid, self._next_seq(rid), fut))
                    i += 1
                while self._burst:
                    rid, value = self._burst.pop(0)
                    fut = await producer.send(self.topic, value, key=rid.encode())
                    pending.append((rid, self._next_seq(rid), fut))
                    if len(pending) > 2000:
                        await self._note(pending)
                        pending = []
                if len(pending) > 500:
                    await self._note(pending)
                    pending = []
                await asyncio.sleep(TICK_S)
            await self._note(pending)
            self.sent = i
        finally:
            await producer.stop()

    def _next_seq(self, rid: str) -> int:
        seq = self._seq.get(rid, 0)
        self._seq[rid] = seq + 1
        return seq

    async def _note(self, pending: list) -> None:  # type: ignore[type-arg]
        for rid, seq, fut in pending:
            md = await fut
            self.partition_of[rid] = md.partition
            self.inputs.setdefault(md.partition, []).append((rid, seq, md.timestamp / 1000))


@dataclass
class Output:
    # input partition → sorted CreateTimes (s) of its outputs
    stamps: dict[int, list[float]] = field(default_factory=dict)
    keys: list[tuple[str, str, str]] = field(default_factory=list)
    # input partition → (CreateTime s, request id, seq) of each output with a numeric seq
    outputs: dict[int, list[tuple[float, str, int]]] = field(default_factory=dict)
    # key → (input partition, CreateTime, output partition, offset) of each copy
    where: dict[tuple[str, str, str], list[tuple[int, float, int, int]]] = field(
        default_factory=dict
    )

    def repeated(self) -> dict[str, list[tuple[int, float, int, int]]]:
        """The outputs read more than once, each with where its copies were."""
        return {"/".join(k): v for k, v in self.where.items() if len(v) > 1}


async def read_outputs(bootstrap: str, topic: str, partition_of: dict[str, int]) -> Output:
    """Everything committed on `topic` (read_committed), up to its end offsets now."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        max_partition_fetch_bytes=4 * 1024 * 1024,
    )
    await consumer.start()
    out = Output()
    try:
        parts = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or []]
        if not parts:
            await consumer._client.force_metadata_update()
            parts = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or []]
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        ends = await consumer.end_offsets(parts)
        left = {tp for tp in parts if ends[tp] > 0}
        while left:
            got = await consumer.getmany(timeout_ms=500, max_records=10_000)
            for msgs in got.values():
                for m in msgs:
                    h = {k: v.decode() for k, v in m.headers}
                    rid = h.get(H_REQUEST_ID, "")
                    key = (rid, h.get(H_SEQ, ""), h.get(H_PART, ""))
                    out.keys.append(key)
                    p = partition_of.get(rid)
                    out.where.setdefault(key, []).append(
                        (-1 if p is None else p, m.timestamp / 1000, m.partition, m.offset)
                    )
                    if p is not None:
                        out.stamps.setdefault(p, []).append(m.timestamp / 1000)
                        if key[1].isdigit():
                            at = m.timestamp / 1000
                            out.outputs.setdefault(p, []).append((at, rid, int(key[1])))
            for tp in list(left):
                if await consumer.position(tp) >= ends[tp]:
                    left.discard(tp)
    finally:
        await consumer.stop()
    for s in out.stamps.values():
        s.sort()
    return out
