"""The worker and the passthrough on a pre-filled input, each alone.

    .venv/bin/python bench/prefilled_bench.py                      # ~4 min, writes bench/results/
    .venv/bin/python bench/prefilled_bench.py --against /tmp/before  # + another checkout's worker
    .venv/bin/python bench/prefilled_bench.py --profile            # + py-spy on each worker

How a user tries a stream processor: fill its input topic, start it alone, time it. The
input (`--requests` interleaved DeepSeek V4 chat requests with `--tools` tools each, one
token id per record by default) is published before the system starts, so no publisher or
reader of this bench runs while it is measured: the two cores hold the system, the broker
and Redis only. The window runs from the group's first committed offset to the last (the
bench polls the group's offsets, ~50 per second), so the start-up (imports, tokenizer,
joining) is not in it; throughput is the records committed in the window over its length,
CPU per record the system's process CPU in the window over those records.

Systems take turns, `--rounds` times: the worker (`python -m worker run`, its defaults),
the worker of `--against DIR` (another checkout, the same venv, the same input), and the
passthrough (worker_bench.py `_passthrough`: the worker's clients and batching, nothing in
between). Each run gets fresh topics and a fresh group. The worker's `derender_stage_seconds`
is scraped at both ends of the window: the stage split per record. After the window, the
worker's outputs are read back and checked (each request's text, `[DONE]` once and last).
`--profile`: py-spy samples each worker during its window (`--rate` Hz, CPU only); the
report lists the functions holding most of the samples, inclusive and self.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import datetime
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as `python bench/prefilled_bench.py`: import tests/, worker/
    sys.path.insert(0, str(ROOT))

from aiokafka.admin import AIOKafkaAdminClient  # noqa: E402
from common import code_version, cpu_model, py_spy  # noqa: E402
from worker_bench import start_broker  # noqa: E402
from workerbench.processes import (  # noqa: E402
    Env,
    System,
    cpu_seconds,
    diff,
    launch,
    scrape,
    stop_process,
)
from workerbench.profile import EXACTLY_ONCE, PARTITIONS, QUICK, RESULTS_DIR  # noqa: E402
from workerbench.report import binary_version, other_load, versions  # noqa: E402
from workerbench.runs import stage_means, warm_transactions  # noqa: E402
from workerbench.workload import Reader, load_deepseek, make_workload, prefill  # noqa: E402

from tests.integration.harness import Output, verify  # noqa: E402
from tests.support.servers import RedisServer, create_topics, free_port  # noqa: E402
from worker.adapters.local.embedded import redis_server_binary  # noqa: E402
from worker.constants import STAGES  # noqa: E402

WORKER = System("worker")
PASSTHROUGH = System("passthrough")
POLL_S = 0.02


@dataclass
class Result:
    label: str
    records: int  # committed inside the window
    seconds: float
    cpu_s: float  # the system's process CPU in the window
    broker_s: float
    redis_s: float
    stages_us: dict[str, float] = field(default_factory=dict)  # per record
    batch: float = 0.0
    verified: str = ""
    profile: Path | None = None

    @property
    def rate(self) -> float:
        return self.records / self.seconds

    @property
    def us_per_record(self) -> float:
        return self.cpu_s / self.records * 1e6


async def _committed(admin: AIOKafkaAdminClient, group: str) -> int:
    try:
        offsets = await admin.list_consumer_group_offsets(group)
    except Exception:
        return 0
    return sum(max(o.offset, 0) for o in offsets.values())


def _group_of(proc: subprocess.Popen[bytes]) -> str:
    args = proc.args
    assert isinstance(args, list)
    return str(args[args.index("--group-id") + 1])


async def one(
    label: str,
    system: System,
    env: Env,
    records: list[tuple[str, int, bytes]],
    gens: list,  # type: ignore[type-arg]
    tree: Path | None,
    profile_rate: int,
    keep: Path | None = None,
    native: bool = False,
) -> Result:
    name = f"pre-{uuid.uuid4().hex[:6]}"
    topics = {"input": f"in-{name}", "output": f"out-{name}", "dlq": f"dlq-{name}"}
    await create_topics(env.bootstrap, [topics["input"], topics["output"]], PARTITIONS)
    await create_topics(env.bootstrap, [topics["dlq"]], 1)
    await prefill(env.bootstrap, topics["input"], records)
    is_worker = system.kind == "worker"
    port = free_port()
    proc, log = launch(system, env, topics, port, cwd=tree)
    group = _group_of(proc)
    admin = AIOKafkaAdminClient(bootstrap_servers=env.bootstrap)
    await admin.start()
    spy: subprocess.Popen[bytes] | None = None
    out = (keep or env.workdir) / f"{name}.raw"
    total = len(records)
    try:
        deadline = time.monotonic() + 180
        while (c0 := await _committed(admin, group)) == 0:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{label}: nothing committed; see {log}")
            await asyncio.sleep(POLL_S)
        t0 = time.monotonic()
        cpu0 = (cpu_seconds(proc.pid), cpu_seconds(env.broker_pid), cpu_seconds(env.redis_pid))
        m0 = scrape(port) if is_worker else {}
        if profile_rate and is_worker:
            spy = subprocess.Popen(
                [
                    str(py_spy()),
                    "record",
                    "--pid",
                    str(proc.pid),
                    "--rate",
                    str(profile_rate),
                    "--format",
                    "raw",
                    "--output",
                    str(out),
                    *(["--native"] if native else ["--nonblocking"]),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        while (c1 := await _committed(admin, group)) < total:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{label}: {c1} of {total} committed; see {log}")
            await asyncio.sleep(POLL_S)
        t1 = time.monotonic()
        cpu1 = (cpu_seconds(proc.pid), cpu_seconds(env.broker_pid), cpu_seconds(env.redis_pid))
        m1 = scrape(port) if is_worker else {}
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(30)
    finally:
        code = stop_process(proc)
        await admin.close()
    if code != 0:
        raise RuntimeError(f"{label} exited with {code}; see {log}")
    res = Result(
        label,
        total - c0,
        t1 - t0,
        cpu1[0] - cpu0[0],
        cpu1[1] - cpu0[1],
        cpu1[2] - cpu0[2],
        profile=out if spy is not None else None,
    )
    if is_worker:
        res.batch, stages = stage_means(diff(m1, m0))
        per_batch = res.batch / 1e3  # records per batch → µs per record below
        res.stages_us = {k: v / per_batch for k, v in stages.items()} if per_batch else {}
        res.verified = await _verify(env, topics["output"], gens, system.isolation_level)
    return res


async def _verify(env: Env, topic: str, gens: list, isolation: str) -> str:  # type: ignore[type-arg]
    """Read the outputs back (after the window) and check every request's text."""
    reader = Reader(env.bootstrap, topic, isolation_level=isolation)
    await reader.start()
    try:
        await reader.wait(lambda r: r.dones >= len(gens), 120)
    finally:
        await reader.stop()
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
    return f"{v.requests} requests exact, {v.repeats} repeats"


