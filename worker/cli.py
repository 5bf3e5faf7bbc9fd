"""The `derender-worker` command line (CONTRACT.md §8)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from worker.config import ConfigError, load_registry

ENV_PREFIX = "DERENDER_"


def _env_default(flag: str, default: str | None = None) -> str | None:
    """Every flag can also come from `DERENDER_<FLAG>` (dashes → underscores)."""
    return os.environ.get(ENV_PREFIX + flag.upper().replace("-", "_"), default)


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


def _replay(args: argparse.Namespace) -> int:
    from worker.adapters.files import load_state_file, save_state_file
    from worker.replay import replay

    registry = load_registry(args.models)
    states = load_state_file(args.state) if args.state else {}
    src = sys.stdin.buffer if args.input == "-" else open(args.input, "rb")  # noqa: SIM115
    dst = sys.stdout.buffer if args.output == "-" else open(args.output, "wb")  # noqa: SIM115
    try:
        summary = replay(
            src,
            dst,
            registry,
            states,
            name=args.input,
            progress=None if args.quiet else sys.stderr,
        )
    finally:
        if src is not sys.stdin.buffer:
            src.close()
        if dst is not sys.stdout.buffer:
            dst.close()
        else:
            dst.flush()
    if args.state:
        save_state_file(args.state, states)
    if not args.quiet:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(summary.results.items()))
        print(
            f"replay: {summary.records} records ({counts}), {summary.outputs} outputs, "
            f"{summary.tokens} tokens in {summary.seconds:.2f}s",
            file=sys.stderr,
        )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="derender-worker",
        description="Turn LLM engine token streams into OpenAI-shaped responses.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_replay(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "replay":
            return _replay(args)
    except ConfigError as exc:
        print(f"derender-worker: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"derender-worker: {exc}", file=sys.stderr)
        return 2
    return 2
