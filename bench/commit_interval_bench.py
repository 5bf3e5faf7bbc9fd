"""Exactly-once's `--commit-interval-ms`: throughput and latency per interval.

    .venv/bin/python bench/commit_interval_bench.py                      # ~12 min
    .venv/bin/python bench/commit_interval_bench.py --intervals 0,100 --rounds 1

A transaction's commit waits on the broker for 10-15 ms (its markers on every partition
it touched, acks=all). With one transaction per batch (`--commit-interval-ms 0`) that wait
is in every batch; with an interval it is shared by the batches of the interval, and a
read_committed reader sees a batch's outputs only when its transaction commits. This
bench measures both sides on worker_bench's machinery (bench/workerbench: Apache Kafka and
redis-server started here, the broker warmed up first, 1-token chunk records, the bench's
read_committed reader beside the system):

- peak: every record of the pre-filled input, as records/s and CPU per record, for the
  at-least-once worker and the exactly-once worker at each interval, taking turns for
  `--rounds` (medians reported);
- latency: publish -> the reader sees the output, p50 / p99, at 10 % and 50 % of the
  at-least-once worker's peak (the same rates for every system, so the intervals are
  compared at equal load), in the first round.

The report says which interval meets the target "exactly-once >= 0.8x at-least-once"
and what each costs in latency; the worker's default is chosen from it (bench/README.md).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from common import code_version, cpu_model  # noqa: E402
from worker_bench import start_broker  # noqa: E402
from workerbench.processes import Env, System  # noqa: E402
from workerbench.profile import EXACTLY_ONCE, QUICK, RESULTS_DIR  # noqa: E402
from workerbench.report import other_load, versions  # noqa: E402
from workerbench.runs import Run, one_run, warm_broker  # noqa: E402
from workerbench.workload import load_deepseek, make_workload  # noqa: E402

from tests.support.servers import RedisServer  # noqa: E402

ALO = System("worker")
FRACTIONS = (0.1, 0.5)


def eos(interval_ms: int) -> System:
    return System(
        "worker", guarantee=EXACTLY_ONCE, extra=("--commit-interval-ms", str(interval_ms))
    )


def label(system: System) -> str:
    if system.guarantee is None:
        return "at-least-once"
    return f"exactly-once, {system.extra[1]} ms"


async def measure(
    env: Env, intervals: list[int], rounds: int, progress: object, info: dict[str, str]
) -> dict[str, list[Run]]:
    tok = load_deepseek()
    prof = QUICK
    say = progress if callable(progress) else print
    # Not measured: the broker's JIT warms up (peaks and paced points, until it is idle)
    # and its transaction paths too.
    info["warm-up"] = await warm_broker(env, tok, prof, True, say)
    systems = [ALO, *(eos(ms) for ms in intervals)]
    runs: dict[str, list[Run]] = {label(s): [] for s in systems}
    alo_peak: dict[str, float] = {}  # (filled by the first at-least-once run)
    for rnd in range(rounds):
        for n, system in enumerate(systems):
            work = make_workload(
                tok, prof.requests, prof.chunks, 1, f"p{rnd}-{n}", 100 * rnd + n, None
            )

            def rates(own: float, rnd: int = rnd) -> list[tuple[str, float, float]]:
                if rnd > 0:
                    return []
                base = alo_peak.get("records/s", own)
                return [(f"{f:.0%} of at-least-once peak", f, f * base) for f in FRACTIONS]

            def latency_work(rate: float, i: int, n: int = n, rnd: int = rnd):  # type: ignore[no-untyped-def]
                per_request = max(2, math.ceil(rate * prof.point_s / prof.requests) - 1)
                return make_workload(
                    tok, prof.requests, per_request, 1, f"l{rnd}-{n}-{i}", 9000 + 10 * n + i, None
                )

            run = await one_run(system, env, 1, work, rates, latency_work, prof, say)
            run.round = rnd
            if system is ALO:
                alo_peak.setdefault("records/s", run.peak.records_per_s)
            runs[label(system)].append(run)
            peak = f"{run.peak.records_per_s:,.0f} records/s"
            say(f"round {rnd + 1} {label(system)}: {peak}, {run.verified}")
    return runs


def render(runs: dict[str, list[Run]], info: dict[str, str], rounds: int) -> str:
    alo = statistics.median(r.peak.records_per_s for r in runs["at-least-once"])
    lines = [
        f"# Exactly-once commit interval, {info['day']}",
        "",
        f"- machine: {info['cpu']}, **nproc {info['nproc']}**, {info['platform']}; load "
        f"average at start {info['load']}, {info['idle_load']} cores busy in the second before",
        f"- code: {info['code']}",
        f"- {info['versions']}; the broker {info.get('warm-up', 'not warmed up')}",
        "- workload: worker_bench's quick profile, 1-token chunk records (1000 interleaved "
        f"requests x {QUICK.chunks} chunks + `end`), parsers on; peaks: medians of {rounds} "
        "rounds in turns; latency points (first round): 10 % and 50 % of the at-least-once "
        f"worker's peak for every system, {QUICK.point_s} s each, read_committed reader for "
        "exactly-once. CPU per record is prefilled_bench's (its window is the committed "
        "offsets'; this reader's window starts at the first committed output)",
        "",
        "| system | peak records/s | x at-least-once | p50 / p99 ms at 10 % "
        "| p50 / p99 ms at 50 % | commit ms / batch at 10 % | checked |",
        "|---|--:|--:|--:|--:|--:|---|",
    ]
    for name, rs in runs.items():
        peak = statistics.median(r.peak.records_per_s for r in rs)
        pts = rs[0].points
        lat = [f"{p.e2e_ms['p50']:.1f} / {p.e2e_ms['p99']:.1f}" for p in pts] + ["-"] * 2
        commit = f"{pts[0].stages_ms.get('commit', math.nan):.1f}" if pts else "-"
        lines.append(
            f"| {name} | {peak:,.0f} | {peak / alo:.2f} | {lat[0]} "
            f"| {lat[1]} | {commit} | {rs[0].verified} |"
        )
    lines += ["", "Every round (peak records/s):", ""]
    for name, rs in runs.items():
        lines.append(f"- {name}: " + ", ".join(f"{r.peak.records_per_s:,.0f}" for r in rs))
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--intervals", default="0,25,100,250,1000", help="ms, comma-separated")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    intervals = [int(x) for x in args.intervals.split(",")]
    started = time.perf_counter()

    def progress(msg: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f} s] {msg}", file=sys.stderr, flush=True)

    info = {
        "day": datetime.date.today().isoformat(),
        "cpu": cpu_model(),
        "nproc": str(os.cpu_count()),
        "platform": platform.platform(),
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "idle_load": f"{other_load():.2f}",
        "code": code_version(),
        "versions": ", ".join(f"{k} {v}" for k, v in versions().items()),
    }
    with (
        RedisServer() as redis,
        start_broker("apache", progress) as (bootstrap, broker_pid, broker),
        tempfile.TemporaryDirectory(prefix="derender-interval-") as tmp,
    ):
        info["versions"] += f"; broker: {broker}"
        assert redis.pid is not None
        env = Env(bootstrap, redis.url, redis.pid, broker_pid, Path(tmp), 500, "standalone", None)
        runs = asyncio.run(measure(env, intervals, args.rounds, progress, info))
    report = render(runs, info, args.rounds)
    print(report)
    if not args.no_write:
        out = args.out or RESULTS_DIR / f"commit-interval-{info['day']}.md"
        out.write_text(report + "\n", encoding="utf-8")
        print(f"\nwritten to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
