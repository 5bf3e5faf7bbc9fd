"""The markdown report of `make autoscale`."""

from __future__ import annotations

import contextlib
import datetime
import itertools
import math
import os
import platform
import statistics
import subprocess
from pathlib import Path
from typing import Any

from tests.autoscale.checks.moves import p50_max
from tests.autoscale.config import EVENT_WINDOW_S, GRACE_S, PARTITIONS, ROOT
from tests.autoscale.result import RunResult
from tests.autoscale.scaling.hpa import HpaSettings
from tests.autoscale.scaling.scaledobject import thresholds
from worker.adapters.local import kafka_server


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
    lag = thresholds(so)
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
        f"Settings: deploy/k8s/keda-scaledobject.yaml — lagThreshold {lag['lagThreshold']:g} → "
        f"{settings.target:g} compressed ×{settings.compression:g}, activationLagThreshold "
        f"{lag['activationLagThreshold']:g} → {settings.activation:g} compressed "
        f"×{settings.compression:g} (records of backlog per replica: a rate × a time; KEDA "
        f"and the HPA get the compressed values), offsetResetPolicy "
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
        "| run | guarantee | membership | scale events | replaced | peak replicas "
        "| pause p50 / max (s) | partition stall max (s) | unmoved pause max (s) "
        "| moved stall p50 / max (s) | burst drain (s) | SIGTERM→exit max (s) | repeats "
        "| checks | targets |"
    )
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        ps = [p.pause_s for p in r.pauses]
        st = [p.partition_stall_s for p in r.pauses]
        unmoved = [x for m in r.moves for x in m.pause_s.values()]
        s50, smax = p50_max([x for m in r.moves for x in m.stalls])
        terms = [w.exit_at - w.term_at for w in r.workers if w.term_at and w.exit_at]
        L.append(
            f"| {r.name} | {r.guarantee} | {'static' if r.static else 'dynamic'} | "
            f"{len(r.events)} ({sum(1 for e in r.events if e.after > e.before)} up) | "
            f"{len(r.replacements)} | {r.peak_replicas} | "
            f"{fmt_s(statistics.median(ps)) if ps else '–'} / {fmt_s(max(ps)) if ps else '–'} | "
            f"{fmt_s(max(st)) if st else '–'} | {fmt_s(max(unmoved, default=math.nan))} | "
            f"{fmt_s(s50)} / {fmt_s(smax)} | {fmt_s(r.drain_s)} | "
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
        "others flow). *replaced*: workers replaced while a scale-out's lag lasted (a "
        "rolling update during the scale). *unmoved pause* and *moved stall*: per partition "
        "at each scale event (docs/operate/autoscaling.md, the per-event report; each run's "
        "*Partitions per scale event* table). *burst drain*: first burst record sent → "
        "last [DONE] of a burst request. *repeats*: copies beyond the first of a "
        "(request_id, seq, part) seen by the read_committed reader. †: worker/'s sources "
        "changed during the run (a shared working tree; see the run's note)."
    )
    L.append("")
    L.append("Targets: pause ≤ 1 s p50 and ≤ 3 s max with dynamic membership; partitions "
             "that did not move pause ≤ 0.5 s, moved ones stall ≤ 1 s p50 and ≤ 2 s max; 0 "
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
    suggested = round(capacity * polling / 2, -3)
    real = thresholds(so)["lagThreshold"]  # the ScaledObject's, uncompressed
    L.append(
        f"- **lagThreshold**: {real:.0f} records (here {settings.target:.0f}, compressed "
        f"×{settings.compression:g}) is {real / capacity:.2f} s of one worker's work "
        f"({capacity:,.0f} records/s measured here; "
        "bench/results/worker-apache-2026-12-01*.md: 9-20 k for one process on an idle "
        f"machine), {real / capacity / polling:.2f} of the {polling:g} s pollingInterval. "
        "The burst here was "
        f"{work:.0f} s of one worker's work and took "
        f"{min(drains, default=math.nan):.1f}-{max(drains, default=math.nan):.1f} s to drain "
        f"with up to {max((r.peak_replicas for r in results), default=0)} replicas on "
        "2 cores; a new worker held its first partitions "
        f"{statistics.median(starts) if starts else math.nan:.1f} s (median, max "
        f"{max(starts, default=math.nan):.1f} s) after its start. With `replicas = "
        "ceil(lag / lagThreshold)`, a threshold of capacity × half the pollingInterval "
        "makes the replica count the number of workers that clear the backlog within half "
        "a polling interval (docs/operate/autoscaling.md, Choosing lagThreshold): "
        "**lagThreshold ≈ "
        f"{capacity:,.0f} × {polling / 2:g} s ≈ {suggested:,.0f}** for this machine's "
        "worker (scale it with the capacity measured where it runs)."
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


def render_moves(r: RunResult) -> list[str]:
    """Each scale event's partitions: moved or not, pauses, stalls, the stops in it."""
    L = ["Partitions per scale event:", ""]
    L.append(
        "| t (s) | replicas | window (s) | replaced | moved | unmoved pause p50 / max (s) "
        "| moved stall p50 / max (s) | moves without waiting input | topic pause (s) "
        "| SIGTERMed → exit (s) | group changed after (s) | unmoved before it max (s) |"
    )
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    t0 = r.start
    for e, m, p in zip(r.events, r.moves, r.pauses, strict=False):
        u50, umax = p50_max(list(m.pause_s.values()))
        s50, smax = p50_max(m.stalls)
        replaced = sum(1 for t, _, _ in r.replacements if m.lo <= t < m.hi)
        moved = ", ".join(map(str, m.moved)) or "none"
        idle = sum(1 for mv in m.moves if mv.stall_s is None)
        stops = ", ".join(
            f"{w.name} {w.rc} ({w.exit_at - w.term_at:.1f})"
            for w in r.workers
            if w.term_at and w.exit_at and m.lo <= w.term_at < m.hi
        )
        L.append(
            f"| {e.at - t0:.1f} | {e.before} → {e.after} | {m.hi - m.lo:.0f} | {replaced} | "
            f"{moved} ({len(m.moves)} moves) | {fmt_s(u50)} / {fmt_s(umax)} | "
            f"{fmt_s(s50)} / {fmt_s(smax)} | {idle} | {p.pause_s:.2f} | {stops or '–'} | "
            f"{m.changed_at - m.lo:.1f} | {fmt_s(max(m.before_s.values(), default=0.0))} |"
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
    L += render_moves(r)
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
