"""`derender-worker demo`: a broker, Redis, a worker and a sample, all on this machine."""

from __future__ import annotations

import argparse
import sys

from worker.flags import Command, Flag, SettingsError

FLAGS: list[Flag] = [
    Flag(
        "short",
        False,
        "fewer requests: the first two and the one a stop string ends early",
        kind="switch",
    ),
    Flag("fast", False, "publish as fast as possible (no pacing)", kind="switch"),
    Flag(
        "engine-url",
        None,
        "a running vLLM engine (--enable-scale-out): the questions go through a gateway to "
        "it instead of the recorded answers (`make demo ENGINE=vllm` starts one)",
        # (not DERENDER_ENGINE_URL: a gateway's setting must not change what `demo` does)
        variable="DERENDER_DEMO_ENGINE_URL",
    ),
    Flag(
        "models",
        None,
        "with --engine-url: the worker's model registry (TOML) when the engine's model is "
        "not in the built-in one",
        variable="DERENDER_DEMO_MODELS",
    ),
]


def run(args: argparse.Namespace) -> int:
    if args.engine_url:
        if not args.engine_url.startswith(("http://", "https://")):
            raise SettingsError(
                f"--engine-url: expected an http:// or https:// URL, got {args.engine_url!r}"
            )
        from worker.tools.demo_engine import run_engine_demo

        return run_engine_demo(args.engine_url, args.models, short=args.short)
    from worker.tools.demo import run_demo

    return run_demo(sys.stdout, short=args.short, pace=not args.fast)


COMMAND = Command(
    "demo",
    "everything on one machine: broker, Redis, a worker, a sample streamed live",
    None,
    FLAGS,
    run,
)
