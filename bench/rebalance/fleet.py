"""Worker processes for the rebalance bench: start, SIGTERM, exit codes, and who owned
which partition when (from the `partitions assigned:` lines each logs)."""

from __future__ import annotations

import contextlib
import datetime
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from rebalance.measure import Timeline

ASSIGNED = "partitions assigned: "
REVOKED = "partitions revoked: "
GRACE_S = 30.0


@dataclass
class Member:
    name: str
    log: Path
    proc: subprocess.Popen[bytes]
    term_at: float | None = None
    rc: int | None = None
    exit_s: float | None = None
    niced: bool = False


class Fleet:
    def __init__(self, logs: Path, cwd: Path) -> None:
        self.logs = logs
        self.cwd = cwd
        self.members: list[Member] = []

    def start(self, name: str, argv: list[str], nice: int = 0) -> Member:
        """`nice`: the process starts at that niceness (its threads inherit it) until
        `unnice`: a joiner's start-up (imports, models) then takes CPU only where the
        working members leave some, as on a node of its own."""
        log = self.logs / f"{name}.log"
        with open(log, "ab") as f:
            proc = subprocess.Popen(argv, cwd=self.cwd, stdout=f, stderr=f, start_new_session=True)
        if nice:
            os.setpriority(os.PRIO_PROCESS, proc.pid, nice)
            autogroup_nice(proc.pid, nice)
        m = Member(name, log, proc, niced=bool(nice))
        self.members.append(m)
        return m

    def unnice(self, m: Member) -> None:
        """Every thread of `m` back to niceness 0 (lowering it needs root)."""
        if not m.niced:
            return
        m.niced = False
        autogroup_nice(m.proc.pid, 0)
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{m.proc.pid}/task").iterdir():
                with contextlib.suppress(OSError):
                    os.setpriority(os.PRIO_PROCESS, int(task.name), 0)

    def term(self, m: Member) -> None:
        m.term_at = time.time()
        with contextlib.suppress(ProcessLookupError):
            m.proc.send_signal(signal.SIGTERM)

    def reap(self) -> None:
        """Note the exit of whoever was told to stop and is gone."""
        for m in self.members:
            if m.term_at is not None and m.rc is None and (rc := m.proc.poll()) is not None:
                m.rc, m.exit_s = rc, time.time() - m.term_at

    def wait_exits(self) -> None:
        self.reap()
        for m in self.members:
            if m.term_at is None or m.rc is not None:
                continue
            try:
                m.rc = m.proc.wait(max(0.1, m.term_at + GRACE_S - time.time()))
            except subprocess.TimeoutExpired:
                m.proc.kill()
                m.rc = m.proc.wait(10)
            m.exit_s = time.time() - m.term_at

    def stop_all(self) -> None:
        for m in self.members:
            if m.proc.poll() is None and m.term_at is None:
                self.term(m)
        self.wait_exits()

    def sleep(self, seconds: float) -> None:
        end = time.time() + seconds
        while (left := end - time.time()) > 0:
            self.reap()
            time.sleep(min(0.05, left))

    def assigned(self, m: Member) -> bool:
        """Whether `m` logged an assignment with a partition in it."""
        return any(at is not None for at, _ in _assignments(m.log))

    def timeline(self) -> dict[int, list[tuple[float, str | None]]]:
        out: dict[int, list[tuple[float, str | None]]] = {}
        for m in self.members:
            for at, parts in _assignments(m.log):
                if at is None:
                    continue
                for p in parts:
                    out.setdefault(p, []).append((at, m.name))
        for entries in out.values():
            entries.sort(key=lambda e: e[0])
        return out


def _assignments(log: Path, what: str = ASSIGNED) -> list[tuple[float | None, list[int]]]:
    out: list[tuple[float | None, list[int]]] = []
    with contextlib.suppress(OSError):
        for line in log.read_text(errors="replace").splitlines():
            i = line.find(what)
            if i < 0:
                continue
            rest = line[i + len(what) :].strip()
            parts = [] if rest == "none" else [int(x.rsplit("/", 1)[-1]) for x in rest.split(", ")]
            at: float | None = None
            with contextlib.suppress(ValueError):
                at = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            out.append((at, parts))
    return out


def revocations(fleet: Fleet) -> dict[int, list[float]]:
    """partition → when its owner gave it up (each rebalance of eager groups revokes all)."""
    out: dict[int, list[float]] = {}
    for m in fleet.members:
        for at, parts in _assignments(m.log, REVOKED):
            for p in parts:
                if at is not None:
                    out.setdefault(p, []).append(at)
    return out


def as_timeline(t: dict[int, list[tuple[float, str | None]]]) -> Timeline:
    return t


def autogroup_nice(pid: int, nice: int) -> bool:
    """With autogroup scheduling on, each session (every member starts its own) shares the
    CPU with the others by its autogroup's niceness; a thread's own niceness only ranks
    it within its session. False: refused (below 0 needs root) or no autogroups."""
    try:
        Path(f"/proc/{pid}/autogroup").write_text(str(nice))
    except OSError:
        return False
    return True
