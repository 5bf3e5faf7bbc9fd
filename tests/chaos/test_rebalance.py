"""Workers joining, leaving and coming back from the dead while requests stream through."""

from __future__ import annotations

import asyncio
import re
import signal
from collections.abc import Callable

import pytest
import redis
from tokenizers import Tokenizer

from tests.chaos.tools import (
    Tail,
    chaos_env,
    process_state,
    scrape,
    wait_exit,
    wait_log,
    wait_until,
)
from tests.integration.harness import (
    Generation,
    WorkerProcess,
    interleave,
    make_generations,
    publish,
    verify,
)
from tests.support.servers import free_port
from worker.core.state import DONE, decode_state

pytestmark = [pytest.mark.chaos, pytest.mark.integration, pytest.mark.usefixtures("kafka_client")]


def all_partitions(topic: str) -> str:
    return "partitions assigned: " + ", ".join(f"{topic}/{p}" for p in range(4))


def test_one_worker_joins_and_one_leaves_mid_run(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
) -> None:
    gens = make_generations(deepseek, 240, seed=201, prefix="lj")
    records = interleave(gens, seed=202)
    third = len(records) // 3
    with Tail(kafka_bootstrap, topics["output"]) as tail:
        a = worker_factory()
        asyncio.run(publish(kafka_bootstrap, topics["input"], records[:third]))
        tail.wait(lambda o: len(o) >= 100, 60, "the first worker to be busy")
        # B joins while A works: the group rebalances and they split the partitions.
        b = worker_factory()
        asyncio.run(publish(kafka_bootstrap, topics["input"], records[third : 2 * third]))
        wait_until(
            lambda: re.search(rf"partitions assigned: {re.escape(topics['input'])}/", b.log_text()),
            60,
            f"the joining worker to get partitions; its log:\n{b.log_tail()}",
        )
        # A leaves (SIGTERM) with a backlog left: B takes every partition and finishes.
        asyncio.run(publish(kafka_bootstrap, topics["input"], records[2 * third :]))
        a.signal(signal.SIGTERM)
        assert wait_exit(a, 30) == 0, a.log_tail()
        wait_log(b, all_partitions(topics["input"]), 60)
        outputs = tail.wait_done([g.request_id for g in gens], timeout_s=90)
    verify(outputs, gens)
    assert b.stop() == 0, b.log_tail()
    for w in (a, b):
        done = re.search(r"stopped after (\d+) records", w.log_text())
        assert done and int(done.group(1)) > 0, f"a worker did nothing:\n{w.log_tail()}"


def test_zombie_state_writes_are_refused(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    redis_url: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
) -> None:
    before = make_generations(deepseek, 40, seed=301, prefix="before")
    zombies = make_generations(deepseek, 12, seed=302, prefix="zombie")
    after = make_generations(deepseek, 40, seed=303, prefix="after")
    tails = [Generation(g.request_id, g.ids, g.expected, g.records[1:]) for g in zombies]
    port_a = free_port()
    with Tail(kafka_bootstrap, topics["output"]) as tail:
        # A alone owns every partition. It freezes itself (SIGSTOP) on the first batch that
        # writes a zombie-* request: its outputs are produced and acked, its states not saved.
        a = worker_factory(metrics_port=port_a, **chaos_env(stop_before_save="zombie-"))
        asyncio.run(publish(kafka_bootstrap, topics["input"], interleave(before, seed=304)))
        tail.wait_done([g.request_id for g in before])
        asyncio.run(publish(kafka_bootstrap, topics["input"], [g.records[0] for g in zombies]))
        assert a.proc is not None
        wait_until(lambda: process_state(a.proc.pid) == "T", 60, "A to freeze mid-batch")
        assert "chaos: stopped before save" in a.log_text()
        # Past the session timeout B owns everything; it redoes A's uncommitted batch (with a
        # newer owner epoch) and everything published meanwhile.
        b = worker_factory()
        asyncio.run(
            publish(kafka_bootstrap, topics["input"], interleave([*tails, *after], seed=305))
        )
        tail.wait_done([g.request_id for g in zombies + after])
        assert all_partitions(topics["input"]) in b.log_text()
        # The zombie wakes up and finishes its batch: the compare-and-set refuses its writes.
        a.signal(signal.SIGCONT)
        log = wait_log(a, "state writes refused", 30)
        assert "chaos: continued" in log
        conflicts = scrape(port_a)["derender_state_conflicts_total"]
        assert conflicts >= 1
        # A rejoins the group: both workers share the partitions again, and nothing changes.
        wait_until(
            lambda: a.log_text().count("partitions assigned:") >= 2, 60, "A to rejoin the group"
        )
        outputs = tail.snapshot()
    verdict = verify(outputs, before + zombies + after)
    assert verdict.repeats > 0  # A's zombie batch and B's redo of it: the same bytes
    # Redis still holds B's finished states, not A's stale ones (seq 0, still active).
    client = redis.Redis.from_url(redis_url)
    try:
        for g in zombies:
            seq, epoch, blob = client.hmget(
                f"{a.state_prefix}{{{g.request_id}}}", "seq", "epoch", "state"
            )
            assert blob is not None, g.request_id
            state = decode_state(blob)
            assert (int(seq), state.status) == (len(g.records) - 1, DONE), g.request_id
            assert int(epoch) > 1  # written by an owner after A's first claim
    finally:
        client.close()
    for w in (a, b):
        assert w.stop() == 0, w.log_tail()
    print(f"zombie: {conflicts:.0f} writes refused; {verdict}")
