"""`derender-worker check`: the health probe of a running worker (its metrics port)."""

from __future__ import annotations

import argparse
import sys

from worker.errors import EXIT_FAILED, EXIT_OK
from worker.flags import Command, Flag

FLAGS: list[Flag] = [
    Flag("host", "127.0.0.1", "address of the worker's metrics server"),
    Flag("metrics-port", 9400, "the worker's --metrics-port", int),
    Flag("ready", False, "probe /readyz instead of /healthz", kind="switch"),
    Flag("timeout-s", 3.0, "how long the probe waits for an answer", float),
]


def run(args: argparse.Namespace) -> int:
    import urllib.error
    import urllib.request

    path = "/readyz" if args.ready else "/healthz"
    url = f"http://{args.host}:{args.metrics_port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=args.timeout_s) as resp:
            ok = resp.status == 200
    except (urllib.error.URLError, OSError) as exc:
        print(f"derender-worker check: {url}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if not ok:
        print(f"derender-worker check: {url}: not healthy", file=sys.stderr)
    return EXIT_OK if ok else EXIT_FAILED


COMMAND = Command(
    "check",
    "health probe: exit 0 when the worker's loop is alive (or ready, with --ready)",
    None,
    FLAGS,
    run,
)
