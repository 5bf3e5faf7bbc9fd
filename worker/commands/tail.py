"""`derender-worker tail`: read the output topic as a consumer should (repeats dropped),
and print each request's text at its end (or every record, with --raw)."""

from __future__ import annotations

import argparse
import sys

from worker import constants
from worker.flags import Command, Flag
from worker.settings import security_flags

FLAGS: list[Flag] = [
    Flag("bootstrap-servers", "localhost:9092", "Kafka bootstrap servers, comma-separated"),
    Flag(
        "topic",
        constants.OUTPUT_TOPIC,
        "the worker's output topic",
        variable="DERENDER_OUTPUT_TOPIC",
    ),
    Flag("raw", False, "print records as JSON lines", kind="switch"),
    Flag("latest", False, "start at the end, not the beginning", kind="switch"),
    Flag("idle-exit-s", None, "stop after this long without records", float),
    Flag("requests", None, "stop after this many requests finished", int),
    *security_flags(),
]


def run(args: argparse.Namespace) -> int:
    from worker.adapters.broker.kafka_access import check_login
    from worker.commands.common import kafka_security, run_against_broker
    from worker.tools.tail import tail

    sec, kw = kafka_security(args)

    async def main() -> int:
        # A refused certificate or login as one line, not aiokafka's "Unable to bootstrap".
        await check_login(args.bootstrap_servers, sec, kw)
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

    done = run_against_broker(args.bootstrap_servers, main())
    print(f"tail: {done} requests finished", file=sys.stderr)
    return 0


COMMAND = Command(
    "tail",
    "read the output topic, drop repeated (request_id, seq, part), print each request's "
    "text at its [DONE] (or every record with --raw)",
    None,
    FLAGS,
    run,
)
