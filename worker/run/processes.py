"""`run --processes N`: several worker processes in one pod, under one supervisor.

One worker process is bound by one core: most of its ~24 µs of CPU per record is Python
(bench/README.md). A pod given more CPUs runs one consumer-group member per process; the
group deals the partitions out to them as it would to separate pods, and they share
nothing (a request lives in one partition). The supervisor holds no partition and no
state. It
- starts the processes: `derender-worker run` again, with its settings in `DERENDER_*`
  variables (never on a command line, where `ps` would show the secrets), metrics on a
  loopback port of their own and, with static membership, instance ids `<id>-<index>`;
- forwards SIGTERM/SIGINT, and stops them all when one exits: the pod's own supervisor
  (Kubernetes, systemd, compose) then restarts it whole, exactly as it would restart a
  single-process worker that exited;
- serves the metrics port: /metrics merges the processes' expositions, every sample
  labelled `process="<index>"`; /healthz and /readyz answer 200 only when every process
  does, so `derender-worker check` and the probes work unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from worker.observe.logs import PROCESS_INDEX_ENV
from worker.observe.metrics import Response, serve_http
from worker.run import stop_signal
from worker.run.parent_death import die_with_parent
from worker.settings import Settings, env_name, to_env

log = logging.getLogger("derender.supervisor")

# A worker process killed by an interrupt (Ctrl-C reaches the whole process group)
# stopped as asked. SIGTERM never kills one: it is held until the worker handles it.
_STOPPED_BY_US = (-signal.SIGINT,)
# A process that does not answer a scrape or probe within this long counts as down.
ASK_TIMEOUT_S = 5.0

# -- one worker process -----------------------------------------------------------------


def child_env(
    settings: Settings, index: int, metrics_port: int, base: dict[str, str]
) -> dict[str, str]:
    """The environment of worker process `index`: the supervisor's settings, as one
    process, its metrics on a loopback port (0 = off)."""
    env = dict(base)
    for name, value in to_env(settings).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    env[env_name("processes")] = "1"
    env[env_name("metrics-host")] = "127.0.0.1"
    env[env_name("metrics-port")] = str(metrics_port)
    if settings.group_instance_id:
        env[env_name("group-instance-id")] = f"{settings.group_instance_id}-{index}"
    env[PROCESS_INDEX_ENV] = str(index)
    return env


def free_loopback_port() -> int:
    # Another program could take it before the child binds it; the child then exits
    # non-zero and the whole pod restarts, which is rare and harmless.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Child:
    index: int
    port: int  # of its metrics server on 127.0.0.1 (0 = off)
    proc: asyncio.subprocess.Process

    @property
    def alive(self) -> bool:
        return self.proc.returncode is None

    async def ask(self, path: str) -> tuple[int, bytes]:
        """GET `path` from the process's metrics server: (status, body); (0, b"") when
        it is down or does not answer."""
        if not self.port or not self.alive:
            return 0, b""
        try:
            async with asyncio.timeout(ASK_TIMEOUT_S):
                reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
                try:
                    # HTTP/1.1 keeps the connection open unless asked: one answer, then EOF.
                    request = f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close"
                    writer.write(f"{request}\r\n\r\n".encode())
                    raw = await reader.read()
                finally:
                    writer.close()
        except (OSError, TimeoutError):
            return 0, b""
        head, _, body = raw.partition(b"\r\n\r\n")
        try:
            return int(head.split(None, 2)[1]), body
        except (IndexError, ValueError):
            return 0, b""


def held_until_handled(then: Callable[[], None] | None) -> Callable[[], None]:
    """A preexec hook: SIGTERM blocked in the child (a mask survives exec), then `then`.
    A stop sent while the interpreter starts is held, not fatal, until the worker's
    handler unblocks it; a child that is not the worker must unblock it itself."""

    def hook() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        if then is not None:
            then()

    return hook


# -- metrics ----------------------------------------------------------------------------


class _Families:
    """What `generate_latest` needs of a registry: families to collect."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = list(families)

    def collect(self) -> Iterable[Metric]:
        return self._families


def merge_expositions(parts: Sequence[tuple[str, bytes]]) -> bytes:
    """One exposition from several processes' (label, exposition) pairs: each family
    once, every sample labelled `process="<label>"`."""
    families: dict[str, Metric] = {}
    for label, text in parts:
        for fam in text_string_to_metric_families(text.decode()):
            merged = families.get(fam.name)
            if merged is None:
                merged = families[fam.name] = Metric(
                    fam.name, fam.documentation, fam.type, fam.unit
                )
            merged.samples.extend(
                Sample(s.name, {"process": label, **s.labels}, s.value, s.timestamp, s.exemplar)
                for s in fam.samples
            )
    return bytes(generate_latest(_Families(families.values())))


