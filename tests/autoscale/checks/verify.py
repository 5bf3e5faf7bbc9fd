"""A run's checks (completeness, replay equality, repeats, final lag, exit codes, logs)
and measures."""

from __future__ import annotations

import asyncio
import datetime
import json
import math
import statistics
from collections import defaultdict

from tests.autoscale.checks.measure import pauses, pending_intervals, with_own_output
from tests.autoscale.checks.moves import (
    Change,
    EventMoves,
    Holding,
    event_moves,
    holdings,
    p50_max,
)
from tests.autoscale.checks.reader import Out, Reader
from tests.autoscale.checks.replay import code_hash, replay_expected
from tests.autoscale.checks.topics import final_lag, read_input, records_in
from tests.autoscale.config import (
    EVENT_WINDOW_S,
    EXACTLY_ONCE,
    MOVED_STALL_MAX_TARGET_S,
    MOVED_STALL_P50_TARGET_S,
    PARTITIONS,
    PAUSE_MAX_TARGET_S,
    PAUSE_P50_TARGET_S,
    SIGTERM_TARGET_S,
    UNMOVED_PAUSE_TARGET_S,
)
from tests.autoscale.load.fleet import ScaleEvent, Worker
from tests.autoscale.load.workload import Rec
from tests.autoscale.result import RunResult
from tests.autoscale.scaling.keda import Keda
from worker.constants import DONE


def changes_of(workers: list[Worker]) -> list[Change]:
    """Every worker's assignment and revocation lines, and its exit (all it held)."""
    out = []
    for i, w in enumerate(workers):
        name = f"{w.name}#{i}"
        for line in w.log.read_text(errors="replace").splitlines():
            gained = "partitions assigned: " in line
            if not gained and "partitions revoked: " not in line:
                continue
            try:
                at = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            except ValueError:
                continue
            names = line.split(": ", 2)[-1]
            parts = frozenset(int(n.rsplit("/", 1)[1]) for n in names.split(", ") if "/" in n)
            out.append(Change(at, name, parts, gained))
        if w.exit_at is not None:
            out.append(Change(w.exit_at, name, frozenset(range(PARTITIONS)), False))
    return out


def event_windows(
    events: list[ScaleEvent], replacements: list[tuple[float, str, str]]
) -> list[tuple[float, float]]:
    """Each scale event's window: until the next event, and at most EVENT_WINDOW_S after
    the event or after the last replacement made in it."""
    out = []
    for i, e in enumerate(events):
        nxt = events[i + 1].at if i + 1 < len(events) else math.inf
        last = max([e.at, *(t for t, _, _ in replacements if e.at <= t < nxt)])
        out.append((e.at, min(nxt, last + EVENT_WINDOW_S)))
    return out


def measure_moves(
    res: RunResult, recs: list[Rec], outs: list[Out], partition_of: dict[str, int]
) -> list[EventMoves]:
    arrivals: dict[int, list[float]] = defaultdict(list)
    waiting: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for o in outs:
        arrivals[partition_of.get(o.rid, -1)].append(o.at)
    for r, iv in zip(recs, pending_intervals(recs, outs, partition_of), strict=True):
        waiting[partition_of.get(r.rid, -1)].append(iv)
    for xs in arrivals.values():
        xs.sort()
    for ivs in waiting.values():
        ivs.sort()
    held = holdings(changes_of(res.workers))
    return [
        event_moves(lo, hi, held, dict(arrivals), dict(waiting))
        for lo, hi in event_windows(res.events, res.replacements)
    ]


def holders(held: dict[int, list[Holding]], partition: int, at: float) -> list[str]:
    return [h.worker for h in held.get(partition, []) if h.start <= at < h.end]


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
        held = holdings(changes_of(res.workers))
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
    waits = with_own_output(recs, outs)  # (the records that can show a wait)
    res.pauses = pauses(res.events, waits, outs, partition_of)
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
    res.moves = measure_moves(res, waits, outs, partition_of)
    pause = [x for m in res.moves for x in m.pause_s.values()]
    stalls = [x for m in res.moves for x in m.stalls]
    worst_pause = max(pause, default=0.0)
    s50, smax = p50_max(stalls)
    t[f"partitions that did not move pause ≤ {UNMOVED_PAUSE_TARGET_S} s at every event"] = (
        f"max {worst_pause:.2f} s" if worst_pause > UNMOVED_PAUSE_TARGET_S else ""
    )
    t[
        f"moved partitions stall ≤ {MOVED_STALL_P50_TARGET_S:.0f} s p50 and "
        f"≤ {MOVED_STALL_MAX_TARGET_S:.0f} s max"
    ] = (
        f"p50 {s50:.2f} s, max {smax:.2f} s"
        if stalls and (s50 > MOVED_STALL_P50_TARGET_S or smax > MOVED_STALL_MAX_TARGET_S)
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
