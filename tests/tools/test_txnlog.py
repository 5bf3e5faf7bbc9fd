"""bench/rebalance/txnlog.py against a real broker's files: a committed and an aborted
transaction read back as the batches, markers and coordinator states Kafka wrote."""

from __future__ import annotations

import asyncio
import importlib.util
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from aiokafka import AIOKafkaProducer

from tests.chaos.test_broker import own_broker as own_broker
from worker.adapters.local import kafka_server
from worker.adapters.local.embedded import create_topics

TOOL = Path(__file__).resolve().parents[2] / "bench" / "rebalance" / "txnlog.py"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("txnlog", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def _commit_then_abort(bootstrap: str) -> None:
    await create_topics(bootstrap, ["t"], 1)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="txnlog-test")
    await producer.start()
    try:
        async with producer.transaction():
            for i in range(3):
                await producer.send_and_wait("t", f"kept-{i}".encode(), key=b"k")
        await producer.begin_transaction()
        for i in range(2):
            await producer.send_and_wait("t", f"dropped-{i}".encode(), key=b"k")
        await producer.abort_transaction()
    finally:
        await producer.stop()


def _segment(data: Path, partition_dir: str) -> bytes:
    logs = sorted((data / partition_dir).glob("*.log"))
    return b"".join(p.read_bytes() for p in logs)


def _states(tool: ModuleType, data: Path) -> list[Any]:
    return [
        tool.txn_state(v)
        for b in tool.batches(_segment(data, "__transaction_state-0"))
        for _, _, _, v in tool.records(b)
        if v is not None
    ]


def test_a_committed_and_an_aborted_transaction_read_back(
    own_broker: kafka_server.ApacheKafka, tmp_path: Path
) -> None:
    asyncio.run(_commit_then_abort(own_broker.bootstrap))
    tool = _tool()
    data = tmp_path / "kafka"
    # The abort returns once it is decided (PrepareAbort); the coordinator writes the
    # markers and then CompleteAbort after that.
    deadline = time.monotonic() + 15
    while not any(s.state == "CompleteAbort" for s in _states(tool, data)):
        assert time.monotonic() < deadline, "the abort never completed"
        time.sleep(0.1)

    batches = list(tool.batches(_segment(data, "t-0")))
    pids = {b.producer_id for b in batches}
    assert len(pids) == 1, batches
    shape = [(b.control, b.count) if b.control else ("records", b.count) for b in batches]
    # (The producer may batch the sends: count records per side of each marker.)
    commit, abort = shape.index(("COMMIT", 1)), shape.index(("ABORT", 1))
    assert commit < abort == len(shape) - 1, shape
    assert sum(n for kind, n in shape[:commit] if kind == "records") == 3
    assert sum(n for kind, n in shape[commit + 1 : abort] if kind == "records") == 2
    assert all(b.transactional for b in batches)
    values = [v for b in batches if not b.control for _, _, _, v in tool.records(b)]
    assert values == [b"kept-0", b"kept-1", b"kept-2", b"dropped-0", b"dropped-1"]

    (pid,) = pids
    mine = [s for s in _states(tool, data) if s.producer_id == pid]
    seen = [s.state for s in mine]
    for step in ("Ongoing", "PrepareCommit", "CompleteCommit", "PrepareAbort", "CompleteAbort"):
        assert step in seen, seen
    assert seen.index("CompleteCommit") < seen.index("PrepareAbort")
    ongoing = next(s for s in mine if s.state == "Ongoing")
    assert ongoing.partitions == [("t", (0,))]
