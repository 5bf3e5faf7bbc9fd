"""`derender-worker run` SIGTERMed while it starts: exit 0, at once. Real processes, no
servers (Kafka and Redis are unreachable: the worker stays in its start-up retries);
tests/run/test_stop_anytime.py does the same with records flowing.

Each moment is reached by observing the process, not by guessing a delay: the kernel's
record of its caught signals (the handler is in, imports and models still to come), a
fixed time after that, or a line of its log."""

from __future__ import annotations

import contextlib
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from worker.run import stop_signal

ROOT = Path(__file__).resolve().parents[2]
UNREACHABLE = [
    "--bootstrap-servers", "127.0.0.1:1",
    "--redis-url", "redis://127.0.0.1:1",
    "--input-topic", "in",
    "--output-topic", "out",
    "--metrics-port", "0",
]  # fmt: skip
# Well inside Kubernetes' default grace period (30 s), on a loaded machine.
EXIT_WITHIN_S = 10.0


def catches_sigterm(pid: int) -> bool:
    """Whether process `pid` has a handler for SIGTERM (/proc's SigCgt mask)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    found = re.search(r"^SigCgt:\s*([0-9a-f]+)$", status, re.M)
    return bool(found and int(found.group(1), 16) & (1 << (signal.SIGTERM - 1)))


def wait_for(cond: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.0005)


class Started:
    """`derender-worker run …` as a child, its stderr in a file."""

    def __init__(self, tmp: Path, *argv: str) -> None:
        self.log = tmp / f"worker-{time.monotonic_ns()}.log"
        with open(self.log, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "worker", "run", *argv],
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_handler(self) -> None:
        wait_for(lambda: catches_sigterm(self.proc.pid), 30, "the SIGTERM handler")

    def wait_line(self, text: str) -> None:
        wait_for(lambda: text in self.text(), 60, f"{text!r} in the log:\n{self.text()}")

    def term(self) -> tuple[int, float]:
        """SIGTERM; (exit code, seconds to exit)."""
        sent = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(EXIT_WITHIN_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise AssertionError(
                f"no exit {EXIT_WITHIN_S:.0f}s after SIGTERM:\n{self.text()}"
            ) from None
        return rc, time.monotonic() - sent


# The moments: the handler just in (imports under way), a sweep after it (imports, the
# models and tokenizers loading), the last line before the event loop, and the loop's
# own start-up (retrying an unreachable Redis).
MOMENTS: list[tuple[str, float | None, str | None]] = [
    ("handler in", 0.0, None),
    ("handler in + 20 ms", 0.02, None),
    ("handler in + 100 ms", 0.1, None),
    ("handler in + 300 ms", 0.3, None),
    ("handler in + 1 s", 1.0, None),
    ("settings logged", None, "settings: "),
    ("connecting, retrying", None, "starting the state store failed"),
]


@pytest.mark.parametrize(("moment", "after_s", "line"), MOMENTS, ids=[m[0] for m in MOMENTS])
def test_a_worker_stopped_while_starting_exits_0(
    tmp_path: Path, moment: str, after_s: float | None, line: str | None
) -> None:
    w = Started(tmp_path, *UNREACHABLE)
    if line is None:
        assert after_s is not None
        w.wait_handler()
        # In place before the worker's modules and models are loaded, not only the loop's.
        assert "settings: " not in w.text(), "the first SIGTERM handler came late"
        time.sleep(after_s)
    else:
        w.wait_line(line)
    rc, took = w.term()
    assert rc == 0, f"{moment}: exit {rc}\n{w.text()}"
    assert "Traceback" not in w.text()
    assert took < EXIT_WITHIN_S


@pytest.mark.parametrize("silent", ["redis", "kafka"])
def test_a_worker_connecting_to_a_server_that_never_answers_stops_at_once(
    tmp_path: Path, silent: str, request: pytest.FixtureRequest
) -> None:
    # A listening socket that never answers: the worker's connection opens and its first
    # request waits (up to --step-timeout-s, 30 s, unless the stop cuts it short).
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(60)
        address = f"127.0.0.1:{server.getsockname()[1]}"
        argv = list(UNREACHABLE)
        if silent == "redis":
            argv[argv.index("redis://127.0.0.1:1")] = f"redis://{address}"
        else:  # (a live Redis first, so that the worker gets to Kafka)
            argv[argv.index("redis://127.0.0.1:1")] = request.getfixturevalue("redis_url")
            argv[argv.index("127.0.0.1:1")] = address
        w = Started(tmp_path, *argv)
        conn, _ = server.accept()  # it is connected, waiting for an answer
        with conn:
            rc, took = w.term()
    assert rc == 0, w.text()
    assert took < 5.0, f"{took:.1f}s\n{w.text()}"


def test_sigterm_again_and_again_while_stopping_changes_nothing(tmp_path: Path) -> None:
    # A SIGTERM every millisecond from the first until the process is gone: each moment of
    # stopping (the loop's, closing the clients, the interpreter's own exit) gets one.
    w = Started(tmp_path, *UNREACHABLE)
    w.wait_line("starting the state store failed")
    deadline = time.monotonic() + EXIT_WITHIN_S
    sent = 0
    while w.proc.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(ProcessLookupError):
            w.proc.send_signal(signal.SIGTERM)
            sent += 1
        time.sleep(0.001)
    assert w.proc.wait(1) == 0, f"after {sent} SIGTERMs:\n{w.text()}"
    assert sent > 1


def test_the_supervisor_and_its_processes_stopped_while_starting_exit_0(tmp_path: Path) -> None:
    # SIGTERM to the supervisor as soon as its last process exists: the processes are
    # still in their interpreter's start-up, where a signal would kill them; they hold it
    # until their handler is in, then stop with exit 0 (the supervisor logs their codes).
    w = Started(tmp_path, *UNREACHABLE, "--processes", "2")
    w.wait_line("worker process 1 started")
    rc, _ = w.term()
    codes = re.search(r"stopped 2 worker processes \(exit codes ([-\d, ]+)\)", w.text())
    assert codes is not None, w.text()
    assert codes.group(1) == "0, 0" and rc == 0, w.text()


def test_the_handler_ends_start_up_but_only_marks_a_stop_once_the_loop_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # In-process, on the phases alone (its own state: runners in other tests ask it).
    fresh = {"requested": False, "starting": False, "installed": False}
    monkeypatch.setattr(stop_signal, "_state", fresh)
    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)  # (install chains it)
    old = signal.getsignal(signal.SIGTERM)
    try:
        stop_signal.install()
        assert signal.getsignal(signal.SIGTERM) is not old
        with pytest.raises(SystemExit) as exited:
            signal.raise_signal(signal.SIGTERM)
        assert exited.value.code == 0 and stop_signal.requested()
        stop_signal.hand_over()
        signal.raise_signal(signal.SIGTERM)  # noted, nothing raised
        assert stop_signal.requested()
        removed: list[int] = []
        stop_signal.take_back(removed.append)
        assert removed == [signal.SIGTERM]
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, old)


# A SIGTERM whose handler runs inside code whose exceptions the interpreter only reports
# (a weakref callback, as an import lock's is, or a `__del__`): the start-up must end
# there all the same, with exit 0 and no traceback.
SWALLOWED = {
    "weakref callback": """
import weakref
class Thing: pass
thing = Thing()
def gone(_):
    os.kill(os.getpid(), signal.SIGTERM)
    for _ in range(100_000): pass
ref = weakref.ref(thing, gone)
del thing
""",
    "__del__": """
class Thing:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(100_000): pass
Thing()
""",
}


@pytest.mark.parametrize("where", list(SWALLOWED))
def test_a_sigterm_in_code_that_swallows_exceptions_still_ends_start_up(where: str) -> None:
    script = "import os, signal\nfrom worker.run import stop_signal\nstop_signal.install()\n"
    script += SWALLOWED[where] + "print('start-up went on', flush=True)\n"
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "start-up went on" not in done.stdout
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr
