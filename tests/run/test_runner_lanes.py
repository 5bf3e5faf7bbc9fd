"""The runner's lane bookkeeping, at its seams (the consumer is a stand-in here; the
integration and chaos suites run the real thing)."""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

import pytest
from aiokafka import TopicPartition

from tests.support.helpers import ListSink, NoGroupLag, chunk
from worker.adapters.state.memory_store import MemoryStore
from worker.config import load_registry
from worker.run import runner as runner_module
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


# -- a producer per lane ----------------------------------------------------------------


class _TwoPartitions:
    """A consumer of two partitions, `in`/0 holding request `a`'s records and `in`/1 request
    `b`'s; commits are recorded."""

    def __init__(self) -> None:
        self.tps = [TopicPartition("in", 0), TopicPartition("in", 1)]
        self.values = {tp: _request(rid) for tp, rid in zip(self.tps, "ab", strict=True)}
        self.at = dict.fromkeys(self.tps, 0)
        self.committed: dict[TopicPartition, int] = {}

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    def subscribe(self, topics: list[str], listener: Any) -> None:
        pass

    def assignment(self) -> set[TopicPartition]:
        return set(self.tps)

    async def getmany(
        self, *tps: TopicPartition, timeout_ms: int, max_records: int
    ) -> dict[TopicPartition, list[Any]]:
        got = {}
        for tp in tps:
            start, values = self.at[tp], self.values[tp]
            if start < len(values):
                self.at[tp] = len(values)
                got[tp] = [
                    argparse.Namespace(key=None, value=v, timestamp=0, offset=start + i, headers=())
                    for i, v in enumerate(values[start:])
                ]
        if not got:
            await asyncio.sleep(timeout_ms / 1000)
        return got

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.at[tp] = offset

    async def position(self, tp: TopicPartition) -> int:
        return self.at[tp]

    def highwater(self, tp: TopicPartition) -> int | None:
        return None

    async def commit(self, offsets: dict[TopicPartition, Any]) -> None:
        self.committed.update({tp: getattr(o, "offset", o) for tp, o in offsets.items()})


class _Producer:
    """What a lane's KafkaSink is built on: its sink keeps what the lane sent."""

    def __init__(self) -> None:
        self.sink = ListSink()
        self.started = self.stopped = False

    async def start(self) -> None:
        self.started = True

    async def stop(self) -> None:
        self.stopped = True


def _request(rid: str) -> list[bytes]:
    records = [chunk(rid, i, [100 + i], "length" if i == 2 else None) for i in range(3)]
    return [json.dumps(r).encode() for r in records]


def test_each_lane_sends_through_a_producer_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """aiokafka keeps one produce request in flight per broker: lanes sharing a producer
    waited for each other's acks. Each lane gets its own, started at connect
    and stopped at the end, and its batches' outputs go through it alone."""
    consumer, producers = _TwoPartitions(), []

    def make_producer(s: Any) -> _Producer:
        producers.append(_Producer())
        return producers[-1]

    async def nothing(*args: Any) -> None:
        pass

    monkeypatch.setattr(runner_module, "make_producer", make_producer)
    monkeypatch.setattr(runner_module, "make_consumer", lambda s: consumer)
    monkeypatch.setattr(runner_module, "check_access", nothing)
    monkeypatch.setattr(runner_module, "check_bootstrapped", lambda c: None)
    monkeypatch.setattr(runner_module, "fetch_each_partition", lambda c: None)
    monkeypatch.setattr(runner_module, "wait_longer_when_whole", lambda c, ms: None)
    monkeypatch.setattr(runner_module, "GroupLag", NoGroupLag)
    monkeypatch.setattr(runner_module, "KafkaSink", lambda producer, *a: producer.sink)

    async def body() -> None:
        runner = _runner("--lanes", "2", "--commit-interval-ms", "0")
        task = asyncio.create_task(runner.run())
        async with asyncio.timeout(20):
            while consumer.committed != dict.fromkeys(consumer.tps, 3):
                assert not task.done(), "the worker stopped"
                await asyncio.sleep(0.02)
            runner.request_stop()
            assert await task == 0

    asyncio.run(body())
    assert len(producers) == 2 and all(p.started and p.stopped for p in producers)
    # Lane 0 holds in/0 (request a), lane 1 holds in/1 (request b): each one's outputs
    # went through its own producer, and all of them.
    for producer, rid in zip(producers, "ab", strict=True):
        keys = {o.key for o in producer.sink.outputs}
        assert keys == {rid}, keys
        assert '"finish_reason":"length"' in producer.sink.outputs[-1].value.decode()