def summarise_profile(raw: Path, us_per_record: float, top: int = 25) -> list[str]:
    """py-spy's raw (collapsed) stacks → where the CPU went by stage of the loop (as µs per
    record: the share × the run's CPU per record), and the functions with most samples."""
    incl: collections.Counter[str] = collections.Counter()
    self_: collections.Counter[str] = collections.Counter()
    areas: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        count = int(n)
        frames = [_short(f) for f in stack.split(";")]
        total += count
        for f in set(frames):
            incl[f] += count
        self_[frames[-1]] += count
        areas[area_of(frames)] += count
    if not total:
        return ["(no samples)"]
    rows = ["| area (innermost stage frame) | share | µs CPU / record |", "|---|--:|--:|"]
    rows += [
        f"| {a} | {n / total:.1%} | {n / total * us_per_record:.1f} |"
        for a, n in areas.most_common()
    ]
    rows += ["", "| function | inclusive | self |", "|---|--:|--:|"]
    for f, n in incl.most_common(top):
        rows.append(f"| `{f}` | {n / total:.1%} | {self_[f] / total:.1%} |")
    rows += ["", "| self, top | share |", "|---|--:|"]
    rows += [f"| `{f}` | {n / total:.1%} |" for f, n in self_.most_common(top)]
    return [f"{total} samples", "", *rows]


