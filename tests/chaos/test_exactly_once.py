"""`run --guarantee exactly-once` under chaos, verified by a read_committed reader: every
request complete, every output byte-equal to replay's, and **no output repeated at all**.

A second reader at read_uncommitted sees the same topic with the aborted transactions'
records still in it: where a test crashes a worker mid-transaction, that reader finds
repeats, which shows the crash really left a transaction open that the broker then
aborted. Needs a broker with transactions (Apache Kafka; not tansu).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer

from tests.chaos.test_broker import own_broker as own_broker
from tests.chaos.test_broker import own_worker
from tests.chaos.test_kill import outputs_so_far
from tests.chaos.test_redis import DurableRedis
from tests.chaos.test_redis import durable_redis as durable_redis
from tests.chaos.tools import (
    FIXED_TS_MS,
    LAUNCHER,
    Tail,
    chaos_env,
    oracle,
    per_request,
    process_state,
    wait_exit,
    wait_log,
    wait_until,
)
from tests.integration.harness import (
    Generation,
    Output,
    Verdict,
    WorkerProcess,
    interleave,
    make_generations,
    publish,
    verify,
)
from tests.support.cluster_tools import (
    TRANSACTION_STATE,
    describe,
    led_by_live_nodes,
    wait_partitions,
)
from tests.support.cluster_tools import own_cluster as own_cluster
from tests.support.kafka_cluster import KafkaCluster
from tests.support.server_fixtures import TANSU, kafka_plan
from tests.support.servers import free_port
from worker.adapters.local import kafka_server
from worker.constants import CONTROL

pytestmark = [pytest.mark.chaos, pytest.mark.integration, pytest.mark.usefixtures("kafka_client")]

EOS = ("--guarantee", "exactly-once")


@pytest.fixture(autouse=True)
def _transactions() -> None:
    if kafka_plan().kind == TANSU:
        pytest.skip("tansu has no transactions")


class Tails:
    """The output topic read twice: read_committed (what a consumer under exactly-once
    sees) and read_uncommitted (what the broker holds, aborted transactions included)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.committed = Tail(bootstrap, topic, isolation_level="read_committed")
        self.everything = Tail(bootstrap, topic)

    def __enter__(self) -> Tails:
        self.committed.__enter__()
        self.everything.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.committed.__exit__(*exc)
        self.everything.__exit__(*exc)


def exactly_once(outputs: list[Output], gens: list[Generation], records: list[Any]) -> Verdict:
    """Complete, exact, equal to replay's bytes, and not one repeat."""
    verdict = verify(outputs, gens)
    assert verdict.repeats == 0, f"outputs repeated under exactly-once: {verdict}"
    expected = per_request(oracle(records).outputs)
    assert per_request(outputs) == expected
    return verdict


def wait_done_or_dump(
    tail: Tail, gens: list[Generation], w: WorkerProcess, timeout_s: float
) -> list[Output]:
    """Every request's [DONE]; on a timeout, the worker's task stacks in the failure."""
    try:
        return tail.wait_done([g.request_id for g in gens], timeout_s=timeout_s)
    except AssertionError:
        if w.alive and w.module == LAUNCHER:
            w.signal(signal.SIGUSR1)
            time.sleep(1.0)
        raise AssertionError(f"stalled; the worker's log:\n{w.log_tail(200)}") from None


def repeats_in(outputs: list[Output]) -> int:
    triples = [
        (o.headers["derender-request-id"], o.headers["derender-seq"], o.headers["derender-part"])
        for o in outputs
    ]
    return len(triples) - len(set(triples))


