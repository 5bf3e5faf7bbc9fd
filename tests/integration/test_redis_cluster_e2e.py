"""`derender-worker run --redis-mode cluster` end to end: the real broker, and the state in
a real Redis Cluster (3 masters with a replica each, the session's `redis_cluster_url`).
Hundreds of interleaved requests come out exact, under both guarantees, and their states
are spread over every master."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from tokenizers import Tokenizer

from tests.integration.harness import (
    WorkerProcess,
    done_count,
    interleave,
    make_generations,
    publish,
    read_all,
    verify,
)
from tests.support import servers
from tests.support.server_fixtures import TANSU, kafka_plan

pytestmark = pytest.mark.integration

CLUSTER = ("--redis-mode", "cluster")


def keys_per_master(seeds: str, prefix: str) -> dict[str, int]:
    """How many state keys under `prefix` each master holds."""
    host, port = seeds.removeprefix("redis://").split(",")[0].split(":")
    out: dict[str, int] = {}
    for entry in servers.redis_call(host, int(port), "CLUSTER", "SLOTS"):
        addr = (entry[2][0].decode(), int(entry[2][1]))
        if f"{addr[0]}:{addr[1]}" in out:
            continue
        with servers.RespConnection(*addr) as conn:
            cursor, n = b"0", 0
            while True:
                cursor, keys = conn.call("SCAN", cursor, "MATCH", f"{prefix}{{*", "COUNT", 1000)
                n += len(keys)
                if cursor == b"0":
                    break
        out[f"{addr[0]}:{addr[1]}"] = n
    return out


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_hundreds_of_interleaved_requests_are_exact_with_the_state_in_a_cluster(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    redis_cluster_url: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
    guarantee: str,
) -> None:
    if guarantee == "exactly-once" and kafka_plan().kind == TANSU:
        pytest.skip("tansu has no transactions")
    gens = make_generations(deepseek, 300, seed=1601)
    worker = worker_factory(
        *CLUSTER, "--guarantee", guarantee, "--lanes", "2", redis=redis_cluster_url
    )
    asyncio.run(publish(kafka_bootstrap, topics["input"], interleave(gens, seed=1602)))
    isolation = "read_committed" if guarantee == "exactly-once" else "read_uncommitted"
    outputs = asyncio.run(
        read_all(
            kafka_bootstrap,
            topics["output"],
            lambda o: done_count(o) >= len(gens),
            isolation_level=isolation,
        )
    )
    verdict = verify(outputs, gens)
    assert verdict.repeats == 0, verdict
    assert worker.stop() == 0, worker.log_tail()
    assert "stopped after" in worker.log_tail()
    # Every request left a tombstone, on whichever master serves its slot: all of them.
    counts = keys_per_master(redis_cluster_url, worker.state_prefix)
    assert sum(counts.values()) == len(gens), counts
    assert len(counts) == 3 and all(n > 0 for n in counts.values()), counts
