"""The broker itself fails under a running worker — only a real Apache Kafka allows it: the
worker backs off while it is gone, commits nothing it could not deliver, and resumes on the
same log. Verified as everywhere in the chaos suites: after dropping repeated (request,
seq, part) triples every request is complete and exact, and every repeat has identical
bytes."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from tests.chaos.tools import FIXED_TS_MS, Tail
from tests.integration.harness import (
    Generation,
    WorkerProcess,
    interleave,
    make_generations,
    publish,
    verify,
)
from tests.server_fixtures import TANSU, kafka_plan
from tests.servers import create_topics
from worker.adapters import kafka_server

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

# How long the broker stays dead: past the clients' reconnect backoff, several times.
DOWN_S = 3.0


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[kafka_server.ApacheKafka]:
    """A broker of this test's own (the session's is shared), its log kept in tmp_path."""
    if kafka_plan().kind == TANSU:
        pytest.skip("tansu keeps no log to restart on")
    with kafka_server.ApacheKafka(data_dir=tmp_path / "kafka", progress=lambda _: None) as b:
        yield b


def test_broker_killed_mid_run_and_restarted_on_its_log_loses_nothing(
    deepseek: Tokenizer, own_broker: kafka_server.ApacheKafka, redis_url: str, tmp_path: Path
) -> None:
    topics = {"input": "in", "output": "out", "dlq": "dlq"}
    asyncio.run(create_topics(own_broker.bootstrap, [topics["input"], topics["output"]], 4))
    asyncio.run(create_topics(own_broker.bootstrap, [topics["dlq"]], 1))
    first = make_generations(deepseek, 60, seed=501, prefix="first")
    # In flight across the crash: their first half before it, the rest after.
    second = [
        g for g in make_generations(deepseek, 80, seed=502, prefix="second") if len(g.records) >= 3
    ][:60]
    half = {g.request_id: len(g.records) // 2 for g in second}
    heads = [Generation(g.request_id, g.ids, "", g.records[: half[g.request_id]]) for g in second]
    rests = [Generation(g.request_id, g.ids, "", g.records[half[g.request_id] :]) for g in second]
    w = WorkerProcess(
        own_broker.bootstrap,
        redis_url,
        topics["input"],
        topics["output"],
        topics["dlq"],
        f"g-{uuid.uuid4().hex[:8]}",
        f"t{uuid.uuid4().hex[:8]}:",
        extra=["--outage-limit-s", "120"],
        log_path=tmp_path / "worker.log",
    ).start()
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
            outputs = tail.wait_done([g.request_id for g in first + second])
        verify(outputs, first + second)
        assert w.alive, w.log_tail()
    finally:
        if w.alive:
            w.stop()
