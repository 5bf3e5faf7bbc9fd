"""The broker itself fails under a running worker — only a real Apache Kafka allows it: the
worker backs off while it is gone (killed) or silent (frozen past the clients' request
timeout), commits nothing it could not deliver, and resumes on the same log. Verified as
everywhere in the chaos suites: after dropping repeated (request, seq, part) triples every
request is complete and exact, and every repeat has identical bytes."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from tests.chaos.tools import FIXED_TS_MS, Tail, wait_log, wait_until
from tests.integration.harness import (
    Generation,
    WorkerProcess,
    interleave,
    make_generations,
    publish,
    verify,
)
from tests.support.kafka_cluster import KafkaCluster
from tests.support.server_fixtures import TANSU, kafka_plan
from tests.support.servers import create_topics
from worker.adapters.local import kafka_server

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

# How long the broker stays dead: past the clients' reconnect backoff, several times.
DOWN_S = 3.0
# How long the worker may take to finish every request once the broker is back.
RECOVERY_S = 240.0
# The worker's `--request-timeout-ms` here (40 s by default, aiokafka's): a frozen broker
# is noticed only when a request sent to it has waited this long.
REQUEST_TIMEOUT_S = 6.0
# Once the clients timed out, the broker stays frozen this much longer: the worker keeps
# trying against a broker that accepts connections but answers nothing.
FROZEN_AFTER_TIMEOUT_S = 3.0


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[kafka_server.ApacheKafka]:
    """A broker of this test's own (the session's is shared), its log kept in tmp_path."""
    if kafka_plan().kind == TANSU:
        pytest.skip("tansu keeps no log to restart on")
    # No retention: every record carries FIXED_TS_MS (2023), far older than the default
    # 7 days, so the broker's first retention check (30 s after it starts) would delete
    # records the worker has not read yet, and the worker would skip to the new log start.
    config = {"log.retention.ms": "-1"}
    with kafka_server.ApacheKafka(
        data_dir=tmp_path / "kafka", config=config, progress=lambda _: None
    ) as b:
        yield b


def in_flight(gens: list[Generation]) -> tuple[list[Generation], list[Generation]]:
    """Each request cut in two: its first half (published before the fault) and the rest."""
    half = {g.request_id: len(g.records) // 2 for g in gens}
    heads = [Generation(g.request_id, g.ids, "", g.records[: half[g.request_id]]) for g in gens]
    rests = [Generation(g.request_id, g.ids, "", g.records[half[g.request_id] :]) for g in gens]
    return heads, rests


def own_worker(
    broker: kafka_server.ApacheKafka | KafkaCluster,
    redis_url: str,
    tmp_path: Path,
    *extra: str,
    replication_factor: int = 1,
) -> WorkerProcess:
    """Topics in, out (4 partitions) and dlq on the test's own broker or cluster, and a
    worker on them that outlasts a broker outage (`--outage-limit-s 120`)."""
    rf = replication_factor
    asyncio.run(create_topics(broker.bootstrap, ["in", "out"], 4, replication_factor=rf))
    asyncio.run(create_topics(broker.bootstrap, ["dlq"], 1, replication_factor=rf))
    return WorkerProcess(
        broker.bootstrap,
        redis_url,
        "in",
        "out",
        "dlq",
        f"g-{uuid.uuid4().hex[:8]}",
        f"t{uuid.uuid4().hex[:8]}:",
        extra=["--outage-limit-s", "120", *extra],
        log_path=tmp_path / "worker.log",
    ).start()


def test_broker_killed_mid_run_and_restarted_on_its_log_loses_nothing(
    deepseek: Tokenizer, own_broker: kafka_server.ApacheKafka, redis_url: str, tmp_path: Path
) -> None:
    topics = {"input": "in", "output": "out", "dlq": "dlq"}
    first = make_generations(deepseek, 60, seed=501, prefix="first")
    # In flight across the crash: their first half before it, the rest after.
    second = [
        g for g in make_generations(deepseek, 80, seed=502, prefix="second") if len(g.records) >= 3
    ][:60]
    heads, rests = in_flight(second)
    w = own_worker(own_broker, redis_url, tmp_path)
    try:
        asyncio.run(
            publish(
                own_broker.bootstrap,
                topics["input"],
                interleave(first + heads, seed=503),
                FIXED_TS_MS,
            )
        )
        with Tail(own_broker.bootstrap, topics["output"]) as tail:
            tail.wait_done([g.request_id for g in first[:10]])
        own_broker.kill()  # SIGKILL while the worker consumes
        time.sleep(DOWN_S)  # the worker's clients find it gone and keep trying
        assert w.alive, w.log_tail()
        own_broker.start()  # the same ports, the same log
        asyncio.run(
            publish(own_broker.bootstrap, topics["input"], interleave(rests, seed=504), FIXED_TS_MS)
        )
        with Tail(own_broker.bootstrap, topics["output"]) as tail:
            # Longer than elsewhere: once, under CI load, the worker's Kafka clients stayed
            # silent for ~2 min after the restart (aiokafka's coordinator lookup and its
            # metadata refresh each waiting out a connect, bounded only by the 40 s request
            # timeout, while the restarting broker took no connections), and 90 s ran out.
            outputs = tail.wait_done([g.request_id for g in first + second], RECOVERY_S)
        verify(outputs, first + second)
        assert w.alive, w.log_tail()
    finally:
        if w.alive:
            w.stop()


def test_broker_frozen_past_the_request_timeout_loses_nothing(
    deepseek: Tokenizer, own_broker: kafka_server.ApacheKafka, redis_url: str, tmp_path: Path
) -> None:
    """SIGSTOP, not SIGKILL: the connections stay open and nothing answers, so the worker's
    clients learn of it only from their request timeout; the worker must back off, not die."""
    topics = {"input": "in", "output": "out", "dlq": "dlq"}
    first = make_generations(deepseek, 60, seed=601, prefix="first")
    # In flight across the freeze: their first half before it, the rest after.
    second = [
        g for g in make_generations(deepseek, 80, seed=602, prefix="second") if len(g.records) >= 3
    ][:60]
    heads, rests = in_flight(second)
    w = own_worker(
        own_broker, redis_url, tmp_path, "--request-timeout-ms", str(int(REQUEST_TIMEOUT_S * 1000))
    )

    def timed_out() -> bool:
        assert w.alive, w.log_tail()
        return "RequestTimedOutError" in w.log_text()

    try:
        asyncio.run(
            publish(
                own_broker.bootstrap,
                topics["input"],
                interleave(first + heads, seed=603),
                FIXED_TS_MS,
            )
        )
        with Tail(own_broker.bootstrap, topics["output"]) as tail:
            tail.wait_done([g.request_id for g in first[:10]])
        assert not timed_out(), w.log_tail()
        own_broker.pause()  # SIGSTOP while the worker consumes
        frozen_at = time.monotonic()
        # The freeze bites: the worker's fetch and heartbeat requests time out (logged by
        # aiokafka), and the worker is alive all along.
        wait_until(timed_out, REQUEST_TIMEOUT_S + 30, "a request timeout in the log", every_s=0.2)
        noticed_s = time.monotonic() - frozen_at
        assert noticed_s >= REQUEST_TIMEOUT_S - 1, f"timed out after {noticed_s:.1f}s only"
        deadline = time.monotonic() + FROZEN_AFTER_TIMEOUT_S
        while time.monotonic() < deadline:
            assert w.alive, w.log_tail()
            time.sleep(0.2)
        own_broker.resume()
        asyncio.run(
            publish(own_broker.bootstrap, topics["input"], interleave(rests, seed=604), FIXED_TS_MS)
        )
        with Tail(own_broker.bootstrap, topics["output"]) as tail:
            outputs = tail.wait_done([g.request_id for g in first + second])
        verify(outputs, first + second)
        assert w.alive, w.log_tail()
        assert w.stop() == 0, w.log_tail()
    finally:
        if w.alive:
            w.stop()


def test_clients_stalled_by_a_frozen_broker_are_replaced_and_nothing_is_lost(
    deepseek: Tokenizer, own_broker: kafka_server.ApacheKafka, redis_url: str, tmp_path: Path
) -> None:
    """The in-process rebuild (#24) with real clients: a broker frozen while batches are in
    flight makes two Kafka steps in a row wait out a short step timeout; the worker closes
    every Kafka client (the frozen broker answers none of the goodbyes: each close is
    bounded), reconnects once the broker is back, and the new consumer finishes the work."""
    topics = {"input": "in", "output": "out", "dlq": "dlq"}
    first = make_generations(deepseek, 600, seed=701, prefix="first")
    second = [
        g for g in make_generations(deepseek, 80, seed=702, prefix="second") if len(g.records) >= 3
    ][:40]
    heads, rests = in_flight(second)
    w = own_worker(own_broker, redis_url, tmp_path, "--step-timeout-s", "2")
    try:
        wait_log(w, "partitions assigned", 60)
        asyncio.run(
            publish(
                own_broker.bootstrap,
                topics["input"],
                interleave(first + heads, seed=703),
                FIXED_TS_MS,
            )
        )
        # At once: the worker is still working through them (a few seconds of work), so
        # batches are in flight and their produce or commit waits on the frozen broker.
        own_broker.pause()
        try:
            wait_until(lambda: "Kafka clients stalled" in w.log_text(), 60, "the clients replaced")
            time.sleep(3.0)  # the new clients try to connect to the frozen broker meanwhile
            assert w.alive, w.log_tail()
        finally:
            own_broker.resume()
        asyncio.run(
            publish(own_broker.bootstrap, topics["input"], interleave(rests, seed=704), FIXED_TS_MS)
        )
        with Tail(own_broker.bootstrap, topics["output"]) as tail:
            outputs = tail.wait_done([g.request_id for g in first + second], RECOVERY_S)
        verify(outputs, first + second)
        assert "replacing them" in w.log_text()
        assert w.alive, w.log_tail()
        assert w.stop() == 0, w.log_tail()
    finally:
        if w.alive:
            w.stop()
