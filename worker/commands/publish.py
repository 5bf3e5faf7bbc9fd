"""`derender-worker publish`: ChunkRecords (JSONL) or vLLM generate SSE lines to the
input topic."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from worker import constants
from worker.errors import ConfigError
from worker.flags import Command, Flag
from worker.settings import security_flags


def header(raw: str) -> tuple[str, str]:
    name, sep, value = raw.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {raw!r}")
    return name, value


FLAGS: list[Flag] = [
    Flag("input", "-", "file, or - for stdin", kind="positional"),
    Flag("bootstrap-servers", "localhost:9092", "Kafka bootstrap servers, comma-separated"),
    Flag(
        "topic",
        constants.INPUT_TOPIC,
        "the worker's input topic",
        variable="DERENDER_INPUT_TOPIC",
    ),
    Flag("request-id", None, "SSE input: the request id (default: each event's)"),
    Flag(
        "context",
        None,
        "SSE input: JSON object merged into each request's first record (model, api, "
        "chat_request, prompt_token_ids, …)",
    ),
    Flag(
        "traceparent",
        None,
        "W3C traceparent header on every record (the worker's outputs continue its trace)",
    ),
    Flag(
        "header",
        None,
        "a record header on every record (tracestate, baggage, a tenant id); repeatable",
        header,
        kind="repeated",
        metavar="NAME=VALUE",
    ),
    Flag(
        "control-topic",
        None,
        "follow the worker's early-stop records and hold back the chunks of a request it "
        "stopped (docs/integrate/control.md)",
    ),
    *security_flags(),
]


def _context(raw: str | None) -> dict[str, Any] | None:
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ConfigError(f"--context: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ConfigError("--context: expected a JSON object")
    return value


def records(lines: list[str], name: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The records to send: SSE events turned into ChunkRecords, or one per JSONL line."""
    from worker.tools.publisher import SSE_DATA, sse_records

    context = _context(args.context)
    if lines and lines[0].lstrip().startswith(SSE_DATA):
        try:
            return list(sse_records(lines, context, args.request_id))
        except ValueError as exc:
            raise ConfigError(f"{name}: {exc}") from None
    out = []
    for number, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise ConfigError(f"{name}: line {number}: not JSON ({exc})") from None
        if not isinstance(record, dict):
            raise ConfigError(f"{name}: line {number}: expected a JSON object")
        out.append(record)
    return out


def run(args: argparse.Namespace) -> int:
    from worker.adapters.broker.kafka_access import check_login
    from worker.commands.common import kafka_security, read_text_lines, run_against_broker
    from worker.tools.publisher import Publisher

    lines = read_text_lines(args.input, sys.stdin)
    sec, kw = kafka_security(args)
    to_send = records(lines, "stdin" if args.input == "-" else args.input, args)

    async def main() -> int:
        headers = dict(args.header or [])
        if args.traceparent:
            headers["traceparent"] = args.traceparent
        # A refused certificate or login as one line, not aiokafka's "Unable to bootstrap".
        await check_login(args.bootstrap_servers, sec, kw)
        async with Publisher(
            args.bootstrap_servers, args.topic, headers, control_topic=args.control_topic, **kw
        ) as pub:
            for rec in to_send:
                await pub.record(rec)
        if pub.held_back:
            print(
                f"held back {pub.held_back} records ({pub.tokens_held_back} tokens) of "
                "requests the worker had stopped",
                file=sys.stderr,
            )
        return pub.sent

    sent = run_against_broker(args.bootstrap_servers, main())
    print(f"published {sent} records to {args.topic}", file=sys.stderr)
    return 0


COMMAND = Command(
    "publish",
    "send ChunkRecords (JSONL) or raw vLLM generate SSE lines to the input topic",
    "Lines are ChunkRecords (a missing seq is assigned per request) or vLLM generate SSE "
    "lines (`data: {...}`; `data: [DONE]` ends the requests).",
    FLAGS,
    run,
)