# -- the supervisor ---------------------------------------------------------------------


class Supervisor:
    def __init__(
        self,
        settings: Settings,
        command: Sequence[str] = (sys.executable, "-m", "worker", "run"),
        environ: dict[str, str] | None = None,
    ) -> None:
        self.s = settings
        self.command = list(command)
        self.environ = dict(os.environ if environ is None else environ)
        self.children: list[Child] = []
        self.stopping = False
        self.registry = CollectorRegistry(auto_describe=True)
        self.running = Gauge(
            "derender_worker_processes",
            "worker processes running under this supervisor (run --processes)",
            registry=self.registry,
        )

    def stop(self) -> None:
        """Ask every process to finish its batch, commit and leave (idempotent)."""
        self.stopping = True
        for c in self.children:
            if c.alive:
                with contextlib.suppress(ProcessLookupError):
                    c.proc.send_signal(signal.SIGTERM)

    async def run(self) -> int:
        """Until every process has exited: the first non-zero exit code (1 for a process
        killed by a signal), else 0."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self.stop)
        if stop_signal.requested():  # (one that came while the loop was starting)
            self.stop()
        log.info("starting %d worker processes", self.s.processes)
        server = None
        code = 1
        try:
            # The kernel SIGTERMs each worker process when the supervisor dies (even by
            # kill -9), so that no orphan goes on consuming; the process starts with
            # SIGTERM held until its handler is in (stop_signal.install).
            hook = held_until_handled(die_with_parent())
            for index in range(self.s.processes):
                if self.stopping:
                    break
                self.children.append(await self._spawn(index, hook))
            if self.s.metrics_port:
                server = await serve_http(self.respond, self.s.metrics_host, self.s.metrics_port)
            if self.stopping:  # a signal arrived while they were starting
                self.stop()
            code = await self._watch()
        finally:
            self.stop()
            for c in self.children:
                await c.proc.wait()
            if server is not None:
                server.close()
                await server.wait_closed()
        codes = ", ".join(str(c.proc.returncode) for c in self.children)
        log.info("stopped %d worker processes (exit codes %s)", len(self.children), codes)
        return code

    async def _spawn(self, index: int, hook: Callable[[], None]) -> Child:
        port = free_loopback_port() if self.s.metrics_port else 0
        proc = await asyncio.create_subprocess_exec(
            *self.command,
            env=child_env(self.s, index, port, self.environ),
            stdin=subprocess.DEVNULL,
            preexec_fn=hook,
        )
        self.running.inc()
        log.info("worker process %d started (pid %d)", index, proc.pid)
        return Child(index, port, proc)

    async def _watch(self) -> int:
        waits = {asyncio.ensure_future(c.proc.wait()): c for c in self.children}
        code = 0
        pending = set(waits)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for fut in done:
                child, rc = waits[fut], fut.result()
                self.running.dec()
                if not self.stopping:
                    log.error(
                        "worker process %d (pid %d) exited with %d: stopping the others",
                        child.index,
                        child.proc.pid,
                        rc,
                    )
                    self.stop()
                if self.stopping and rc in _STOPPED_BY_US:
                    rc = 0
                if rc != 0 and code == 0:
                    code = rc if rc > 0 else 1
        return code

    async def respond(self, path: str) -> Response:
        if path == "/metrics":
            answers = await asyncio.gather(*(c.ask("/metrics") for c in self.children))
            parts = [
                (str(c.index), body)
                for c, (status, body) in zip(self.children, answers, strict=True)
                if status == 200
            ]
            own = bytes(generate_latest(self.registry))
            return "200 OK", CONTENT_TYPE_LATEST, own + merge_expositions(parts)
        if path in ("/healthz", "/readyz"):
            answers = await asyncio.gather(*(c.ask(path) for c in self.children))
            ok = len(self.children) == self.s.processes and all(s == 200 for s, _ in answers)
            lines = "".join(
                f"process {c.index}: {status or 'down'}\n"
                for c, (status, _) in zip(self.children, answers, strict=True)
            )
            status_line = "200 OK" if ok else "503 Service Unavailable"
            return status_line, "text/plain", lines.encode()
        return "404 Not Found", "text/plain", b"not found\n"
