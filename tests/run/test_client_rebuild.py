"""Stalled Kafka clients are replaced in-process (after a broker restart under
load aiokafka's group coordinator never came back; every commit waited out its step
timeout until the worker gave up at the outage limit). The Runner's real lifecycle runs
here over clients faked at its one seam (`Runner._connect`)."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Mapping
from typing import Any

import pytest
from aiokafka import TopicPartition

from tests.support.helpers import ListSink, NoGroupLag, chunk
from worker.adapters.state.memory_store import MemoryStore
from worker.config import load_registry
from worker.run import runner as runner_module
from worker.run.runner import Runner
from worker.settings import add_flags, from_args

TP = TopicPartition("in", 0)


class FakeConsumer:
    """One partition holding `values` from offset 0. `stalled`: every commit waits for
    ever, as aiokafka's did with a coordinator that never came back."""

    def __init__(self, values: list[bytes], stalled: bool) -> None:
        self.values = values
        self.stalled = stalled
        self.position_ = 0
        self.committed: dict[TopicPartition, int] = {}
        self.commits_tried = 0
        self.stopped = False

    def subscribe(self, topics: list[str], listener: Any) -> None:
        pass

    def assignment(self) -> set[TopicPartition]:
        return {TP}

    async def getmany(
        self, *tps: TopicPartition, timeout_ms: int, max_records: int
    ) -> Mapping[TopicPartition, list[Any]]:
        start = self.position_
        if start >= len(self.values):
            await asyncio.sleep(timeout_ms / 1000)
            return {}
        end = min(len(self.values), start + max_records)
        self.position_ = end
        return {
            TP: [
                argparse.Namespace(key=b"r", value=v, timestamp=0, offset=start + i, headers=())
                for i, v in enumerate(self.values[start:end])
            ]
        }

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.position_ = offset

    async def position(self, tp: TopicPartition) -> int:
        return self.position_

    def highwater(self, tp: TopicPartition) -> int | None:
        return None

    async def commit(self, offsets: Mapping[TopicPartition, Any]) -> None:
        self.commits_tried += 1
        if self.stalled:
            await asyncio.Event().wait()
        self.committed.update({tp: getattr(o, "offset", o) for tp, o in offsets.items()})

    async def stop(self) -> None:
        self.stopped = True


class FakeProducer:
    async def stop(self) -> None:
        pass


def _values(n: int) -> list[bytes]:
    records = [chunk("r", i, [100 + i], "length" if i == n - 1 else None) for i in range(n)]
    return [json.dumps(r).encode() for r in records]


def _runner(monkeypatch: pytest.MonkeyPatch, stalls: int, *argv: str) -> tuple[Runner, Any]:
    """A Runner whose first `stalls` consumers never finish a commit; then good ones."""
    parser = argparse.ArgumentParser()
    add_flags(parser, environ={})
    s = from_args(parser.parse_args(["--step-timeout-s", "0.2", "--lanes", "1", *argv]))
    runner = Runner(s, load_registry(None), MemoryStore())
    consumers: list[FakeConsumer] = []
    sink = ListSink()

    async def connect(exactly_once: bool) -> None:
        consumer = FakeConsumer(_values(4), stalled=len(consumers) < stalls)
        consumers.append(consumer)
        runner.consumer = consumer  # type: ignore[assignment]
        runner.producers = [FakeProducer()]  # type: ignore[list-item]

    monkeypatch.setattr(runner, "_connect", connect)
    monkeypatch.setattr(runner_module, "GroupLag", NoGroupLag)
    monkeypatch.setattr(runner_module, "KafkaSink", lambda *a: sink)
    return runner, (consumers, sink)


def test_stalled_commits_replace_the_clients_and_the_new_ones_finish_the_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def body() -> None:
        runner, (consumers, sink) = _runner(monkeypatch, 1)
        task = asyncio.create_task(runner.run())
        deadline = asyncio.get_running_loop().time() + 20
        while len(consumers) < 2 or consumers[1].committed.get(TP) != 4:
            assert not task.done(), "the worker stopped"
            assert asyncio.get_running_loop().time() < deadline, "no new clients"
            await asyncio.sleep(0.02)
        runner.request_stop()
        assert await asyncio.wait_for(task, 5) == 0
        first, second = consumers
        # Two commits timed out in a row on the first clients, then they were closed.
        assert first.commits_tried == 2 and first.stopped and first.committed == {}
        assert runner.metrics.client_rebuilds._value.get() == 1
        # The new consumer read from the committed offset (none: the start) and finished.
        assert second.committed == {TP: 4}
        # The batch was done three times: first (its commit, in the background, stalled),
        # again after that failure (rewound: its commit stalled too), and by the new
        # clients. Its outputs had gone out and its states were saved before the first
        # commit (at-least-once: produce, save, then commit), so the two redos found every
        # record done and sent nothing twice.
        assert runner.totals.batches == 3
        assert runner.totals.records == {"ok": 4, "duplicate": 8}
        assert runner.totals.outputs == 2
        last = json.loads(sink.outputs[-1].value)["choices"][0]
        assert last["finish_reason"] == "length"

    asyncio.run(body())


def test_a_rebuild_does_not_restart_the_outage_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clients that stall every time still meet the outage limit (exit 1): only a batch
    done ends an outage, not a connect."""

    async def body() -> None:
        runner, (consumers, _) = _runner(monkeypatch, 1000, "--outage-limit-s", "1.5")
        assert await asyncio.wait_for(runner.run(), 20) == 1
        assert len(consumers) >= 2 and all(c.stopped for c in consumers)
        assert runner.metrics.client_rebuilds._value.get() == len(consumers) - 1

    asyncio.run(body())


def test_timeouts_on_redis_steps_do_not_rebuild_the_kafka_clients(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def body() -> None:
        runner, (consumers, _) = _runner(monkeypatch, 0, "--outage-limit-s", "1")
        store = runner.store

        async def hang(*args: Any, **kwargs: Any) -> Any:
            await asyncio.Event().wait()

        monkeypatch.setattr(store, "load_many", hang)
        assert await asyncio.wait_for(runner.run(), 20) == 1
        assert len(consumers) == 1
        assert runner.metrics.client_rebuilds._value.get() == 0

    asyncio.run(body())
