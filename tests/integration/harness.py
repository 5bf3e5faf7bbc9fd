"""Drive real workers against the real broker and Redis, and prove nothing was lost.

- `WorkerProcess`: `derender-worker run` as a child process (kill -9, SIGSTOP, SIGTERM).
- `Generation`: a request's token ids, cut into records, with the text it must give.
- `publish` / `read_all`: aiokafka producer and reader of the output topic.
- `verify`: the history checker. After dropping repeated (request_id, seq, part)
  triples (and checking every repeat has identical bytes), every request's content is
  exactly its one-shot decode, `[DONE]` arrives once and last, and first occurrences
  are in (seq, part) order.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from tokenizers import Tokenizer

ROOT = Path(__file__).resolve().parents[2]

# Fast group membership for tests: a killed or frozen worker leaves the group after 3 s
# (tansu's joins also wait about half a session timeout). Apache Kafka's default floor is
# 6 s; the test broker lowers it (kafka_server.ApacheKafka.properties).
TEST_SESSION_TIMEOUT_MS = 3000
TEST_HEARTBEAT_MS = 500


@dataclass
class WorkerProcess:
    bootstrap: str
    redis_url: str
    input_topic: str
    output_topic: str
    dlq_topic: str
    group_id: str
    state_prefix: str
    metrics_port: int = 0
    extra: list[str] = field(default_factory=list)
    log_path: Path | None = None
    proc: subprocess.Popen[bytes] | None = None
    # The module run with `python -m`: the worker's CLI, or a wrapper around it with fault
    # points (tests/chaos/launch.py), configured by extra environment variables.
    module: str = "worker"
    env: dict[str, str] = field(default_factory=dict)

    def argv(self) -> list[str]:
        return [
            sys.executable, "-m", self.module, "run",
            "--bootstrap-servers", self.bootstrap,
            "--redis-url", self.redis_url,
            "--input-topic", self.input_topic,
            "--output-topic", self.output_topic,
            "--dlq-topic", self.dlq_topic,
            "--group-id", self.group_id,
            "--state-prefix", self.state_prefix,
            "--metrics-port", str(self.metrics_port),
            "--session-timeout-ms", str(TEST_SESSION_TIMEOUT_MS),
            "--heartbeat-interval-ms", str(TEST_HEARTBEAT_MS),
            "--max-batch", "64",
            *self.extra,
        ]  # fmt: skip

    def start(self) -> WorkerProcess:
        env = {**os.environ, **self.env}
        if self.log_path is None:
            self.proc = subprocess.Popen(
                self.argv(), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
            )
            return self
        with open(self.log_path, "ab") as log:  # the child keeps its own copy
            self.proc = subprocess.Popen(
                self.argv(), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log, env=env
            )
        return self

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def kill9(self) -> None:
        self.signal(signal.SIGKILL)
        assert self.proc is not None
        self.proc.wait(timeout=10)

    def stop(self, timeout_s: float = 30) -> int:
        """SIGTERM, and the exit code; a worker still running after `timeout_s` is
        SIGKILLed (so it cannot outlive its test and disturb the next) and fails."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise AssertionError(
                f"the worker did not stop within {timeout_s:.0f}s of SIGTERM (killed); "
                f"its log ends:\n{self.log_tail()}"
            ) from None

    def wait_ready(self, timeout_s: float = 60) -> WorkerProcess:
        """Until the worker's /readyz answers 200 (it has joined its group and holds
        partitions); needs a `metrics_port`. A record published before then waits for the
        group's join, which a latency measurement must not count."""
        assert self.metrics_port, "wait_ready needs the worker's metrics_port"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.alive:
                raise AssertionError(f"the worker exited while starting:\n{self.log_tail()}")
            try:
                if httpx.get(f"http://127.0.0.1:{self.metrics_port}/readyz", timeout=2).is_success:
                    return self
            except httpx.HTTPError:
                pass  # (not listening yet)
            time.sleep(0.05)
        raise AssertionError(
            f"the worker was not ready within {timeout_s:.0f}s:\n{self.log_tail()}"
        )

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def log_text(self) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")


@dataclass
class Generation:
    request_id: str
    ids: list[int]
    expected: str
    records: list[dict[str, Any]]


def make_generations(
    tok: Tokenizer, count: int, seed: int, prefix: str = "req", max_chunk: int = 6
) -> list[Generation]:
    """Requests with random texts cut into random chunk sizes, each closed by `end`."""
    rng = random.Random(seed)
    words = [
        "hello", "world", "日本語", "😀", "naïve", "déjà", "code()", "\n", "  ", "数据",
        "stream", "🎉🎉", "Ωμέγα", "ok.", "tokens", "—",
    ]  # fmt: skip
    gens = []
    for n in range(count):
        # Ends in a word: the built-in model streams all of it as reasoning, whose trailing
        # whitespace is stripped (as vLLM does), so whitespace there would not add up.
        text = " ".join(rng.choice(words) for _ in range(rng.randint(3, 25))) + " ok."
        ids = list(tok.encode(text, add_special_tokens=False).ids)
        rid = f"{prefix}-{seed}-{n}"
        recs: list[dict[str, Any]] = []
        i = 0
        while i < len(ids):
            size = rng.randint(1, max_chunk)
            part = ids[i : i + size]
            i += size
            choice = {
                "index": 0,
                "token_ids": part,
                "finish_reason": "stop" if i >= len(ids) else None,
            }
            recs.append(
                {"request_id": rid, "seq": len(recs), "generate_chunk": {"choices": [choice]}}
            )
        recs.append({"request_id": rid, "seq": len(recs), "type": "end"})
        gens.append(Generation(rid, ids, tok.decode(ids), recs))
    return gens


