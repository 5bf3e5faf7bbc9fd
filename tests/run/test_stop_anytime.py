"""SIGTERM at every moment of a worker's life, under exactly-once with records flowing:
each worker exits 0 within the grace period, and the read_committed output has every
request complete, byte for byte replay's, with not one output repeated.

One worker after another on the same group, each stopped at its own moment, reached by
observing it (tests/cli/test_stop_signal.py says how), never by a guessed delay: its
handler just in (importing), 200 ms later (importing, loading models), its settings
logged (the models loaded, the loop about to start), subscribed (joining the group),
partitions assigned (opening the transactional producers), outputs of its own read
(mid-batch, a backlog waiting), and stopping (a second SIGTERM). Each is given a slice
of the records first; the last worker runs until every request is done.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from collections.abc import Callable

import pytest
from tokenizers import Tokenizer

from tests.chaos.test_exactly_once import EOS, Tails, exactly_once, wait_done_or_dump
from tests.chaos.tools import FIXED_TS_MS, wait_until
from tests.cli.test_stop_signal import catches_sigterm
from tests.integration.harness import WorkerProcess, interleave, make_generations, publish
from tests.support.server_fixtures import TANSU, kafka_plan

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

# Kubernetes' default terminationGracePeriodSeconds.
GRACE_S = 30.0

# (moment, how it is reached); the slices of records are published before each worker.
MOMENTS = [
    "handler in",
    "handler in + 200 ms",
    "settings logged",
    "subscribed",
    "partitions assigned",
    "mid-batch",
    "stopping, SIGTERM again",
]


def reach(moment: str, w: WorkerProcess, committed: Callable[[], int]) -> None:
    """Wait until worker `w` is at `moment`."""
    assert w.proc is not None
    pid = w.proc.pid

    def logged(text: str) -> None:
        wait_until(lambda: text in w.log_text(), 90, f"{text!r}; log:\n{w.log_tail()}", 0.002)

    if moment.startswith("handler in"):
        wait_until(lambda: catches_sigterm(pid), 30, "the SIGTERM handler", 0.0005)
        assert "settings: " not in w.log_text(), "the first SIGTERM handler came late"
        if moment.endswith("200 ms"):
            time.sleep(0.2)
    elif moment == "settings logged":
        logged("settings: ")
    elif moment == "subscribed":
        logged("consuming ")
    elif moment in ("partitions assigned", "stopping, SIGTERM again"):
        logged("partitions assigned: ")
    elif moment == "mid-batch":
        before = committed()
        logged("partitions assigned: ")
        wait_until(lambda: committed() >= before + 20, 90, "outputs of this worker")
    else:
        raise AssertionError(moment)


def test_sigterm_at_every_moment_exits_0_and_loses_or_repeats_nothing(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
    kafka_client: str,
) -> None:
    if kafka_plan().kind == TANSU:
        pytest.skip("tansu has no transactions")
    gens = make_generations(deepseek, 400, seed=3901, prefix="stop-any")
    records = interleave(gens, seed=3902)
    # Mid-batch gets the big slice (a backlog to be in the middle of); the rest are small.
    weights = [1, 1, 1, 1, 1, 8, 2, 1]  # per worker: the moments, then the last one
    total = sum(weights)
    cuts = [len(records) * sum(weights[:i]) // total for i in range(len(weights) + 1)]
    slices = [records[cuts[i] : cuts[i + 1]] for i in range(len(weights))]
    stops: list[tuple[str, int, float]] = []
    with Tails(kafka_bootstrap, topics["output"]) as tails:

        def committed() -> int:
            return len(tails.committed.snapshot())

        for moment, part in zip(MOMENTS, slices, strict=False):
            asyncio.run(publish(kafka_bootstrap, topics["input"], part, FIXED_TS_MS))
            w = worker_factory(*EOS)
            reach(moment, w, committed)
            assert w.proc is not None
            sent = time.monotonic()
            w.signal(signal.SIGTERM)
            if moment == "stopping, SIGTERM again":
                time.sleep(0.05)
                if w.alive:
                    w.signal(signal.SIGTERM)
            try:
                rc = w.proc.wait(GRACE_S)
            except subprocess.TimeoutExpired:
                w.kill9()
                raise AssertionError(f"{moment}: no exit within the grace period") from None
            stops.append((moment, rc, time.monotonic() - sent))
            assert rc == 0, f"{moment}: exit {rc}; log:\n{w.log_tail(60)}"
            assert "Traceback" not in w.log_text(), w.log_tail(60)
        asyncio.run(publish(kafka_bootstrap, topics["input"], slices[-1], FIXED_TS_MS))
        last = worker_factory(*EOS)
        outputs = wait_done_or_dump(tails.committed, gens, last, 120)
    verdict = exactly_once(outputs, gens, records)
    print(f"stops (moment, exit, s): {stops}; {verdict}")
    assert all(took < GRACE_S for _, _, took in stops)
    assert last.stop() == 0, last.log_tail()
