"""`derender-worker demo`: a broker, Redis, a worker and a sample, all on this machine."""

from __future__ import annotations

import argparse
import sys

from worker.flags import Command, Flag

FLAGS: list[Flag] = [
    Flag(
        "short",
        False,
        "fewer requests: the first two and the one a stop string ends early",
        kind="switch",
    ),
    Flag("fast", False, "publish as fast as possible (no pacing)", kind="switch"),
]


def run(args: argparse.Namespace) -> int:
    from worker.tools.demo import run_demo

    return run_demo(sys.stdout, short=args.short, pace=not args.fast)


COMMAND = Command(
    "demo",
    "everything on one machine: broker, Redis, a worker, a sample streamed live",
    None,
    FLAGS,
    run,
)
