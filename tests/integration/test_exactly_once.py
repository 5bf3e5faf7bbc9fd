"""`run --guarantee exactly-once` end to end on the real Apache Kafka broker: each input
partition's outputs, offsets and states in one transaction; a read_committed consumer sees
every output exactly once, with no dedupe."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from tokenizers import Tokenizer

from tests.chaos.tools import group_offsets, scrape, wait_until
from tests.integration.harness import (
    WorkerProcess,
    done_count,
    interleave,
    make_generations,
    publish,
    read_all,
    verify,
)
from tests.server_fixtures import TANSU, kafka_plan
from tests.servers import free_port

pytestmark = pytest.mark.integration

EOS = ("--guarantee", "exactly-once")


@pytest.fixture(autouse=True)
def _transactions() -> None:
    if kafka_plan().kind == TANSU:
        pytest.skip("tansu has no transactions")


def read_committed(bootstrap: str, topic: str, requests: int) -> list:  # type: ignore[type-arg]
    return asyncio.run(
        read_all(
            bootstrap,
            topic,
            lambda o: done_count(o) >= requests,
            isolation_level="read_committed",
        )
    )


@pytest.mark.parametrize("lanes", [1, 2])
def test_hundreds_of_interleaved_requests_once_each(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
    lanes: int,
) -> None:
    gens = make_generations(deepseek, 300, seed=701)
    port = free_port()
    worker = worker_factory(*EOS, "--lanes", str(lanes), metrics_port=port)
    ends = asyncio.run(publish(kafka_bootstrap, topics["input"], interleave(gens, seed=702)))
    outputs = read_committed(kafka_bootstrap, topics["output"], len(gens))
    verdict = verify(outputs, gens)
    assert verdict.repeats == 0, verdict
    # The offsets went in with the transactions: the group's committed offsets are the
    # input's ends, and the lag KEDA would read (committed against the last stable
    # offset) falls to 0 on the worker's own gauge.
    wait_until(
        lambda: (
            group_offsets(kafka_bootstrap, worker.group_id, topics["input"], 4)
            == {p: ends.get(p, 0) for p in range(4)}
        ),
        30,
        "the transactions' offsets to be committed",
    )
    wait_until(
        lambda: scrape(port).get("derender_group_lag_sum") == 0.0,
        30,
        "derender_group_lag_sum 0",
    )
    assert worker.stop() == 0, worker.log_tail()
    assert "stopped after" in worker.log_tail()
