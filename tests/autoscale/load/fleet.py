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

    def holds(self) -> bool:
        """Whether its log shows partitions assigned to it (its readiness)."""
        return any(
            "partitions assigned: " in line and not line.endswith("assigned: none")
            for line in self.log.read_text(errors="replace").splitlines()
        )

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
        self.replacing: dict[int, Worker] = {}  # new worker's slot → the one it replaces
        self.started = 0
        self._lock = threading.Lock()

    @property
    def replicas(self) -> int:
        """The workers asked for (a replacement's new worker counts once its old one is
        told to stop)."""
        return len(self.live) - len(self.replacing)

    def _start(self, slot: int) -> Worker:
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
        w = self.live[slot] = Worker(slot, port, log, proc, time.time())
        return w

    def _terminate(self, w: Worker) -> None:
        del self.live[w.slot]
        w.term_at = time.time()
        with contextlib.suppress(ProcessLookupError):
            w.proc.send_signal(signal.SIGTERM)
        with self._lock:
            self.stopping.append(w)

    def scale(self, n: int) -> None:
        self.settle_replacements(0.0)  # (a scale does not wait for a rollout)
        while len(self.live) < n:
            self._start(next(i for i in range(len(self.live) + 1) if i not in self.live))
        while len(self.live) > n:
            self._terminate(self.live[max(self.live)])  # the newest slot, like a StatefulSet

    def replace_oldest(self) -> tuple[Worker, Worker] | None:
        """A rolling update's step: a new worker started beside the oldest, which is told
        to stop once the new one holds partitions (`settle_replacements`), as a Deployment
        with maxSurge 1 and maxUnavailable 0 does on readiness. A new name (slot) each
        time, so static membership ids do not collide. None while one is under way."""
        if self.replacing or not self.live:
            return None
        old = min(self.live.values(), key=lambda w: w.started)
        taken = set(self.live) | {w.slot for w in self.stopping}
        new = self._start(next(i for i in range(len(taken) + 1) if i not in taken))
        self.replacing[new.slot] = old
        return old, new

    def settle_replacements(self, ready_within_s: float) -> None:
        """Stop the old worker of each replacement whose new one is ready (or not ready
        within `ready_within_s`)."""
        for slot, old in list(self.replacing.items()):
            new = self.live.get(slot)
            if new is None or old.slot not in self.live:
                del self.replacing[slot]
                continue
            if new.holds() or time.time() - new.started >= ready_within_s:
                del self.replacing[slot]
                self._terminate(old)

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
                self.replacing.pop(w.slot, None)
                self._start(w.slot)

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
