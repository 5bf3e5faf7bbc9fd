"""The `derender-worker` command line (CONTRACT.md §8)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from worker import constants
from worker.config import ConfigError, load_registry
from worker.failures import ConfigError as RunConfigError
from worker.observe.logs import PROCESS_INDEX_ENV
from worker.settings import KafkaSecurity, SettingsError, add_security_flags, env_name


def tune_gc() -> None:
    """A batch keeps hundreds of records' objects alive at once, which makes CPython's
    young-generation collector run constantly (bench/README.md: +24-45% batch
    throughput with these settings). Objects that live through start-up (tokenizers,
    registry, compiled codecs) are frozen out of every later collection."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


def _env_default(flag: str, default: str | None = None) -> str | None:
    """Every flag can also come from `DERENDER_<FLAG>` (dashes → underscores)."""
    return os.environ.get(env_name(flag), default)


def _add_replay(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "replay",
        help="derender a JSONL file of ChunkRecords offline (state in memory)",
        description="Input lines are ChunkRecords or {key, value, timestamp} envelopes; "
        "output lines are {key, headers, value}, byte-identical to what `run` publishes.",
    )
    p.add_argument("input", nargs="?", default="-", help="input JSONL file, or - for stdin")
    p.add_argument("-o", "--output", default="-", help="output JSONL file, or - for stdout")
    p.add_argument("--models", default=_env_default("models"), help="model registry TOML")
    p.add_argument(
        "--state",
        default=None,
        help="load the in-memory state from this file first and save it after "
        "(continue a replay split in parts)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress or summary on stderr")
    p.add_argument(
        "--control",
        action="store_true",
        help="also write the early-stop records `run --control-topic` publishes (kind control)",
    )
    p.add_argument(
        "--pass-headers",
        default=_env_default("pass-headers"),
        help="input headers the outputs carry besides the W3C trace headers, as `run`'s",
    )


def _replay(args: argparse.Namespace) -> int:
    from worker.adapters.state.memory_store import MemoryStore
    from worker.observe.propagation import carried_names
    from worker.tools.replay import replay

    try:
        carry = carried_names(args.pass_headers)
    except ValueError as exc:
        print(f"derender-worker replay: --pass-headers: {exc}", file=sys.stderr)
        return 2
    registry = load_registry(args.models)
    tune_gc()
    store = MemoryStore()
    if args.state and os.path.exists(args.state):
        with open(args.state, "rb") as f:
            store.load(f.read())
    src = sys.stdin.buffer if args.input == "-" else open(args.input, "rb")  # noqa: SIM115
    dst = sys.stdout.buffer if args.output == "-" else open(args.output, "wb")  # noqa: SIM115
    try:
        summary = replay(
            src,
            dst,
            registry,
            store,
            name=args.input,
            progress=None if args.quiet else sys.stderr,
            control=args.control,
            carry=carry,
        )
    finally:
        if src is not sys.stdin.buffer:
            src.close()
        if dst is not sys.stdout.buffer:
            dst.close()
        else:
            dst.flush()
    if args.state:
        with open(args.state, "wb") as f:
            f.write(store.dump())
    if not args.quiet:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(summary.results.items()))
        print(
            f"replay: {summary.records} records ({counts}), {summary.outputs} outputs, "
            f"{summary.tokens} tokens in {summary.seconds:.2f}s",
            file=sys.stderr,
        )
    return 0


