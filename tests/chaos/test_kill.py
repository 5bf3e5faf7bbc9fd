"""kill -9 a worker mid-batch, over and over, while hundreds of requests stream through."""

from __future__ import annotations

import asyncio
import itertools
import signal
from collections.abc import Callable

import pytest
from tokenizers import Tokenizer

from tests.chaos.tools import Tail, chaos_env, scrape, wait_exit, wait_until
from tests.integration.harness import (
    WorkerProcess,
    interleave,
    make_generations,
    publish,
    verify,
)
from tests.support.servers import free_port

pytestmark = [pytest.mark.chaos, pytest.mark.integration, pytest.mark.usefixtures("kafka_client")]


def outputs_so_far(port: int) -> float:
    try:
        metrics = scrape(port)
    except OSError:  # not serving yet
        return 0.0
    return sum(v for k, v in metrics.items() if k.startswith("derender_outputs_total"))


def test_kill_9_mid_batch_loses_nothing(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
) -> None:
    gens = make_generations(deepseek, 300, seed=101, prefix="kill")
    records = interleave(gens, seed=102)
    # Each incarnation gets a fifth of the stream on top of what its predecessor left
    # uncommitted, so every kill lands in the middle of a backlog.
    cuts = [len(records) * i // 5 for i in range(6)]
    slices = [records[a:b] for a, b in itertools.pairwise(cuts)]
    plan: list[tuple[str, dict[str, object]]] = [
        # Deterministic: after the third batch's outputs were acked, before its states are
        # saved; then after a batch's states were saved, before its offsets are committed.
        ("kill before save", chaos_env(kill_before_save=3)),
        ("kill before commit", chaos_env(kill_before_commit=3)),
        # From outside, wherever the worker is once it is busy.
        ("kill -9", {}),
        ("kill -9", {}),
        ("last", {}),
    ]
    kills = []
    with Tail(kafka_bootstrap, topics["output"]) as tail:
        for part, (what, kw) in zip(slices, plan, strict=True):
            port = free_port()
            w = worker_factory(metrics_port=port, **kw)
            asyncio.run(publish(kafka_bootstrap, topics["input"], part))
            if what.startswith("kill before"):
                assert wait_exit(w, 60) == -signal.SIGKILL, w.log_tail()
                assert f"chaos: {what.replace('kill', 'killed')} 3" in w.log_text()
                kills.append(what)
            elif what == "kill -9":
                wait_until(lambda p=port: outputs_so_far(p) >= 30, 60, "the worker to be busy")
                w.kill9()
                kills.append(what)
        last = w
        outputs = tail.wait_done([g.request_id for g in gens], timeout_s=120)
    verdict = verify(outputs, gens)
    print(f"kills: {kills}; {verdict}")
    assert len(kills) == 4
    # The kill after produce, before save, left outputs that the next worker published
    # again: the verifier saw them and found the same bytes.
    assert verdict.repeats > 0, verdict
    assert last.stop() == 0, last.log_tail()
