"""`derender-worker serve` flags (each also `DERENDER_<FLAG>`, as `run`'s) and its main."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
from dataclasses import dataclass
from typing import Any

from worker.settings import Flag, SettingsError

SERVE_FLAGS: list[Flag] = [
    Flag("host", "0.0.0.0", "address to bind"),
    Flag("port", 8000, "port to bind (vLLM's default)", int),
    Flag("models", None, "model registry TOML (default: the built-in DeepSeek V4 entry)"),
    Flag(
        "api-key",
        None,
        "require `Authorization: Bearer <key>` on /v1 paths (vLLM's --api-key); never logged",
        secret=True,
    ),
    Flag(
        "state-key",
        None,
        "secret that keys the stream_state tags (share it across replicas behind one "
        "balancer): a client cannot forge a state another one could use; unset, a state "
        "is still bound to its request and checked for damage",
        secret=True,
    ),
    Flag("max-body-bytes", 8 * 1024 * 1024, "larger request bodies are refused (413)", int),
    Flag(
        "max-output-bytes",
        64 * 1024 * 1024,
        "a response body larger than this fails its request (400)",
        int,
    ),
    Flag("timeout-keep-alive", 5, "seconds an idle keep-alive connection is kept", int),
    Flag("event-loop", "auto", "auto (uvloop when installed, else asyncio), uvloop or asyncio"),
    Flag("log-format", "text", "text or json"),
    Flag("log-level", "INFO", "DEBUG, INFO, WARNING or ERROR"),
]


@dataclass(frozen=True)
class ServeSettings:
    host: str
    port: int
    models: str | None
    api_key: str | None
    state_key: str | None
    max_body_bytes: int
    max_output_bytes: int
    timeout_keep_alive: int
    event_loop: str
    log_format: str
    log_level: str

    def redacted(self) -> dict[str, Any]:
        secret = {f.attr for f in SERVE_FLAGS if f.secret}
        return {
            f.attr: ("***" if f.attr in secret and getattr(self, f.attr) else getattr(self, f.attr))
            for f in SERVE_FLAGS
        }


def add_flags(parser: argparse.ArgumentParser, environ: dict[str, str] | None = None) -> None:
    env = os.environ if environ is None else environ
    for f in SERVE_FLAGS:
        raw = env.get(f.env)
        try:
            default = f.default if raw is None else f.type(raw)
        except ValueError:
            raise SettingsError(f"{f.env}: invalid value {raw!r}") from None
        shown = "***" if f.secret and f.default else repr(f.default)
        parser.add_argument(
            f"--{f.name}",
            type=f.type,
            default=default,
            help=f"{f.help} [env {f.env}; default {shown}]",
        )


def from_args(args: argparse.Namespace) -> ServeSettings:
    s = ServeSettings(**{f.attr: getattr(args, f.attr) for f in SERVE_FLAGS})
    if not 0 <= s.port <= 65535:
        raise SettingsError(f"--port: {s.port} is not a port")
    if s.max_body_bytes < 1 or s.max_output_bytes < 1:
        raise SettingsError("--max-body-bytes and --max-output-bytes must be at least 1")
    if s.event_loop not in ("auto", "uvloop", "asyncio"):
        raise SettingsError(f"--event-loop: expected auto, uvloop or asyncio, got {s.event_loop!r}")
    if s.log_format not in ("text", "json"):
        raise SettingsError(f"--log-format: expected text or json, got {s.log_format!r}")
    if s.api_key == "":
        raise SettingsError("--api-key must not be empty")
    return s


def run(args: argparse.Namespace) -> int:
    from worker.cli import event_loop_factory, tune_gc
    from worker.config import load_registry
    from worker.observe import http_server
    from worker.observe.logs import configure
    from worker.serve.app import build_app

    s = from_args(args)
    configure(s.log_format, s.log_level, None)
    log = logging.getLogger("derender.serve")
    registry = load_registry(s.models)
    registry.max_output_bytes = s.max_output_bytes
    tune_gc()
    log.info("models: %s (default %s)", ", ".join(registry.models), registry.default)
    log.info("settings: %s", s.redacted())
    app = build_app(
        registry,
        api_key=s.api_key,
        state_secret=s.state_key,
        max_body_bytes=s.max_body_bytes,
    )
    from worker.observe.tracing import TracingUnavailable, setup

    try:
        tracing = setup()  # a SERVER span per request when OTEL_* asks (worker/observe/tracing.py)
    except TracingUnavailable as exc:
        log.error("cannot serve: %s", exc)
        return 2
    if tracing is not None:
        app = tracing.server_spans(app)

    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        server = await http_server.start(
            app, s.host, s.port, timeout_keep_alive=s.timeout_keep_alive
        )
        # The bound port on stdout (useful with --port 0), and in the log.
        print(f"DERENDER_SERVE_URL=http://{s.host}:{server.port}", flush=True)
        log.info("serving on http://%s:%d", s.host, server.port)
        await stop.wait()
        server.close()
        await server.wait_closed()
        log.info("stopped")
        return 0

    with asyncio.Runner(loop_factory=event_loop_factory(s.event_loop)) as runner:
        return runner.run(main())
