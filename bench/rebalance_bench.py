"""How long partitions stop at a scale event: 1 worker, then 3 more join (1 → 4), then one
is replaced (a new one starts, an old one is SIGTERMed), optionally 4 → 8; exactly-once,
under steady load, on a local Apache Kafka and Redis.

    .venv/bin/python bench/rebalance_bench.py --partitions 8 --candidate today
    .venv/bin/python bench/rebalance_bench.py --partitions 32 --steps 4,r,8 --candidate sticky

Measured from the output topic (read_committed, after the run): per input partition, the
CreateTime of its outputs (when a worker sent them). Around each event, a partition whose
owner did not change has a *pause* (its longest gap between outputs), a partition that
moved a *stall* (the same, across its move). Owners come from the workers' logged
assignments. Repeats: outputs read more than once by (request id, seq, part).

Candidates are sets of worker flags (`CANDIDATES`: `confluent` is the worker itself on
KIP-848's consumer group protocol), plus `kip848`: the consumer-protocol prototype of
bench/rebalance/kip848.py (confluent-kafka, one transactional producer per member, offsets
sent with the consumer's group metadata; no processing).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rebalance.fleet import Fleet, Member, autogroup_nice, revocations
from rebalance.load import SteadyLoad, read_outputs
from rebalance.measure import caught_up, event_result, repeats
from rebalance.warm import warm
from workerbench.workload import load_deepseek, make_workload

from worker.adapters.local import kafka_server
from worker.adapters.local.embedded import RedisServer, create_topics

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
JVM_OPTIONS = ("-Xms512m", "-Xmx1g", "-XX:+UseSerialGC", "-XX:+ExitOnOutOfMemoryError")
# KIP-848 groups: the broker sets the members' heartbeat interval (default 5 s).
BROKER_CONFIG = {
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "100",
    # As the aiokafka workers' --session-timeout-ms (the local broker's is 3 s, for tests).
    "group.consumer.session.timeout.ms": "10000",
    "group.initial.rebalance.delay.ms": "0",
    # A new assignment as soon as a member joins or leaves (Kafka's default: at most one a
    # second, which a moved partition waited for).
    "group.consumer.assignment.interval.ms": "0",
    # Kafka's default, not the local broker's 3 s (for tests): starved by a 32-partition
    # fleet on 2 cores, the broker was fenced by its own controller, and its transaction
    # coordinator then completed aborts without writing their markers (repeats and stuck
    # partitions, docs/design/exactly-once.md).
    "broker.session.timeout.ms": "9000",
}
# The code as it was (the main checkout's venv, when there is one) and this checkout's.
MAIN_WORKER = Path("/work/main/.venv/bin/derender-worker")
HEARTBEAT = ["--heartbeat-interval-ms", "250"]
# candidate → (whose worker, its flags)
CANDIDATES: dict[str, tuple[str, list[str]]] = {
    "today": ("main", []),
    "short-heartbeat": ("main", HEARTBEAT),
    "sticky-3s-heartbeat": ("here", ["--assignor", "sticky", "--heartbeat-interval-ms", "3000"]),
    "sticky-heartbeat": ("here", ["--assignor", "sticky", *HEARTBEAT]),
    "roundrobin-here": ("here", ["--assignor", "roundrobin"]),
    # The worker on confluent-kafka with KIP-848's consumer group protocol.
    "confluent": ("here", ["--kafka-client", "confluent"]),
}
SETTLE_S = 5.0  # after the last member of an event is assigned: the window's tail


def worker_argv(
    cand: str, env: dict[str, str], name: str, port: int, extra: Sequence[str] = ()
) -> list[str]:
    if cand in ("kip848", "kip848-no-callbacks"):
        return [
            sys.executable, str(REPO / "bench" / "rebalance" / "kip848.py"),
            "--bootstrap", env["bootstrap"], "--group", env["group"],
            "--input", env["in"], "--output", env["out"], "--name", name,
            "--transactional-id", f"{env['group']}-{name}",
            *(["--no-callbacks"] if cand == "kip848-no-callbacks" else []),
        ]  # fmt: skip
    whose, flags = CANDIDATES[cand]
    binary = MAIN_WORKER if whose == "main" and MAIN_WORKER.exists() else BIN / "derender-worker"
    return [
        str(binary), "run",
        "--bootstrap-servers", env["bootstrap"],
        "--redis-url", env["redis"],
        "--input-topic", env["in"], "--output-topic", env["out"], "--dlq-topic", env["dlq"],
        "--group-id", env["group"], "--state-prefix", f"{env['group']}:",
        "--metrics-port", str(port), "--metrics-host", "127.0.0.1",
        "--guarantee", "exactly-once",
        "--transactional-id-prefix", f"{env['group']}-",
        *flags,
        *extra,
    ]  # fmt: skip


def wait_assigned(fleet: Fleet, members: list[Member], timeout_s: float) -> bool:
    """Whether every one of `members` got partitions in time; each back to niceness 0 as
    soon as it has them."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        for m in members:
            if m.niced and fleet.assigned(m):
                fleet.unnice(m)
        if all(fleet.assigned(m) for m in members):
            return True
        fleet.sleep(0.05)
    return False


