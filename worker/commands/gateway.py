"""`derender-worker gateway`: the OpenAI-compatible front door of the disaggregated loop
(worker/gateway/): render and generate on a vLLM engine, records to the input topic, each
client its own outputs from this replica's reply partitions."""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING

from worker import constants
from worker.errors import ConfigError
from worker.flags import Command, Flag, SettingsError, read_secret_files, secret_values
from worker.settings import security_flags

if TYPE_CHECKING:
    from worker.gateway.service import GatewayConfig

FLAGS: list[Flag] = [
    Flag(
        "engine-url",
        None,
        "the vLLM engine (started with --enable-scale-out): /inference/v1/generate, "
        "/inference/v1/abort_requests and /v1/models (required)",
    ),
    Flag(
        "render-url",
        None,
        "where the engine's /v1/…/render endpoints are (default: "
        "--engine-url; a vLLM render-only server works too)",
    ),
    Flag(
        "engine-api-key",
        None,
        "the engine's --api-key, sent as `Authorization: Bearer <key>`",
        secret=True,
    ),
    Flag(
        "engine-timeout-s",
        300.0,
        "the longest the engine may take to connect, answer or send the next event",
        float,
    ),
    Flag("bootstrap-servers", "localhost:9092", "Kafka bootstrap servers, comma-separated"),
    Flag("input-topic", constants.INPUT_TOPIC, "the worker's input topic (the gateway writes)"),
    Flag("output-topic", constants.OUTPUT_TOPIC, "the worker's output topic (the gateway reads)"),
    Flag(
        "control-topic",
        None,
        "follow the worker's control topic (its --control-topic): a streamed request the "
        "worker finished early (a stop string, a failure) has its engine request aborted at "
        "once, and still gets its `end` (default: off)",
    ),
    Flag(
        "reply-partitions",
        None,
        "the output-topic partitions this replica owns and reads, e.g. 0-7 or 0,2,4 "
        "(default: all, for one replica); each request names one as its reply partition",
        metavar="SPEC",
    ),
    Flag(
        "reply-timeout-s",
        30.0,
        "no output for this long while the worker holds unanswered records: the client "
        "gets an error (504) and the engine request is aborted",
        float,
    ),
    Flag("host", "0.0.0.0", "address to bind"),
    Flag("port", 8080, "port to bind (0: a free one)", int),
    Flag(
        "api-key",
        None,
        "require `Authorization: Bearer <key>` on /v1 paths (vLLM's --api-key); never logged",
        secret=True,
    ),
    Flag("max-body-bytes", 8 * 1024 * 1024, "larger request bodies are refused (413)", int),
    Flag("event-loop", "auto", "auto (uvloop when installed, else asyncio), uvloop or asyncio"),
    Flag("log-format", "text", "text or json"),
    Flag("log-level", "INFO", "DEBUG, INFO, WARNING or ERROR"),
    *security_flags(),
]


def config(args: argparse.Namespace) -> GatewayConfig:
    """The gateway's configuration from its flags (SettingsError on a bad value)."""
    from worker.commands.common import kafka_security
    from worker.gateway.replies import parse_partitions
    from worker.gateway.service import GatewayConfig

    read_secret_files(args, FLAGS)
    if not args.engine_url:
        raise SettingsError("--engine-url is required (or DERENDER_ENGINE_URL)")
    for flag, url in (("--engine-url", args.engine_url), ("--render-url", args.render_url)):
        if url and not url.startswith(("http://", "https://")):
            raise SettingsError(f"{flag}: expected an http:// or https:// URL, got {url!r}")
    if not 0 <= args.port <= 65535:
        raise SettingsError(f"--port: {args.port} is not a port")
    for flag, value in (
        ("--reply-timeout-s", args.reply_timeout_s),
        ("--engine-timeout-s", args.engine_timeout_s),
    ):
        if not value > 0:
            raise SettingsError(f"{flag} must be positive")
    if args.max_body_bytes < 1:
        raise SettingsError("--max-body-bytes must be at least 1")
    if args.api_key == "":
        raise SettingsError("--api-key must not be empty")
    if args.log_format not in ("text", "json"):
        raise SettingsError(f"--log-format: expected text or json, got {args.log_format!r}")
    if args.event_loop not in ("auto", "uvloop", "asyncio"):
        raise SettingsError(
            f"--event-loop: expected auto, uvloop or asyncio, got {args.event_loop!r}"
        )
    _, kafka = kafka_security(args)
    return GatewayConfig(
        engine_url=args.engine_url,
        render_url=args.render_url,
        engine_api_key=args.engine_api_key,
        engine_timeout_s=args.engine_timeout_s,
        bootstrap_servers=args.bootstrap_servers,
        input_topic=args.input_topic,
        output_topic=args.output_topic,
        reply_partitions=parse_partitions(args.reply_partitions),
        reply_timeout_s=args.reply_timeout_s,
        host=args.host,
        port=args.port,
        api_key=args.api_key,
        max_body_bytes=args.max_body_bytes,
        kafka=kafka,
        control_topic=args.control_topic or None,
    )


def run(args: argparse.Namespace) -> int:
    from aiokafka import errors

    from worker.adapters.broker.kafka_access import check_login
    from worker.commands.common import event_loop_factory, kafka_security, tune_gc
    from worker.errors import Unreachable
    from worker.gateway import service
    from worker.observe.logs import configure

    c = config(args)
    configure(args.log_format, args.log_level, None, secret_values(FLAGS, args))
    sec, kw = kafka_security(args)
    try:
        # A refused certificate or login as one line, not aiokafka's "Unable to bootstrap".
        asyncio.run(check_login(c.bootstrap_servers, sec, kw))
        tune_gc()  # (every streamed token makes a few dozen short-lived objects)
        return service.run(c, event_loop_factory(args.event_loop))
    except errors.KafkaConnectionError as exc:
        raise Unreachable(f"cannot reach the broker at {c.bootstrap_servers}: {exc}") from None
    except errors.KafkaError as exc:
        raise ConfigError(f"the broker refused: {exc}") from None


COMMAND = Command(
    "gateway",
    "an OpenAI-compatible server in front of the loop: vLLM renders and generates, "
    "the worker derenders, each client streams its own outputs",
    "POST /v1/chat/completions, /v1/completions, /v1/responses and /v1/messages (stream "
    "true and false), GET /v1/models "
    "(the engine's), /health and /metrics. A request is rendered and generated on the "
    "engine, each generate event published as a ChunkRecord, and answered from the "
    "output topic's reply partitions this replica owns (docs/integrate/gateway.md).",
    FLAGS,
    run,
)
