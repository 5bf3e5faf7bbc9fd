"""The runner's lane bookkeeping, at its seams (the consumer is a stand-in here; the
integration and chaos suites run the real thing)."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from aiokafka import TopicPartition

from worker.adapters.state.memory_store import MemoryStore
from worker.config import load_registry
from worker.run.runner import Runner
from worker.settings import add_flags, from_args


def _runner(*argv: str) -> Runner:
    parser = argparse.ArgumentParser()
    add_flags(parser, environ={})
    return Runner(from_args(parser.parse_args(list(argv))), load_registry(None), MemoryStore())


class _Assigned:
    def __init__(self, tps: set[TopicPartition]) -> None:
        self.tps = tps

    def assignment(self) -> set[TopicPartition]:
        return self.tps


def test_lanes_share_the_partitions_out_disjointly_and_completely() -> None:
    for lanes, partitions in [(1, 4), (2, 4), (2, 5), (3, 12), (5, 4)]:
        r = _runner("--lanes", str(lanes))
        tps = {TopicPartition(t, p) for t in ("a", "b") for p in range(partitions)}
        r.consumer = _Assigned(tps)  # type: ignore[assignment]
        shares = [r.lane_source(i).share() for i in range(lanes)]
        flat = [tp for share in shares for tp in share]
        assert sorted(flat) == sorted(tps) and len(flat) == len(set(flat))
        sizes = [len(share) for share in shares]
        assert max(sizes) - min(sizes) <= 1  # dealt round robin


def test_a_rebalance_waits_for_the_batches_in_flight() -> None:
    async def body() -> list[str]:
        r = _runner("--session-timeout-ms", "10000")
        events: list[str] = []
        batch: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        r.assignment.in_flight.add(batch)

        async def finish_batch() -> None:
            await asyncio.sleep(0.05)
            events.append("batch committed")
            batch.set_result(None)

        async def revoke() -> None:
            await r.on_revoked([TopicPartition("in", 0)])
            events.append("revoked")

        await asyncio.gather(revoke(), finish_batch())
        return events

    assert asyncio.run(body()) == ["batch committed", "revoked"]


def test_a_stuck_batch_holds_a_rebalance_for_half_the_session_timeout_at_most() -> None:
    async def body() -> float:
        r = _runner("--session-timeout-ms", "400")
        r.assignment.in_flight.add(asyncio.get_running_loop().create_future())  # never done
        loop = asyncio.get_running_loop()
        started = loop.time()
        await r.on_revoked([TopicPartition("in", 0)])
        return loop.time() - started

    waited = asyncio.run(body())
    assert 0.15 <= waited < 1.0
