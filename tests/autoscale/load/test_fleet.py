"""The fleet's rolling replacement, with stand-in workers (no broker): a new worker beside
the oldest, the old one stopped once the new one holds partitions, the replica count
unchanged throughout."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tests.autoscale.load.fleet import Fleet
from tests.cli.test_stop_signal import catches_sigterm

# Logs its assignment after `delay` seconds (its readiness), stops on SIGTERM with 0.
STAND_IN = (
    "import signal, sys, time, datetime\n"
    "signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))\n"
    "time.sleep(float(sys.argv[1]))\n"
    "stamp = datetime.datetime.now().strftime('%Y-%m-%d %H:%M:%S,%f')[:23]\n"
    "print(stamp, 'INFO derender.worker: partitions assigned: t/0', file=sys.stderr, flush=True)\n"
    "time.sleep(60)\n"
)


def _fleet(tmp_path: Path, ready_after_s: float) -> Fleet:
    return Fleet(lambda slot, port: [sys.executable, "-c", STAND_IN, str(ready_after_s)], tmp_path)


def _until(cond: object, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_replacement_stops_the_oldest_once_the_new_one_holds_partitions(
    tmp_path: Path,
) -> None:
    fleet = _fleet(tmp_path, 0.5)
    try:
        fleet.scale(2)
        _until(lambda: all(catches_sigterm(w.proc.pid) for w in fleet.live.values()))
        oldest = min(fleet.live.values(), key=lambda w: w.started)
        pair = fleet.replace_oldest()
        assert pair is not None and pair[0] is oldest
        new = pair[1]
        assert new.slot not in (0, 1) and fleet.replicas == 2 and len(fleet.live) == 3
        assert fleet.replace_oldest() is None  # one at a time
        fleet.settle_replacements(30)
        assert oldest.term_at is None  # the new one is not ready yet
        _until(new.holds)
        fleet.settle_replacements(30)
        assert oldest.term_at is not None and oldest.slot not in fleet.live
        assert fleet.replicas == 2 and not fleet.replacing
        fleet.stop_all()
    finally:
        for w in [*fleet.live.values(), *fleet.stopping]:
            w.proc.kill()
    assert sorted(w.rc for w in fleet.done) == [0, 0, 0]
    assert all(not w.killed for w in fleet.done)


def test_a_new_worker_not_ready_in_time_replaces_the_old_one_anyway(tmp_path: Path) -> None:
    fleet = _fleet(tmp_path, 60)
    try:
        fleet.scale(1)
        pair = fleet.replace_oldest()
        assert pair is not None
        fleet.settle_replacements(0.2)
        assert pair[0].term_at is None
        time.sleep(0.3)
        fleet.settle_replacements(0.2)
        assert pair[0].term_at is not None and list(fleet.live) == [pair[1].slot]
        # A scale in the middle of a replacement settles it first.
        again = fleet.replace_oldest()
        assert again is not None
        fleet.scale(1)
        assert again[0].term_at is not None and fleet.replicas == 1 == len(fleet.live)
        _until(lambda: catches_sigterm(again[1].proc.pid))  # (a stand-in, not the worker)
        fleet.stop_all()
    finally:
        for w in [*fleet.live.values(), *fleet.stopping]:
            w.proc.kill()
    assert [w.rc for w in fleet.done] == [0, 0, 0]
