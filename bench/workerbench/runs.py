"""One run (peak, then latency points), the plan of runs and the systems measured."""

from __future__ import annotations

import math
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from aiokafka import AIOKafkaProducer
from tokenizers import Tokenizer

from tests.integration.harness import Output, verify
from tests.support.servers import create_topics, free_port
from worker.constants import H_REQUEST_ID, H_SEQ, STAGES
from workerbench.processes import (
    CpuMeter,
    Env,
    System,
    diff,
    fraction_within,
    histogram_quantile,
    jit_cpu_seconds,
    launch,
    scrape,
    settle,
    stop_process,
)
from workerbench.profile import (
    EXACTLY_ONCE,
    HALF,
    JIT_IDLE_CORES,
    PARTITIONS,
    PASSTHROUGH_COPIES,
    ROOT,
    TARGET_P99_S,
    WARMUP_MAX_RUNS,
    WARMUP_POINT_S,
    WARMUP_SHARE,
    WARMUP_TRANSACTIONS,
    Profile,
)
from workerbench.workload import Reader, Workload, make_workload, paced, prefill

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


async def warm_broker(
    env: Env,
    tok: Tokenizer,
    prof: Profile,
    transactions: bool,
    progress: Callable[[str], None],
) -> str:
    """Unmeasured passthrough runs until the broker's JIT is idle; returns what it took.

    The JVM's JIT compiles the broker's produce, fetch, group and offset paths on these
    runs rather than on the first system measured. Each run has paced points besides its
    peak: a backlog never leaves a fetch waiting for data, so a peak alone left the paths
    of paced load (long-polled fetches woken by a produce, small acks=all produces) to be
    compiled during the first latency point, the worker's at 10 % with 1-token records,
    the compiler threads taking most of a core. Runs repeat until the compiler
    threads use under `JIT_IDLE_CORES` over one, at most `WARMUP_MAX_RUNS` times."""
    began = time.perf_counter()
    work = make_workload(tok, prof.requests, prof.chunks, 1, "warm", 7, prof.request())

    def warm_rates(own: float) -> list[tuple[str, float, float]]:
        return [(f"warm {f:.0%}", f, f * own * WARMUP_SHARE) for f in prof.fractions]

    def warm_work(rate: float, i: int) -> Workload:
        per_request = max(2, math.ceil(rate * WARMUP_POINT_S / prof.requests) - 1)
        return make_workload(tok, prof.requests, per_request, 1, f"warm{i}", 8 + i, prof.request())

    jit_at_start = jit_cpu_seconds(env.broker_pid)
    for n in range(1, WARMUP_MAX_RUNS + 1):
        jit0, t0 = jit_cpu_seconds(env.broker_pid), time.perf_counter()
        await one_run(
            PASSTHROUGH,
            env,
            1,
            work,
            warm_rates,
            warm_work,
            prof,
            lambda msg: progress(f"warm-up (not measured): {msg}"),
        )
        jit = (jit_cpu_seconds(env.broker_pid) - jit0) / (time.perf_counter() - t0)
        progress(f"warm-up run {n}: the broker's JIT compiler threads used {jit:.2f} cores")
        if jit < JIT_IDLE_CORES:
            break
    if transactions:
        await warm_transactions(env.bootstrap)
    took = time.perf_counter() - began
    progress(f"broker warmed up in {took:.1f} s")
    used = jit_cpu_seconds(env.broker_pid) - jit_at_start
    return (
        f"warmed up by {n} unmeasured passthrough run(s) (a peak, then paced points at the "
        f"profile's fractions of half that peak) until its JIT compiler threads used under "
        f"{JIT_IDLE_CORES} cores over one (at most {WARMUP_MAX_RUNS}): {took:.0f} s, the JIT "
        f"{used:.1f} s of CPU in them ({jit:.2f} cores in the last)"
    )


async def run_all(
    env: Env,
    tok: Tokenizer,
    prof: Profile,
    systems: tuple[System, ...],
    progress: Callable[[str], None],
) -> list[Run]:
    runs: list[Run] = []
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