def interleave(gens: list[Generation], seed: int) -> list[dict[str, Any]]:
    """All records of all requests in a random interleaving, each request kept in order."""
    rng = random.Random(seed)
    queues = [list(g.records) for g in gens]
    out = []
    while queues:
        q = rng.choice(queues)
        out.append(q.pop(0))
        if not q:
            queues.remove(q)
    return out


async def publish(
    bootstrap: str,
    topic: str,
    records: list[dict[str, Any] | tuple[str | None, bytes]],
    timestamp_ms: int | None = None,
) -> dict[int, int]:
    """Publish records in order, keyed by request_id (or the given key, which may be None);
    `timestamp_ms` fixes every record's CreateTime (so `created` does not depend on the clock).

    Returns the offset after the last record written, per partition written to, from the
    producer's acks (tansu's ListOffsets answered 1 for partitions holding many records)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks="all")
    await producer.start()
    try:
        futures = []
        for r in records:
            if isinstance(r, tuple):
                key, value = r
            else:
                key, value = r["request_id"], json.dumps(r).encode()
            raw_key = key.encode() if key is not None else None
            futures.append(
                await producer.send(topic, value, key=raw_key, timestamp_ms=timestamp_ms)
            )
        acks = await asyncio.gather(*futures)
    finally:
        await producer.stop()
    ends: dict[int, int] = {}
    for ack in acks:
        ends[ack.partition] = max(ends.get(ack.partition, 0), ack.offset + 1)
    return ends


@dataclass
class Output:
    key: str
    headers: dict[str, str]
    value: bytes
    partition: int
    offset: int


async def read_all(
    bootstrap: str,
    topic: str,
    until: Any,
    timeout_s: float = 90.0,
    *,
    isolation_level: str = "read_uncommitted",
) -> list[Output]:
    """Read the topic from the start until `until(outputs)` is true (or time out)."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        group_id=None,
        isolation_level=isolation_level,
    )
    await consumer.start()
    outputs: list[Output] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=500)
            for tp, msgs in batch.items():
                for m in msgs:
                    outputs.append(
                        Output(
                            m.key.decode() if m.key else "",
                            {k: v.decode() for k, v in m.headers},
                            m.value,
                            tp.partition,
                            m.offset,
                        )
                    )
            if until(outputs):
                break
    finally:
        await consumer.stop()
    return outputs


async def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition's high watermark now: what is written from here on lies at or past it."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None)
    await consumer.start()
    try:
        async with asyncio.timeout(30):  # (without a group: every partition, once known)
            while not consumer.assignment():
                await asyncio.sleep(0.05)
        ends = await consumer.end_offsets(list(consumer.assignment()))
    finally:
        await consumer.stop()
    return {tp.partition: off for tp, off in ends.items()}


def done_count(outputs: list[Output]) -> int:
    return len({o.key for o in outputs if o.value == b"[DONE]"})


@dataclass
class Verdict:
    requests: int
    outputs: int
    unique: int
    repeats: int


# The delta fields that carry a choice's text. docs/integrate/contract.md, "Guarantees": the
# concatenated content plus reasoning equals the one-shot decode (the default DeepSeek V4
# entry has a reasoning parser with thinking on by default, so a plain generation streams as
# `reasoning`).
TEXT_FIELDS = ("reasoning", "reasoning_content", "content")


def choice_text(choice: dict[str, Any], fields: tuple[str, ...] = TEXT_FIELDS) -> str:
    """The text one output choice carries: a chunk's delta fields, or a completion's text."""
    if "delta" not in choice:
        return str(choice.get("text") or "")
    return "".join(choice["delta"].get(f) or "" for f in fields)


def verify(
    outputs: list[Output], gens: list[Generation], fields: tuple[str, ...] = TEXT_FIELDS
) -> Verdict:
    seen: dict[tuple[str, str, str], bytes] = {}
    per_request: dict[str, list[tuple[int, int, Output]]] = defaultdict(list)
    repeats = 0
    for o in outputs:
        triple = (
            o.headers["derender-request-id"],
            o.headers["derender-seq"],
            o.headers["derender-part"],
        )
        if triple in seen:
            assert seen[triple] == o.value, f"repeated {triple} with different bytes"
            repeats += 1
            continue
        seen[triple] = o.value
        per_request[triple[0]].append((int(triple[1]), int(triple[2]), o))
    problems = []
    for g in gens:
        items = per_request.get(g.request_id, [])
        order = [(s, p) for s, p, _ in items]
        if order != sorted(order):
            problems.append(f"{g.request_id}: outputs out of order {order}")
        text = ""
        dones = 0
        for _, _, o in items:
            if o.value == b"[DONE]":
                dones += 1
                continue
            v = json.loads(o.value)
            if "error" in v:
                problems.append(f"{g.request_id}: error {v['error']}")
                continue
            for c in v["choices"]:
                text += choice_text(c, fields)
        if dones != 1 or (items and items[-1][2].value != b"[DONE]"):
            problems.append(f"{g.request_id}: [DONE] {dones} times / not last")
        if text != g.expected:
            problems.append(f"{g.request_id}: text {text!r} != {g.expected!r}")
    assert not problems, "\n".join(problems[:20]) + f"\n({len(problems)} problems)"
    return Verdict(len(gens), len(outputs), len(seen), repeats)