def run_one(args: argparse.Namespace, cand: str, kafka_bs: str, redis_url: str, tok) -> dict:  # type: ignore[no-untyped-def,type-arg]
    from worker.adapters.local.embedded import free_port

    tag = f"{cand}-{args.partitions}-{int(time.time())}"
    folder = Path(tempfile.mkdtemp(prefix=f"rebalance-{tag}-"))
    env = {
        "bootstrap": kafka_bs,
        "redis": redis_url,
        "in": f"rb-{tag}-in",
        "out": f"rb-{tag}-out",
        "dlq": f"rb-{tag}-dlq",
        "group": f"rb-{tag}",
    }
    asyncio.run(create_topics(kafka_bs, [env["in"], env["out"]], args.partitions))
    asyncio.run(create_topics(kafka_bs, [env["dlq"]], 1))
    steps = args.steps.split(",")
    duration = 60 + 45 * len(steps)
    chunks = 40
    requests = int(args.rate * duration / (chunks + 1)) + 1
    wl = make_workload(tok, requests, chunks, 2, f"rb{tag}", 7)
    records = [(rid, value) for rid, _, value in wl.records]
    load = SteadyLoad(kafka_bs, env["in"], records, args.rate)
    fleet = Fleet(folder, REPO)
    n = 0

    def start() -> Member:
        nonlocal n
        argv = worker_argv(cand, env, f"w{n}", free_port(), args.worker_args.split())
        m = fleet.start(f"w{n}", argv, args.joiner_nice if n else 0)
        n += 1
        return m

    # name, when, end of its window, the request-id prefix of its burst ("" without one)
    events: list[tuple[str, float, float, str]] = []
    print(f"[{cand} P={args.partitions}] logs in {folder}", flush=True)
    try:
        load.start()
        first = start()
        if not wait_assigned(fleet, [first], 90):
            raise SystemExit(f"{first.name} never got partitions: see {first.log}")
        fleet.sleep(args.steady_s)
        live = [first]
        for step in steps:
            at = time.time()
            prefix = ""
            if args.burst and step != "r":
                prefix = f"rb{tag}b{step}"
                extra = make_workload(tok, args.burst // 41 + 1, 40, 2, prefix, 11)
                load.burst([(rid, value) for rid, _, value in extra.records])
            if step == "r":
                new = [start()]
                fleet.term(live[1] if len(live) > 1 else live[0])
                gone = live.pop(1 if len(live) > 1 else 0)
                name = f"replace {gone.name} by {new[0].name}"
            else:
                want = int(step)
                before = len(live)
                new = [start() for _ in range(want - before)]
                name = f"{before} → {want}"
            live += new
            ok = wait_assigned(fleet, new, 90)
            fleet.sleep(SETTLE_S)
            end = time.time()
            events.append(
                (name if ok else name + " (a joiner never got partitions)", at, end, prefix)
            )
            print(f"  {name}: {end - at:.1f} s", flush=True)
        fleet.sleep(2)
    finally:
        load.stop()
        time.sleep(3)  # let the workers finish what was published
        fleet.stop_all()
    if load.error is not None:
        raise load.error
    out = asyncio.run(read_outputs(kafka_bs, env["out"], load.partition_of))
    timeline = fleet.timeline()
    revoked = revocations(fleet)
    res = {
        "candidate": cand,
        "partitions": args.partitions,
        "rate": args.rate,
        "burst": args.burst,
        "joiner_nice": args.joiner_nice,
        "servers_nice": args.servers_nice,
        "outputs": len(out.keys),
        "repeats": repeats(out.keys),
        "exits": {m.name: (m.rc, round(m.exit_s or 0, 2)) for m in fleet.members},
        "events": [],
        "logs": str(folder),
    }
    (folder / "run.json").write_text(json.dumps({
        "stamps": out.stamps, "timeline": timeline, "events": events, "revoked": revoked,
        "repeated": out.repeated(), "inputs": load.inputs, "outputs": out.outputs,
    }))  # fmt: skip
    for name, at, end, prefix in events:
        ev = event_result(
            name, at, end - at, out.stamps, timeline, args.partitions, revoked=revoked,
            inputs=load.inputs, outputs=out.outputs,
        )  # fmt: skip
        summary = {"name": name, "window_s": round(end - at, 1), **ev.summary()}
        if prefix:
            summary["caught_up_s"] = caught_up(load.inputs, out.outputs, prefix + "-", at)
        res["events"].append({**summary, "moved": sorted(ev.moved), "gaps": ev.unmoved | ev.moved})
    return res


def render(res: dict) -> str:  # type: ignore[type-arg]
    lines = [
        f"{res['candidate']}, {res['partitions']} partitions, {res['rate']:.0f} records/s: "
        f"{res['outputs']} outputs, {res['repeats']} repeats, exits {res['exits']}"
    ]
    for e in res["events"]:
        lines.append(
            f"  {e['name']:<22} unmoved {e['unmoved_n']:>2}: max {e['unmoved_max']:.2f} s "
            f"p50 {e['unmoved_p50']:.2f} s | moved {e['moved_n']:>2}: p50 {e['moved_p50']:.2f} s "
            f"max {e['moved_max']:.2f} s | steady gap before {e['baseline']:.2f} s\n"
            f"  {'':<22} across a revocation: unmoved max {e['unmoved_rebalance_max']:.2f} s"
            f" | moved p50 {e['moved_rebalance_p50']:.2f} s max {e['moved_rebalance_max']:.2f} s\n"
            f"  {'':<22} from a revocation to the next output: unmoved max "
            f"{e['unmoved_resume_max']:.2f} s | moved p50 {e['moved_resume_p50']:.2f} s "
            f"max {e['moved_resume_max']:.2f} s\n"
            f"  {'':<22} beside a revocation by its owner: unmoved "
            f"{e.get('unmoved_beside_n', 0)}: p50 {e.get('unmoved_beside_p50', 0):.2f} s "
            f"max {e.get('unmoved_beside_max', 0):.2f} s\n"
            f"  {'':<22} while its input waited: unmoved max "
            f"{e.get('unmoved_waited_max', 0):.2f} s | moved p50 "
            f"{e.get('moved_waited_p50', 0):.2f} s max {e.get('moved_waited_max', 0):.2f} s"
            f" | steady before {e.get('baseline_waited', 0):.2f} s\n"
            f"  {'':<22} before the group changed ({e.get('changed_after_s', 0):.1f} s in): "
            f"unmoved max {e.get('unmoved_waited_before_max', 0):.2f} s"
        )
        if "caught_up_s" in e:
            lines.append(f"  {'':<22} burst answered in full after {e['caught_up_s']:.2f} s")
    return "\n".join(lines)


def reanalyze(folder: Path) -> dict:  # type: ignore[type-arg]
    """The measures again, from a run's saved outputs and assignments (run.json)."""
    doc = json.loads((folder / "run.json").read_text())
    stamps = {int(p): v for p, v in doc["stamps"].items()}
    timeline = {int(p): [tuple(e) for e in v] for p, v in doc["timeline"].items()}
    revoked = {int(p): v for p, v in doc["revoked"].items()}
    inputs = {int(p): [tuple(r) for r in v] for p, v in doc.get("inputs", {}).items()}
    outputs = {int(p): [tuple(o) for o in v] for p, v in doc.get("outputs", {}).items()}
    cand, partitions = folder.name.split("-")[1:-3], int(folder.name.split("-")[-3])
    res: dict = {"candidate": "-".join(cand), "partitions": partitions, "events": []}  # type: ignore[type-arg]
    for name, at, end, *rest in doc["events"]:
        ev = event_result(
            name, at, end - at, stamps, timeline, partitions, revoked=revoked,  # type: ignore[arg-type]
            inputs=inputs or None, outputs=outputs or None,  # type: ignore[arg-type]
        )  # fmt: skip
        summary = {"name": name, "window_s": round(end - at, 1), **ev.summary()}
        if rest and rest[0]:
            summary["caught_up_s"] = caught_up(inputs, outputs, rest[0] + "-", at)  # type: ignore[arg-type]
        res["events"].append(summary)
    return res


def markdown(results: list[dict]) -> list[str]:  # type: ignore[type-arg]
    """One row per run and event: the window's longest gaps (pause, stall), the same
    while input waited, and the wait from a revocation to the next output, in seconds."""
    out = [
        "| partitions | candidate | event | unmoved pause max | moved stall p50 / max "
        "| while input waited: unmoved max | moved p50 / max "
        "| revocation → output: unmoved max | moved p50 / max "
        "| unmoved, input waiting, before the group changed |",
        "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        for e in r["events"]:
            out.append(
                f"| {r['partitions']} | {r['candidate']} | {e['name']} | {e['unmoved_max']:.2f} "
                f"| {e['moved_p50']:.2f} / {e['moved_max']:.2f} "
                f"| {e.get('unmoved_waited_max', 0):.2f} "
                f"| {e.get('moved_waited_p50', 0):.2f} / {e.get('moved_waited_max', 0):.2f} "
                f"| {e['unmoved_resume_max']:.2f} "
                f"| {e['moved_resume_p50']:.2f} / {e['moved_resume_max']:.2f} "
                f"| {e.get('unmoved_waited_before_max', 0):.2f} |"
            )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--candidate", action="append", choices=[*CANDIDATES, "kip848", "kip848-no-callbacks"]
    )
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--steps", default="4,r", help="scale to N, or r (replace one), in order")
    ap.add_argument("--rate", type=float, default=400.0, help="input records a second")
    ap.add_argument(
        "--burst", type=int, default=0, help="records published at once at each scale-out"
    )
    ap.add_argument("--steady-s", type=float, default=8.0)
    ap.add_argument(
        "--worker-args", default="", help="more flags for every worker (space-separated)"
    )
    ap.add_argument(
        "--joiner-nice",
        type=int,
        default=0,
        help="start each joining worker at this niceness, back to 0 once it has partitions"
        " (its start-up then takes only spare CPU, as on a node of its own)",
    )
    ap.add_argument(
        "--servers-nice",
        type=int,
        default=0,
        help="run the broker and Redis at this niceness (below 0: CPU first, as on nodes of"
        " their own; a starved broker stops every partition at once)",
    )
    ap.add_argument(
        "--broker-gc-log", type=Path, default=None, help="the broker's GC pauses, logged here"
    )
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--broker-data", type=Path, default=None,
                    help="keep the broker's log here (for bench/rebalance/txnlog.py)")  # fmt: skip
    ap.add_argument(
        "--broker-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker setting over the bench's own (e.g. group.consumer.assignment.interval.ms=0)",
    )
    ap.add_argument(
        "--cold",
        action="store_true",
        help="measure on a fresh broker, without warming it first (rebalance/warm.py)",
    )
    ap.add_argument("--json", type=Path, default=None, help="append each result here")
    ap.add_argument("--markdown", action="store_true", help="with --reanalyze: one table")
    ap.add_argument("--reanalyze", type=Path, nargs="*", help="saved runs' folders: measure again")
    args = ap.parse_args(argv)
    if args.reanalyze:
        results = [reanalyze(folder) for folder in args.reanalyze]
        print(
            "\n".join(markdown(results)) if args.markdown else "\n".join(map(json.dumps, results))
        )
        return 0
    cands = args.candidate or ["today"]
    config = dict(BROKER_CONFIG)
    for item in args.broker_config:
        key, sep, value = item.partition("=")
        if not sep or not key:
            ap.error(f"--broker-config: expected KEY=VALUE, got {item!r}")
        config[key] = value
    jvm = list(JVM_OPTIONS)
    if args.broker_gc_log is not None:
        jvm.append(f"-Xlog:gc*:file={args.broker_gc_log}:time,uptime")
    tok = load_deepseek()
    with contextlib.ExitStack() as stack:
        kafka = stack.enter_context(
            kafka_server.ApacheKafka(config=config, jvm_options=jvm, data_dir=args.broker_data)
        )
        redis = stack.enter_context(RedisServer())
        if args.servers_nice:
            for server in (kafka, redis):
                if server.pid is None or not autogroup_nice(server.pid, args.servers_nice):
                    sys.exit(f"--servers-nice {args.servers_nice}: refused (root needed?)")
        if not args.cold:
            took = warm(kafka.bootstrap, args.partitions)
            print(f"broker warmed in {took:.1f} s", flush=True)
        for _ in range(args.repeat):
            for cand in cands:
                res = run_one(args, cand, kafka.bootstrap, redis.url, tok)
                print(render(res), flush=True)
                if args.json is not None:
                    with open(args.json, "a", encoding="utf-8") as f:
                        f.write(json.dumps(res) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
