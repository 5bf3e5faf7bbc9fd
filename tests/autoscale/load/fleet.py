"""The fleet of `derender-worker run` processes: start, SIGTERM, grace period, exit
codes, and the lag gauge each serves."""

from __future__ import annotations

import contextlib
import datetime
import signal
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.autoscale.config import GRACE_S, ROOT
from tests.autoscale.console import say
from worker.adapters.local.embedded import free_port


@dataclass
class Worker:
    slot: int
    port: int
    log: Path
    proc: subprocess.Popen[bytes]
    started: float
    term_at: float | None = None
    exit_at: float | None = None
    rc: int | None = None
    killed: bool = False
    ready_at: float | None = None  # its first partition assignment (from its log)

    def read_ready(self) -> None:
        for line in self.log.read_text(errors="replace").splitlines():
            if "partitions assigned: " in line and not line.endswith("assigned: none"):
                with contextlib.suppress(ValueError):
                    stamp = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
                    self.ready_at = stamp.timestamp()  # the log's local time, as ours
                return

    @property
    def name(self) -> str:
        return f"w-{self.slot}"


@dataclass
class ScaleEvent:
    at: float
    before: int
    after: int
    metric: float
    proposal: int
    reason: str


class Fleet:
    def __init__(self, argv: Callable[[int, int], list[str]], logs: Path) -> None:
        self.argv = argv
        self.logs = logs
        self.live: dict[int, Worker] = {}  # slot → running (not yet told to stop)
        self.stopping: list[Worker] = []
        self.done: list[Worker] = []
        self.started = 0
        self._lock = threading.Lock()

    @property
    def replicas(self) -> int:
        return len(self.live)

    def scale(self, n: int) -> None:
        while len(self.live) < n:
            slot = next(i for i in range(len(self.live) + 1) if i not in self.live)
            port = free_port()
            log = self.logs / f"worker-{self.started:02d}-{slot}.log"
            self.started += 1
            with open(log, "ab") as f:
                proc = subprocess.Popen(
                    self.argv(slot, port),
                    cwd=ROOT,
                    stdout=subprocess.DEVNULL,
                    stderr=f,
                    start_new_session=True,
                )
            self.live[slot] = Worker(slot, port, log, proc, time.time())
        while len(self.live) > n:
            w = self.live.pop(max(self.live))  # the newest slot, like a StatefulSet
            w.term_at = time.time()
            with contextlib.suppress(ProcessLookupError):
                w.proc.send_signal(signal.SIGTERM)
            with self._lock:
                self.stopping.append(w)

    def reap(self) -> None:
        """Note exits; SIGKILL whoever outlived the grace period (a failure)."""
        with self._lock:
            for w in list(self.stopping):
                rc = w.proc.poll()
                now = time.time()
                if rc is None and w.term_at is not None and now - w.term_at > GRACE_S:
                    w.proc.kill()
                    w.killed = True
                    rc = w.proc.wait(10)
                if rc is not None:
                    w.rc = rc
                    w.exit_at = now
                    self.stopping.remove(w)
                    self.done.append(w)
        for w in list(self.live.values()):
            rc = w.proc.poll()
            if rc is not None:  # died on its own: a failure; Kubernetes would restart it
                say(f"  {w.name} exited on its own with {rc}; restarting it")
                w.rc, w.exit_at = rc, time.time()
                self.done.append(w)
                del self.live[w.slot]
                self.scale(len(self.live) + 1)

    def stop_all(self) -> None:
        self.scale(0)
        deadline = time.time() + GRACE_S + 15
        while self.stopping and time.time() < deadline:
            self.reap()
            time.sleep(0.05)
        self.reap()


def scrape_lag(port: int) -> float | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=0.5) as r:
            body = r.read().decode()
    except OSError:
        return None
    total = None
    parts = 0.0
    for line in body.splitlines():
        if line.startswith("derender_group_lag_sum "):
            total = float(line.rsplit(" ", 1)[1])
        elif line.startswith("derender_group_lag{"):
            parts += float(line.rsplit(" ", 1)[1])
    return total if total is not None else parts
