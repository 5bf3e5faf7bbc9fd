"""`derender-worker replay`: ChunkRecords from a JSONL file, derendered offline (the
state in memory), written as `run` would publish them."""

from __future__ import annotations

import argparse
import os
import sys
from typing import IO

from worker.errors import ConfigError
from worker.flags import Command, Flag

FLAGS: list[Flag] = [
    Flag("input", "-", "input JSONL file, or - for stdin", kind="positional"),
    Flag("output", "-", "output JSONL file, or - for stdout", short="-o"),
    Flag("models", None, "model registry TOML (default: the built-in DeepSeek V4 entry)"),
    Flag(
        "state",
        None,
        "load the in-memory state from this file first and save it after (continue a "
        "replay split in parts)",
    ),
    Flag("quiet", False, "no progress or summary on stderr", kind="switch"),
    Flag(
        "control",
        False,
        "also write the early-stop records `run --control-topic` publishes (kind control)",
        kind="switch",
    ),
    Flag(
        "pass-headers",
        None,
        "input headers the outputs carry besides the W3C trace headers, as `run`'s",
    ),
]


def _open(path: str, mode: str, std: IO[bytes]) -> IO[bytes]:
    if path == "-":
        return std
    try:
        return open(path, mode)
    except OSError as exc:
        raise ConfigError(f"cannot open {path}: {exc.strerror or exc}") from None


def run(args: argparse.Namespace) -> int:
    from worker.adapters.state.memory_store import MemoryStore
    from worker.commands.common import tune_gc
    from worker.config import load_registry
    from worker.observe.propagation import carried_names
    from worker.tools.replay import replay

    try:
        carry = carried_names(args.pass_headers)
    except ValueError as exc:
        raise ConfigError(f"--pass-headers: {exc}") from None
    registry = load_registry(args.models)
    tune_gc()
    store = MemoryStore()
    if args.state and os.path.exists(args.state):
        try:
            with open(args.state, "rb") as f:
                store.load(f.read())
        except OSError as exc:
            raise ConfigError(f"--state: cannot read {args.state}: {exc.strerror}") from None
    src = _open(args.input, "rb", sys.stdin.buffer)
    try:
        dst = _open(args.output, "wb", sys.stdout.buffer)
    except ConfigError:
        if src is not sys.stdin.buffer:
            src.close()
        raise
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


COMMAND = Command(
    "replay",
    "derender a JSONL file of ChunkRecords offline (state in memory)",
    "Input lines are ChunkRecords or {key, value, timestamp} envelopes; output lines are "
    "{key, headers, value}, byte-identical to what `run` publishes.",
    FLAGS,
    run,
)
