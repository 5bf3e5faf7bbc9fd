"""`derender-worker serve`: vLLM's derender endpoints over HTTP. Its flags (each also
`DERENDER_<FLAG>`, as `run`'s), its settings and its main."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import ssl
from dataclasses import dataclass
from typing import Any

from worker.flags import (
    Command,
    Flag,
    SettingsError,
    add_flag_list,
    read_secret_files,
    secret_values,
)

# --ssl-cert-reqs: what a client must show (uvicorn's ssl_cert_reqs, as names).
CERT_REQS = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}

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
    Flag(
        "ssl-certfile",
        None,
        "serve HTTPS with this certificate (PEM, the chain after it; uvicorn's --ssl-certfile)",
    ),
    Flag("ssl-keyfile", None, "the certificate's private key (PEM)"),
    Flag("ssl-keyfile-password", None, "the password of an encrypted --ssl-keyfile", secret=True),
    Flag(
        "ssl-ca-certs",
        None,
        "CA bundle that client certificates must be signed by (with --ssl-cert-reqs)",
    ),
    Flag(
        "ssl-cert-reqs",
        "none",
        "client certificates: none, optional (checked when shown) or required (mutual TLS)",
    ),
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
    ssl_certfile: str | None
    ssl_keyfile: str | None
    ssl_keyfile_password: str | None
    ssl_ca_certs: str | None
    ssl_cert_reqs: str
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
    add_flag_list(parser, SERVE_FLAGS, environ)


def tls_options(s: ServeSettings) -> dict[str, Any]:
    """uvicorn.Config's TLS options (none: plain HTTP)."""
    if not s.ssl_certfile:
        return {}
    return {
        "ssl_certfile": s.ssl_certfile,
        "ssl_keyfile": s.ssl_keyfile,
        "ssl_keyfile_password": s.ssl_keyfile_password,
        "ssl_ca_certs": s.ssl_ca_certs,
        "ssl_cert_reqs": CERT_REQS[s.ssl_cert_reqs],
    }


def _check_tls(s: ServeSettings) -> None:
    if s.ssl_cert_reqs not in CERT_REQS:
        raise SettingsError(
            f"--ssl-cert-reqs: expected none, optional or required, got {s.ssl_cert_reqs!r}"
        )
    if not s.ssl_certfile and (s.ssl_keyfile or s.ssl_ca_certs or s.ssl_cert_reqs != "none"):
        raise SettingsError("--ssl-keyfile, --ssl-ca-certs and --ssl-cert-reqs need --ssl-certfile")
    if s.ssl_cert_reqs != "none" and not s.ssl_ca_certs:
        raise SettingsError(f"--ssl-cert-reqs {s.ssl_cert_reqs} needs --ssl-ca-certs")
    for flag, path in (
        ("--ssl-certfile", s.ssl_certfile),
        ("--ssl-keyfile", s.ssl_keyfile),
        ("--ssl-ca-certs", s.ssl_ca_certs),
    ):
        if path is not None and not os.access(path, os.R_OK):
            raise SettingsError(f"{flag}: cannot read {path}")


def from_args(args: argparse.Namespace) -> ServeSettings:
    read_secret_files(args, SERVE_FLAGS)
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
    _check_tls(s)
    return s


def run(args: argparse.Namespace) -> int:
    from worker.commands.common import event_loop_factory, tune_gc
    from worker.config import load_registry
    from worker.observe import http_server
    from worker.observe.logs import configure
    from worker.serve.app import build_app, http_protocol

    s = from_args(args)
    configure(s.log_format, s.log_level, None, secret_values(SERVE_FLAGS, s))
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
        try:
            server = await http_server.start(
                app,
                s.host,
                s.port,
                http=http_protocol(app),
                timeout_keep_alive=s.timeout_keep_alive,
                **tls_options(s),
            )
        except ssl.SSLError as exc:  # a key that is not the certificate's, a wrong password
            log.error("cannot serve: TLS: %s (check --ssl-certfile and --ssl-keyfile)", exc)
            return 2
        scheme = "https" if s.ssl_certfile else "http"
        # The bound port on stdout (useful with --port 0), and in the log.
        print(f"DERENDER_SERVE_URL={scheme}://{s.host}:{server.port}", flush=True)
        log.info("serving on %s://%s:%d", scheme, s.host, server.port)
        await stop.wait()
        server.close()
        await server.wait_closed()
        log.info("stopped")
        return 0

    with asyncio.Runner(loop_factory=event_loop_factory(s.event_loop)) as runner:
        return runner.run(main())


COMMAND = Command(
    "serve",
    "vLLM's derender endpoints over HTTP (same core and registry as run)",
    "POST /v1/chat/completions/derender and /v1/completions/derender with vLLM 0.33's "
    "bodies, /v1/responses/derender and /v1/messages/derender (the Responses and Messages "
    "APIs), plus /v1/models, /health and /metrics. Every flag can also be set as "
    "DERENDER_<FLAG> (dashes as underscores).",
    SERVE_FLAGS,
    run,
)