# Where a sample's CPU went, by the innermost frame that names a stage of the loop (or a
# background task of a client): (area, function names as `_short` spells their start).
AREAS = (
    ("decode", ("decode_batch ",)),
    ("core", ("process_batch ",)),
    ("load", ("Checkpoint.load ", "Checkpoint.claim ")),
    ("produce", ("KafkaSink.send ",)),
    ("save", ("Checkpoint.save ",)),
    ("commit", ("Checkpoint.commit ",)),
    ("poll", ("KafkaSource.poll ",)),
    ("metrics", ("Metrics.", "Observer", "(observe/")),
    ("aiokafka tasks", ("(aiokafka/",)),
    ("redis-py", ("(redis/",)),
    ("runner", ("(run/",)),
)


def area_of(frames: list[str]) -> str:
    for areas in (AREAS[:8], AREAS[8:]):  # a stage of the loop first, then a client's task
        for f in reversed(frames):
            for area, marks in areas:
                if any(f.startswith(m) or m in f for m in marks):
                    return area
    return "event loop" if frames and frames[-1].startswith("Runner.run ") else "other"


def _short(frame: str) -> str:
    # "process_batch (worker/batch/pipeline.py:200)" → "process_batch (pipeline.py)": lines
    # vary within a function, and the function is what a reader looks for.
    fn, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    for mark in ("site-packages/", "/worker/", "/bench/"):
        if mark in path:
            path = path.split(mark, 1)[1]
            break
    return f"{fn} ({path})"


def render(results: list[Result], info: dict[str, str], profiles: dict[str, list[str]]) -> str:
    by: dict[str, list[Result]] = collections.defaultdict(list)
    for r in results:
        by[r.label].append(r)
    lines = [
        f"# Pre-filled runs, {info['date']}",
        "",
        f"- machine: {info['cpu']}, **nproc {info['nproc']}**, {info['platform']}; load "
        f"average at start {info['load']}, {info['idle_load']} cores busy in the second before",
        f"- code: {info['code']}{info.get('against', '')}",
        f"- {info['versions']}",
        f"- broker: {info['broker']}; redis: {info['redis']}",
        f"- workload: {info['workload']}",
        "- each system alone on the pre-filled input, the systems taking turns; the window: "
        "the group's first committed offset → the last; CPU: the system's process (all its "
        "threads) in the window; nothing of this bench runs meanwhile but a 50 Hz offsets poll",
        "",
        "## Summary (medians of the rounds)",
        "",
        "| system | records/s | µs CPU / record | × passthrough (records/s) | broker µs / record | "
        "redis µs / record |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    base = (
        statistics.median(r.rate for r in by[PASSTHROUGH.label]) if PASSTHROUGH.label in by else 0
    )
    for label, rs in by.items():
        rate = statistics.median(r.rate for r in rs)
        us = statistics.median(r.us_per_record for r in rs)
        broker = statistics.median(r.broker_s / r.records * 1e6 for r in rs)
        redis = statistics.median(r.redis_s / r.records * 1e6 for r in rs)
        ratio = f"{rate / base:.2f}" if base else "–"
        lines.append(f"| {label} | {rate:,.0f} | {us:.1f} | {ratio} | {broker:.1f} | {redis:.1f} |")
    lines += [
        "",
        "## Every round",
        "",
        "| system | round | records | window s | records/s | µs CPU / record | records / batch | "
        + " | ".join(f"{s} µs" for s in STAGES)
        + " | checked |",
        "|---|--:|--:|--:|--:|--:|--:|" + "--:|" * len(STAGES) + "---|",
    ]
    for label, rs in by.items():
        for i, r in enumerate(rs, 1):
            st = " | ".join(f"{r.stages_us.get(s, 0):.1f}" if r.stages_us else "–" for s in STAGES)
            batch = f"{r.batch:.0f}" if r.batch else "–"
            lines.append(
                f"| {label} | {i} | {r.records:,} | {r.seconds:.2f} | {r.rate:,.0f} | "
                f"{r.us_per_record:.1f} | {batch} | {st} | {r.verified or '–'} |"
            )
    lines += [
        "",
        "Stage columns: the worker's `derender_stage_seconds` per record, wall time (the "
        "lanes' stages overlap, and time waiting on the broker or Redis is in them).",
    ]
    for label, rows in profiles.items():
        lines += ["", f"## py-spy: {label} (CPU samples in the window)", "", *rows]
    return "\n".join(lines)


