"""`make autoscale`: a fleet of real `derender-worker run` processes scaled 1 → N → 1 on
consumer lag, KEDA's own Kafka scaler as the oracle of lag, the HPA's rules applied.

    .venv/bin/python -m tests.autoscale.run                 # all four runs, writes the report
    .venv/bin/python -m tests.autoscale.run --only eos-dynamic
    .venv/bin/python -m tests.autoscale.run --quick         # shorter phases, smaller burst

One local Apache Kafka (worker/adapters/local/kafka_server.py) and one redis-server for all runs;
each run has its own topics (input: 8 partitions, output, DLQ), consumer group and Redis
prefix. Per run:

- **KEDA**: tests/autoscale/keda (Go, `github.com/kedacore/keda/v2/pkg/scalers` v2.21.0)
  polls the group with the trigger metadata of deploy/k8s/keda-scaledobject.yaml (less
  the SASL/TLS settings; lagThreshold and activationLagThreshold, records per replica =
  a rate × a time, divided by the time compression like the periods) every compressed
  polling interval and prints KEDA's metric.
- **HPA**: tests/autoscale/scaling/hpa.py turns the latest metric into a replica count every
  compressed sync period; the harness starts workers (slot = lowest free; static
  membership: `--group-instance-id w-<slot>`) or SIGTERMs the newest ones, as Kubernetes
  deletes pods; a worker not gone within the grace period (30 s) is SIGKILLed and fails
  the run. While a scale-out's lag lasts (KEDA's metric at or above its target), the
  oldest worker is replaced every 3 s (`--replace-every-s`), as a rolling update does
  during a scale: a new worker beside it, the old one SIGTERMed once the new one holds
  partitions.
- **Load** from the engine side: interleaved requests, 1-3 token ids per record: a low
  rate, a burst well above one worker's capacity (published as fast as the producer
  goes), the low rate again until the fleet is back at 1 (so every scale-in happens under
  load and its pause is measured), then idle.
- **Reader**: a read_committed consumer of the output topic, (request_id, seq, part) and
  bytes and arrival time of every output.
- **Per scale event** (checks/moves.py): which partitions moved (the workers' assignment
  lines), the pause of those that did not, the stall of each move, the exit codes of the
  workers SIGTERMed in the event's window.
- **Checks**: every request ends in `[DONE]`; outputs after dedupe of (request_id, seq,
  part) byte-equal to `derender-worker replay` of the input topic's records; no repeats
  under exactly-once; final group lag 0 (committed = end offset on every partition, and
  KEDA's last metric 0); every worker exit code 0 within the grace period; no
  "Traceback" in any worker log; nothing in the DLQ.

This module holds the command line and one run's orchestration; the parts are beside
it: config (paths, constants, the runs), console (progress lines), scaledobject (the
manifest, trigger metadata, compressed thresholds), workload (records, load profiles),
publisher (the engine side), reader (the read_committed output reader), keda (the kedalag
program: polling, self-check), fleet (worker processes), topics (group offsets, the input
read back), replay (the expected outputs), measure (pauses, stalls), result (RunResult),
verify (checks and measures), capacity (one worker's records/s), report (the markdown).
hpa.py is the HPA's rules.

Everything of a run (worker logs, KEDA's polls, the outputs, replay's input and output,
the repeats) stays in a folder under /tmp, printed at the start.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from tests.autoscale.checks.reader import Reader
from tests.autoscale.checks.replay import code_hash
from tests.autoscale.checks.verify import verify
from tests.autoscale.config import (
    BROKER_CONFIG,
    COMPRESSION,
    DEFAULT_KEDALAG,
    JVM_OPTIONS,
    PARTITIONS,
    READY_WITHIN_S,
    REPLACE_EVERY_S,
    RESULTS,
    RUNS,
    VENV_BIN,
)
from tests.autoscale.console import say
from tests.autoscale.load.capacity import measure_capacity
from tests.autoscale.load.fleet import Fleet, ScaleEvent, scrape_lag
from tests.autoscale.load.publisher import Publisher
from tests.autoscale.load.workload import FULL, QUICK, Profile, load_tokenizer, workload
from tests.autoscale.report import machine, render
from tests.autoscale.result import RunResult
from tests.autoscale.scaling.hpa import Hpa, HpaSettings
from tests.autoscale.scaling.keda import Keda, Poll, keda_selfcheck
from tests.autoscale.scaling.scaledobject import (
    compressed_thresholds,
    scaled_object,
    trigger_metadata,
)
from worker.adapters.local import kafka_server
from worker.adapters.local.embedded import RedisServer, create_topics


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
    replace_every_s: float = REPLACE_EVERY_S,
    client_flags: tuple[str, ...] = (),
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
            *client_flags,
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

    # The lag thresholds compressed as the run's time (settings.target is the compressed one).
    meta = trigger_metadata(so, bootstrap, group, topics["in"], settings.compression)
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

    def roll(now: float) -> None:
        """While a scale-out's lag lasts (KEDA's metric at or above the target), replace
        a worker every `replace_every_s`."""
        fleet.settle_replacements(READY_WITHIN_S)
        p, last = keda.latest(), res.events[-1] if res.events else None
        scaling_out = last is not None and last.after > last.before
        if not replace_every_s or not scaling_out or p is None or p.value < settings.target:
            return
        since = res.replacements[-1][0] if res.replacements else last.at
        if now - since >= replace_every_s and (pair := fleet.replace_oldest()) is not None:
            res.replacements.append((now, pair[0].name, pair[1].name))
            say(f"  replacing {pair[0].name} by {pair[1].name} (a rolling update)")

    def control() -> None:
        try:
            next_sync = time.time()
            last_say = 0.0
            while not stop_hpa.is_set():
                fleet.reap()
                now = time.time()
                roll(now)
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
    ap.add_argument("--replace-every-s", type=float, default=REPLACE_EVERY_S,
                    help="while a scale-out's lag lasts, replace a worker this often "
                    "(0: never)")  # fmt: skip
    ap.add_argument("--repeat", type=int, default=1, help="run each selected run this often")
    ap.add_argument("--kafka-client", choices=("aiokafka", "confluent"), default="aiokafka",
                    help="the workers' Kafka client (confluent: KIP-848)")  # fmt: skip
    args = ap.parse_args(argv)
    client_flags = ("--kafka-client", args.kafka_client)

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
    # A lag threshold is a rate × a time: compressed as the periods are (the HPA's target
    # and KEDA's trigger metadata alike).
    lag = compressed_thresholds(so, args.compression)
    overrides.update(target=lag["lagThreshold"], activation=lag["activationLagThreshold"])
    settings = HpaSettings.from_scaled_object(so, **overrides).compressed(args.compression)
    prof = QUICK if args.quick else FULL
    names = args.only or list(RUNS)
    workdir = Path(tempfile.mkdtemp(prefix="derender-autoscale-"))
    say(f"evidence in {workdir}; runs: {', '.join(names)}; time ×{args.compression:g}")
    started = time.time()
    tok = load_tokenizer()
    results: list[RunResult] = []
    with contextlib.ExitStack() as stack:
        kafka = stack.enter_context(
            kafka_server.ApacheKafka(config=BROKER_CONFIG, jvm_options=JVM_OPTIONS, progress=say)
        )
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
            capacity = measure_capacity(
                kafka.bootstrap, redis.url, tok, workdir, 40_000, client_flags
            )
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
                    replace_every_s=args.replace_every_s, client_flags=client_flags,
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