def test_kill_9_mid_transaction_five_times_repeats_nothing(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
) -> None:
    gens = make_generations(deepseek, 300, seed=801, prefix="eos-kill")
    records = interleave(gens, seed=802)
    plan: list[tuple[str, dict[str, object]]] = [
        # After the batch's outputs went into its transaction, before its states are saved.
        ("kill before save", chaos_env(kill_before_save=3)),
        # After the states were saved, before the transaction commits: Redis holds states
        # of a batch whose outputs and offsets the broker then aborts.
        ("kill before transaction commit", chaos_env(kill_before_txn_commit=3)),
        ("kill before transaction commit", chaos_env(kill_before_txn_commit=2)),
        ("kill -9", chaos_env()),
        ("kill -9", chaos_env()),
        ("last", chaos_env()),
    ]
    cuts = [len(records) * i // len(plan) for i in range(len(plan) + 1)]
    slices = [records[a:b] for a, b in itertools.pairwise(cuts)]
    kills = []
    with Tails(kafka_bootstrap, topics["output"]) as tails:
        for part, (what, kw) in zip(slices, plan, strict=True):
            port = free_port()
            w = worker_factory(*EOS, metrics_port=port, **kw)
            asyncio.run(publish(kafka_bootstrap, topics["input"], part, FIXED_TS_MS))
            if what.startswith("kill before"):
                assert wait_exit(w, 90) == -signal.SIGKILL, w.log_tail()
                assert f"chaos: {what.replace('kill', 'killed')}" in w.log_text()
                kills.append(what)
            elif what == "kill -9":
                wait_until(lambda p=port: outputs_so_far(p) >= 30, 90, "the worker to be busy")
                w.kill9()
                kills.append(what)
        last = w
        outputs = wait_done_or_dump(tails.committed, gens, last, 90)
        # Give the uncommitted reader the same end.
        time.sleep(1.0)
        everything = tails.everything.snapshot()
    verdict = exactly_once(outputs, gens, records)
    print(f"kills: {kills}; committed: {verdict}; aborted records seen: {repeats_in(everything)}")
    assert len(kills) == 5
    # The crashes left open transactions behind (their records are in the log, aborted).
    assert repeats_in(everything) > 0
    assert last.stop() == 0, last.log_tail()


def test_kill_9_with_a_control_topic_sends_each_control_record_once(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    new_topic: Callable[..., str],
    worker_factory: Callable[..., WorkerProcess],
) -> None:
    """Early stop under exactly-once (#27): a control record goes out in the transaction
    of the outputs it comes with, so a read_committed reader of the control topic sees
    exactly one per stopped request, byte for byte replay's, through kills mid-transaction."""
    control = new_topic(4, "ctl")
    gens = make_generations(deepseek, 150, seed=811, prefix="eos-ctl")
    rng = random.Random(812)
    for g in gens:  # a stop string on a word of the request's own text, past its start
        words = [w for w in g.expected.split(" ") if len(w.strip()) > 2]
        if len(words) > 3:
            g.records[0]["chat_request"] = {"stop": [rng.choice(words[2:])]}
    records = interleave(gens, seed=813)
    expected = oracle(records, control=True).outputs
    want = {o.key: o.value for o in expected if o.headers["derender-kind"] == CONTROL}
    assert len(want) > 50  # (most requests stop early)
    plan = [
        ("kill before transaction commit", chaos_env(kill_before_txn_commit=2)),
        ("kill -9", chaos_env()),
        ("last", chaos_env()),
    ]
    cuts = [len(records) * i // len(plan) for i in range(len(plan) + 1)]
    flags = (*EOS, "--control-topic", control)
    with Tail(kafka_bootstrap, control, isolation_level="read_committed") as controls:
        for (a, b), (what, kw) in zip(itertools.pairwise(cuts), plan, strict=True):
            port = free_port()
            w = worker_factory(*flags, metrics_port=port, **kw)
            asyncio.run(publish(kafka_bootstrap, topics["input"], records[a:b], FIXED_TS_MS))
            if what.startswith("kill before"):
                assert wait_exit(w, 90) == -signal.SIGKILL, w.log_tail()
            elif what == "kill -9":
                wait_until(lambda p=port: outputs_so_far(p) >= 30, 90, "the worker to be busy")
                w.kill9()
        got = controls.wait(lambda o: len(o) >= len(want), 120, "every control record")
        time.sleep(1.0)  # (a repeat would come in the same transactions: none may follow)
        got = controls.snapshot()
    assert sorted(o.key for o in got) == sorted(want), "control records missing or repeated"
    assert {o.key: o.value for o in got} == want
    assert w.stop() == 0, w.log_tail()


def test_a_produce_never_acknowledged_and_an_abort_that_never_returns_recover_within_bounds(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
) -> None:
    """What a broker restart did to aiokafka: a transactional batch never
    acknowledged, then its abort waiting for ever, silently, the lane and a later SIGTERM
    held with it. Bounded: the produce step times out (--step-timeout-s), the abort gives
    up after ABORT_TIMEOUT_S and drops the producer, the group is rejoined, a new producer
    fences the old one, and everything is delivered once; SIGTERM then exits 0 at once."""
    gens = make_generations(deepseek, 60, seed=851, prefix="eos-stall")
    records = interleave(gens, seed=852)
    w = worker_factory(*EOS, "--step-timeout-s", "2", **chaos_env(stall_txn_send=5))
    asyncio.run(publish(kafka_bootstrap, topics["input"], records, FIXED_TS_MS))
    with Tail(kafka_bootstrap, topics["output"], isolation_level="read_committed") as tail:
        outputs = wait_done_or_dump(tail, gens, w, 120)
    exactly_once(outputs, gens, records)
    log = w.log_text()
    assert "chaos: stalled transactional send 5" in log and "stalled transaction abort" in log
    assert "produce took longer than 2s" in log
    started = time.monotonic()
    assert w.stop(timeout_s=15) == 0, w.log_tail()
    assert time.monotonic() - started < 15


def test_a_zombie_resuming_after_its_partitions_moved_commits_nothing(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
) -> None:
    before = make_generations(deepseek, 40, seed=811, prefix="before")
    zombies = make_generations(deepseek, 12, seed=812, prefix="zombie")
    after = make_generations(deepseek, 40, seed=813, prefix="after")
    tails_ = [Generation(g.request_id, g.ids, g.expected, g.records[1:]) for g in zombies]
    heads = [g.records[0] for g in zombies]
    rest = interleave([*tails_, *after], seed=815)
    records = [*interleave(before, seed=814), *heads, *rest]
    with Tails(kafka_bootstrap, topics["output"]) as tails:
        # A owns every partition and freezes itself (SIGSTOP) on the first batch writing a
        # zombie-* request: its outputs are in an open transaction, its states not saved.
        a = worker_factory(*EOS, **chaos_env(stop_before_save="zombie-"))
        asyncio.run(
            publish(
                kafka_bootstrap,
                topics["input"],
                records[: len(records) - len(rest) - len(heads)],
                FIXED_TS_MS,
            )
        )
        tails.committed.wait_done([g.request_id for g in before])
        asyncio.run(publish(kafka_bootstrap, topics["input"], heads, FIXED_TS_MS))
        assert a.proc is not None
        wait_until(lambda: process_state(a.proc.pid) == "T", 60, "A to freeze mid-batch")
        # Past the session timeout B owns everything: its producers fence A's (same
        # transactional ids), the broker aborts A's open transactions, B redoes the batch.
        b = worker_factory(*EOS)
        asyncio.run(publish(kafka_bootstrap, topics["input"], rest, FIXED_TS_MS))
        tails.committed.wait_done([g.request_id for g in zombies + after], timeout_s=120)
        # A wakes up and finishes its batch: its states are refused (B's epoch is newer)
        # and its transactions are fenced; it drops them and rejoins the group.
        a.signal(signal.SIGCONT)
        try:
            # Its refused writes or its fenced transactions make it give the partitions
            # up and rejoin the group, where it gets a share again.
            log = wait_log(a, "rejoining the group", 60)
            wait_until(
                lambda: a.log_text().count("partitions assigned:") >= 2,
                60,
                "A to rejoin the group",
            )
        except AssertionError:
            a.signal(signal.SIGUSR1)
            time.sleep(1.0)
            raise AssertionError(f"the zombie stalled; its log:\n{a.log_tail(300)}") from None
        assert "chaos: continued" in log
        time.sleep(1.0)
        outputs = tails.committed.snapshot()
        everything = tails.everything.snapshot()
    verdict = exactly_once(outputs, before + zombies + after, records)
    # The zombie's batch is in the log, aborted: the uncommitted reader sees it twice.
    assert repeats_in(everything) > 0
    for w in (a, b):
        assert w.stop() == 0, w.log_tail()
    print(f"zombie: {verdict}; aborted records seen: {repeats_in(everything)}")


def test_workers_joining_and_leaving_repeat_nothing(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
) -> None:
    gens = make_generations(deepseek, 240, seed=821, prefix="eos-lj")
    records = interleave(gens, seed=822)
    third = len(records) // 3
    with Tails(kafka_bootstrap, topics["output"]) as tails:
        a = worker_factory(*EOS)
        asyncio.run(publish(kafka_bootstrap, topics["input"], records[:third], FIXED_TS_MS))
        tails.committed.wait(lambda o: len(o) >= 100, 60, "the first worker to be busy")
        b = worker_factory(*EOS)
        asyncio.run(
            publish(kafka_bootstrap, topics["input"], records[third : 2 * third], FIXED_TS_MS)
        )
        wait_until(
            lambda: re.search(rf"partitions assigned: {re.escape(topics['input'])}/", b.log_text()),
            60,
            f"the joining worker to get partitions; its log:\n{b.log_tail()}",
        )
        asyncio.run(publish(kafka_bootstrap, topics["input"], records[2 * third :], FIXED_TS_MS))
        a.signal(signal.SIGTERM)
        assert wait_exit(a, 30) == 0, a.log_tail()
        outputs = tails.committed.wait_done([g.request_id for g in gens], timeout_s=120)
    exactly_once(outputs, gens, records)
    assert b.stop() == 0, b.log_tail()


def test_redis_restart_repeats_nothing(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    durable_redis: DurableRedis,
    worker_factory: Callable[..., WorkerProcess],
) -> None:
    gens = make_generations(deepseek, 120, seed=831, prefix="eos-redis")
    records = interleave(gens, seed=832)
    half = len(records) // 2
    with Tails(kafka_bootstrap, topics["output"]) as tails:
        w = worker_factory(*EOS, "--outage-limit-s", "120", redis=durable_redis.url)
        asyncio.run(publish(kafka_bootstrap, topics["input"], records[:half], FIXED_TS_MS))
        tails.committed.wait(lambda o: len(o) >= 50, 60, "the worker to be busy")
        durable_redis.stop()
        asyncio.run(publish(kafka_bootstrap, topics["input"], records[half:], FIXED_TS_MS))
        time.sleep(3.0)  # batches fail against the missing Redis and are aborted
        assert w.alive, w.log_tail()
        durable_redis.start()
        outputs = tails.committed.wait_done([g.request_id for g in gens], timeout_s=120)
    exactly_once(outputs, gens, records)
    assert w.stop() == 0, w.log_tail()


def test_broker_killed_and_restarted_repeats_nothing(
    deepseek: Tokenizer,
    own_broker: kafka_server.ApacheKafka,
    redis_url: str,
    tmp_path: Path,
) -> None:
    bootstrap = own_broker.bootstrap
    gens = make_generations(deepseek, 120, seed=841, prefix="eos-broker")
    records = interleave(gens, seed=842)
    half = len(records) // 2
    # A transactional call that never returns after the restart (librdkafka once kept a
    # retired broker as its group coordinator) holds its partition for the step timeout:
    # longer than the whole wait below.
    w = own_worker(own_broker, redis_url, tmp_path, *EOS, "--step-timeout-s", "150")
    try:
        asyncio.run(publish(bootstrap, "in", records[:half], FIXED_TS_MS))
        with Tail(bootstrap, "out", isolation_level="read_committed") as tail:
            tail.wait(lambda o: len(o) >= 50, 60, "the worker to be busy")
        own_broker.kill()
        time.sleep(3.0)
        assert w.alive, w.log_tail()
        own_broker.start()
        asyncio.run(publish(bootstrap, "in", records[half:], FIXED_TS_MS))
        with Tail(bootstrap, "out", isolation_level="read_committed") as tail:
            outputs = wait_done_or_dump(tail, gens, w, 120)
        exactly_once(outputs, gens, records)
        assert w.alive, w.log_tail()
    finally:
        if w.alive:
            w.stop()


def test_one_broker_of_three_killed_and_restarted_repeats_nothing(
    deepseek: Tokenizer,
    own_cluster: KafkaCluster,
    redis_url: str,
    tmp_path: Path,
) -> None:
    """A replicated cluster loses the node that coordinates the worker's transactions
    (SIGKILL, mid-stream): leadership of its partitions moves to the live replicas, the
    worker carries on against two nodes, and the node comes back and catches up. Unlike a
    single broker's restart, no partition is left without a leader, so every transaction
    marker is written."""
    bootstrap = own_cluster.bootstrap
    gens = make_generations(deepseek, 120, seed=871, prefix="eos-cluster")
    records = interleave(gens, seed=872)
    half = len(records) // 2
    w = own_worker(own_cluster, redis_url, tmp_path, *EOS, replication_factor=3)
    topics = ["in", "out", TRANSACTION_STATE]
    try:
        asyncio.run(publish(bootstrap, "in", records[:half], FIXED_TS_MS))
        with Tail(bootstrap, "out", isolation_level="read_committed") as tail:
            tail.wait(lambda o: len(o) >= 50, 60, "the worker to be busy")
            parts = describe(bootstrap, topics)
            victim = parts[(TRANSACTION_STATE, 0)]["leader"]
            led = [key for key, p in parts.items() if p["leader"] == victim]
            own_cluster.node(victim).kill()
            at_kill = len(tail.snapshot())
            live = {n.node_id for n in own_cluster.nodes} - {victim}
            wait_partitions(bootstrap, topics, led_by_live_nodes(live), 30, "the failover")
            asyncio.run(publish(bootstrap, "in", records[half:], FIXED_TS_MS))
            # Committed transactions with the node still down: the failover carried them.
            tail.wait(lambda o: len(o) >= at_kill + 50, 90, "outputs with a node down")
            assert w.alive, w.log_tail()
            own_cluster.node(victim).start()
            outputs = wait_done_or_dump(tail, gens, w, 150)
        verdict = exactly_once(outputs, gens, records)
        print(f"node {victim} killed, leading {led}; at the kill {at_kill} outputs; {verdict}")
        assert w.alive, w.log_tail()
        assert w.stop() == 0, w.log_tail()
    finally:
        if w.alive:
            w.stop()


def test_broker_frozen_past_the_transaction_timeout_repeats_nothing(
    deepseek: Tokenizer,
    own_broker: kafka_server.ApacheKafka,
    redis_url: str,
    tmp_path: Path,
) -> None:
    """SIGSTOP while transactions are open: their produce requests sit unanswered in the
    broker's queue past the producer's message timeout (the transaction timeout), so the
    worker gives those batches up and does them again, while the broker still holds the
    first attempt's requests and serves them once it runs again."""
    bootstrap = own_broker.bootstrap
    gens = make_generations(deepseek, 240, seed=861, prefix="eos-frozen")
    records = interleave(gens, seed=862)
    half = len(records) // 2
    w = own_worker(own_broker, redis_url, tmp_path, *EOS, "--transaction-timeout-ms", "4000")
    try:
        wait_log(w, "partitions assigned", 60)
        asyncio.run(publish(bootstrap, "in", records[:half], FIXED_TS_MS))
        with Tail(bootstrap, "out", isolation_level="read_committed") as tail:
            tail.wait(lambda o: len(o) >= 50, 60, "the worker to be busy")
        own_broker.pause()
        try:
            time.sleep(7.0)  # (past the 4 s transaction timeout, and so the messages')
            assert w.alive, w.log_tail()
        finally:
            own_broker.resume()
        asyncio.run(publish(bootstrap, "in", records[half:], FIXED_TS_MS))
        with Tail(bootstrap, "out", isolation_level="read_committed") as tail:
            outputs = wait_done_or_dump(tail, gens, w, 150)
        exactly_once(outputs, gens, records)
        assert w.alive, w.log_tail()
        assert w.stop() == 0, w.log_tail()
    finally:
        if w.alive:
            w.stop()