async def run(args: argparse.Namespace, info: dict[str, str]) -> str:
    tok = load_deepseek()
    prof = replace(QUICK, tools=args.tools)
    work = make_workload(tok, args.requests, args.chunks, args.chunk, "pre", 29, prof.request())
    info["workload"] = (
        f"{args.requests} interleaved DeepSeek V4 chat requests, {args.tools} tools each, "
        f"{args.chunks} chunk records of {args.chunk} token id(s) + `end` each: "
        f"{len(work.records):,} records; the worker's defaults (parsers on)"
    )
    systems: list[tuple[str, System, Path | None]] = [("worker", WORKER, None)]
    for lanes in args.lanes:
        systems.append((f"worker, {lanes} lanes", replace(WORKER, lanes=lanes), None))
    for also in args.also:
        systems.append((f"worker {also}", replace(WORKER, extra=tuple(also.split())), None))
    if args.exactly_once:
        eos = replace(WORKER, guarantee=EXACTLY_ONCE)
        systems.append((f"worker, {EXACTLY_ONCE}", eos, None))
    if args.against:
        systems.append((f"worker @ {args.against.name}", WORKER, args.against))
    systems.append(("passthrough", PASSTHROUGH, None))
    results: list[Result] = []
    profiles: dict[str, list[str]] = {}
    with (
        RedisServer() as redis,
        start_broker("apache", lambda m: print(m, file=sys.stderr)) as (bootstrap, bpid, broker),
        tempfile.TemporaryDirectory(prefix="derender-prefilled-") as tmp,
    ):
        assert redis.pid is not None
        info["broker"] = broker
        info["redis"] = binary_version([str(redis_server_binary()), "--version"])
        env = Env(bootstrap, redis.url, redis.pid, bpid, Path(tmp), args.max_batch)
        # Unmeasured: the broker's JIT compiles on a passthrough run first.
        await one("warm-up", PASSTHROUGH, env, work.records, work.gens, None, 0)
        if args.exactly_once:
            await warm_transactions(bootstrap)
        for rnd in range(args.rounds):
            for label, system, tree in systems:
                rate = args.rate if args.profile and rnd == 0 else 0
                r = await one(
                    label, system, env, work.records, work.gens, tree, rate, args.keep, args.native
                )
                results.append(r)
                print(
                    f"round {rnd + 1} {label}: {r.rate:,.0f} records/s, "
                    f"{r.us_per_record:.1f} µs CPU/record {r.verified}",
                    file=sys.stderr,
                    flush=True,
                )
                if r.profile is not None:
                    profiles[label] = summarise_profile(r.profile, r.us_per_record)
    return render(results, info, profiles)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=1500)
    ap.add_argument("--chunks", type=int, default=86, help="chunk records per request")
    ap.add_argument("--chunk", type=int, default=1, help="token ids per record")
    ap.add_argument("--tools", type=int, default=4, help="tools in every request")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-batch", type=int, default=500)
    ap.add_argument(
        "--lanes", type=int, action="append", default=[], help="also the worker with --lanes N"
    )
    ap.add_argument(
        "--exactly-once",
        action="store_true",
        help=f"also the worker with --guarantee {EXACTLY_ONCE}",
    )
    ap.add_argument(
        "--also",
        action="append",
        default=[],
        help="also the worker with these flags (one string, e.g. '--batch-bytes 16384')",
    )
    ap.add_argument("--against", type=Path, help="another checkout's worker, measured in turn")
    ap.add_argument("--profile", action="store_true", help="py-spy on each worker, round 1")
    ap.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    ap.add_argument(
        "--native", action="store_true", help="py-spy --native (C frames; pauses to sample)"
    )
    ap.add_argument("--keep", type=Path, help="keep py-spy's raw stacks in this folder")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    if args.profile:
        py_spy()  # named at start, not after the first round
    info = {
        "date": datetime.date.today().isoformat(),
        "cpu": cpu_model(),
        "nproc": str(os.cpu_count()),
        "platform": platform.platform(),
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "idle_load": f"{other_load():.2f}",
        "code": code_version(),
        "versions": ", ".join(f"{k} {v}" for k, v in versions().items()),
    }
    if args.against:
        info["against"] = f"; against {args.against} ({code_version(args.against)})"
    report = asyncio.run(run(args, info))
    print(report)
    if not args.no_write:
        out = args.out or RESULTS_DIR / f"prefilled-{info['date']}.md"
        out.write_text(report + "\n", encoding="utf-8")
        print(f"\nwritten to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