def _add_run(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from worker.settings import add_flags

    p = sub.add_parser(
        "run",
        help="the worker: Kafka in, Kafka out, state in Redis",
        description="Consume ChunkRecords, publish OpenAI payloads. Every flag can also "
        "be set as DERENDER_<FLAG> (dashes as underscores).",
    )
    add_flags(p)


def _run(args: argparse.Namespace) -> int:
    import logging

    from worker.adapters.state.redis_store import RedisStore
    from worker.flags import secret_values
    from worker.observe.logs import configure
    from worker.observe.metrics import Metrics, serve
    from worker.run.runner import Runner
    from worker.settings import FLAGS, from_args

    settings = from_args(args)
    configure(
        settings.log_format,
        settings.log_level,
        os.environ.get(PROCESS_INDEX_ENV),
        secret_values(FLAGS, settings),
    )
    log = logging.getLogger("derender.worker")
    if settings.processes > 1:
        from worker.run.processes import Supervisor

        log.info("settings: %s", settings.redacted())
        return asyncio.run(Supervisor(settings).run())
    registry = load_registry(settings.models)
    registry.max_output_bytes = settings.max_output_bytes
    tune_gc()
    log.info("models: %s (default %s)", ", ".join(registry.models), registry.default)
    log.info("settings: %s", settings.redacted())

    async def main() -> int:
        store = RedisStore(
            settings.redis_url,
            ttl_s=settings.state_ttl_s,
            done_ttl_s=settings.done_ttl_s,
            key_prefix=settings.state_prefix,
            mode=settings.redis_mode,
            wait_replicas=settings.redis_wait_replicas,
            wait_timeout_s=settings.redis_wait_timeout_ms / 1000,
        )
        metrics = Metrics()
        server = None
        if settings.metrics_port:
            server = await serve(metrics, settings.metrics_host, settings.metrics_port)
        try:
            return await Runner(settings, registry, store, metrics).run()
        finally:
            if server is not None:
                server.close()
                await server.wait_closed()

    with asyncio.Runner(loop_factory=event_loop_factory(settings.event_loop)) as runner:
        return runner.run(main())


def _add_serve(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from worker.serve.command import add_flags

    p = sub.add_parser(
        "serve",
        help="vLLM's derender endpoints over HTTP (same core and registry as run)",
        description="POST /v1/chat/completions/derender and /v1/completions/derender with "
        "vLLM 0.33's bodies, plus /v1/models, /health and /metrics. Every flag can also be "
        "set as DERENDER_<FLAG> (dashes as underscores).",
    )
    add_flags(p)


def _serve(args: argparse.Namespace) -> int:
    from worker.serve.command import run

    return run(args)


def event_loop_factory(choice: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The loop `run` runs on: uvloop when asked for or (auto) installed; None = asyncio's."""
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise SettingsError("--event-loop uvloop: uvloop is not installed") from None
        return None
    return uvloop.new_event_loop


def _add_check(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "check",
        help="health probe: exit 0 when the worker's loop is alive (or ready, with --ready)",
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument(
        "--metrics-port", type=int, default=int(_env_default("metrics-port", "9400") or 9400)
    )
    p.add_argument("--ready", action="store_true", help="probe /readyz instead of /healthz")
    p.add_argument("--timeout-s", type=float, default=3.0)


def _check(args: argparse.Namespace) -> int:
    import urllib.error
    import urllib.request

    path = "/readyz" if args.ready else "/healthz"
    url = f"http://{args.host}:{args.metrics_port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=args.timeout_s) as resp:
            ok = resp.status == 200
    except (urllib.error.URLError, OSError) as exc:
        print(f"derender-worker check: {url}: {exc}", file=sys.stderr)
        return 1
    if not ok:
        print(f"derender-worker check: {url}: not healthy", file=sys.stderr)
    return 0 if ok else 1


def _add_publish(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "publish",
        help="send ChunkRecords (JSONL) or raw vLLM generate SSE lines to the input topic",
        description="Lines are ChunkRecords (a missing seq is assigned per request) or "
        "vLLM generate SSE lines (`data: {...}`; `data: [DONE]` ends the requests).",
    )
    p.add_argument("input", nargs="?", default="-", help="file, or - for stdin")
    p.add_argument(
        "--bootstrap-servers", default=_env_default("bootstrap-servers", "localhost:9092")
    )
    p.add_argument("--topic", default=_env_default("input-topic", constants.INPUT_TOPIC))
    p.add_argument("--request-id", help="SSE input: the request id (default: each event's)")
    p.add_argument(
        "--context",
        help="SSE input: JSON object merged into each request's first record "
        "(model, api, chat_request, prompt_token_ids, …)",
    )
    p.add_argument(
        "--traceparent",
        help="W3C traceparent header on every record (the worker's outputs continue its trace)",
    )
    p.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        type=_header,
        help="a record header on every record (tracestate, baggage, a tenant id); repeatable",
    )
    p.add_argument(
        "--control-topic",
        default=_env_default("control-topic"),
        help="follow the worker's early-stop records and hold back the chunks of a request "
        "it stopped (README: Early stop)",
    )
    add_security_flags(p)


def _kafka_security(args: argparse.Namespace) -> tuple[KafkaSecurity, dict[str, Any]]:
    """`publish` and `tail`: `run`'s security flags, and the aiokafka options they make."""
    from worker.adapters.broker.kafka import security_kwargs
    from worker.settings import security_from_args

    sec = security_from_args(args)
    return sec, security_kwargs(sec)


async def _check_login(args: argparse.Namespace, sec: KafkaSecurity, kw: dict[str, Any]) -> None:
    """A refused certificate or login as one line (exit 2), not aiokafka's "Unable to
    bootstrap" after its retries."""
    from worker.adapters.broker.kafka_access import check_login

    await check_login(args.bootstrap_servers, sec, kw)


def _header(raw: str) -> tuple[str, str]:
    name, sep, value = raw.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {raw!r}")
    return name, value


def _publish(args: argparse.Namespace) -> int:
    import json

    from worker.tools.publisher import SSE_DATA, Publisher, sse_records

    src = sys.stdin if args.input == "-" else open(args.input, encoding="utf-8")  # noqa: SIM115
    try:
        lines = [line for line in src if line.strip()]
    finally:
        if src is not sys.stdin:
            src.close()
    sec, kw = _kafka_security(args)
    context = json.loads(args.context) if args.context else None
    if lines and lines[0].lstrip().startswith(SSE_DATA):
        records = list(sse_records(lines, context, args.request_id))
    else:
        records = [json.loads(line) for line in lines]

    async def main() -> int:
        headers = dict(args.header)
        if args.traceparent:
            headers["traceparent"] = args.traceparent
        await _check_login(args, sec, kw)
        async with Publisher(
            args.bootstrap_servers, args.topic, headers, control_topic=args.control_topic, **kw
        ) as pub:
            for rec in records:
                await pub.record(rec)
        if pub.held_back:
            print(
                f"held back {pub.held_back} records ({pub.tokens_held_back} tokens) of "
                "requests the worker had stopped",
                file=sys.stderr,
            )
        return pub.sent

    sent = asyncio.run(main())
    print(f"published {sent} records to {args.topic}", file=sys.stderr)
    return 0


def _add_tail(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "tail",
        help="read the output topic, drop repeated (request_id, seq, part), print each "
        "request's text at its [DONE] (or every record with --raw)",
    )
    p.add_argument(
        "--bootstrap-servers", default=_env_default("bootstrap-servers", "localhost:9092")
    )
    p.add_argument("--topic", default=_env_default("output-topic", constants.OUTPUT_TOPIC))
    p.add_argument("--raw", action="store_true", help="print records as JSON lines")
    p.add_argument("--latest", action="store_true", help="start at the end, not the beginning")
    p.add_argument("--idle-exit-s", type=float, help="stop after this long without records")
    p.add_argument("--requests", type=int, help="stop after this many requests finished")
    add_security_flags(p)


def _tail(args: argparse.Namespace) -> int:
    from worker.tools.tail import tail

    sec, kw = _kafka_security(args)

    async def main() -> int:
        await _check_login(args, sec, kw)
        return await tail(
            args.bootstrap_servers,
            args.topic,
            sys.stdout,
            raw=args.raw,
            from_beginning=not args.latest,
            idle_exit_s=args.idle_exit_s,
            max_requests=args.requests,
            **kw,
        )

    done = asyncio.run(main())
    print(f"tail: {done} requests finished", file=sys.stderr)
    return 0


def _add_demo(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "demo",
        help="everything on one machine: broker, Redis, a worker, a sample streamed live",
    )
    p.add_argument("--short", action="store_true", help="two requests instead of four")
    p.add_argument("--fast", action="store_true", help="publish as fast as possible (no pacing)")


def _demo(args: argparse.Namespace) -> int:
    from worker.tools.demo import run_demo

    return run_demo(sys.stdout, short=args.short, pace=not args.fast)


def _add_servers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "servers",
        help="a local Kafka broker and redis-server for development, until Ctrl-C",
        description="Starts a broker (Apache Kafka when java and mvn are installed, else "
        "tansu) and redis-server on 127.0.0.1, creates the worker's default topics, prints "
        "KAFKA_BOOTSTRAP_SERVERS=… and REDIS_URL=… on stdout once both accept connections, "
        "and stops both on Ctrl-C or SIGTERM.",
    )
    p.add_argument(
        "--kafka",
        choices=("apache", "tansu"),
        help="the broker (default: apache when java and mvn are installed, else tansu)",
    )
    p.add_argument(
        "--data-dir",
        type=Path,
        metavar="DIR",
        help="keep the broker's log and Redis's data here, across runs (Apache Kafka only)",
    )
    p.add_argument(
        "--kafka-port", type=int, metavar="N", help="the broker's port (default: a free one)"
    )
    p.add_argument(
        "--redis-port",
        type=int,
        metavar="N",
        help="redis-server's port (default: a free one; with --redis-cluster, the first of "
        "2N consecutive ports)",
    )
    p.add_argument(
        "--redis-cluster",
        type=int,
        metavar="N",
        help="a Redis Cluster of N masters with a replica each instead of one redis-server; "
        "REDIS_URL is then its seed list (run the worker with --redis-mode cluster)",
    )


def _servers(args: argparse.Namespace) -> int:
    from worker.tools.servers import Options, run_servers

    options = Options(
        args.kafka, args.data_dir, args.kafka_port, args.redis_port, args.redis_cluster
    )
    return run_servers(options)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="derender-worker",
        description="Turn LLM engine token streams into OpenAI-shaped responses.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_run(sub)
    _add_replay(sub)
    _add_serve(sub)
    _add_check(sub)
    _add_publish(sub)
    _add_tail(sub)
    _add_demo(sub)
    _add_servers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.command == "replay":
            return _replay(args)
        if args.command == "run":
            return _run(args)
        if args.command == "serve":
            return _serve(args)
        if args.command == "check":
            return _check(args)
        if args.command == "publish":
            return _publish(args)
        if args.command == "tail":
            return _tail(args)
        if args.command == "demo":
            return _demo(args)
        if args.command == "servers":
            return _servers(args)
    except (ConfigError, RunConfigError, SettingsError) as exc:
        print(f"derender-worker: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except (OSError, ValueError) as exc:
        print(f"derender-worker: {exc}", file=sys.stderr)
        return 2
    return 2
