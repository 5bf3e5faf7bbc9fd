"""Reply routing in the loop and the Kafka sink: every output of a request that names a
`reply_partition` carries it (`OutRecord.partition`), failures included, and the sink
writes it to that partition of the output topic; one the topic lacks goes to the key's
partition with a warning. Requests without it are routed by key, as before."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from aiokafka.partitioner import DefaultPartitioner
from tokenizers import Tokenizer

from tests.support.helpers import Run, chunk, end
from worker.adapters.broker.kafka_sink import KafkaSink
from worker.batch.pipeline import decode_batch, fail_refused, process_batch
from worker.config import load_registry
from worker.constants import CONTROL, DLQ, H_KIND
from worker.core.state import decode_state
from worker.ports import InRecord, OutRecord

REGISTRY = load_registry(None)


def ids(tok: Tokenizer, text: str) -> list[int]:
    return list(tok.encode(text, add_special_tokens=False).ids)


def by_request(outputs: list[OutRecord]) -> dict[str, set[int | None]]:
    seen: dict[str, set[int | None]] = {}
    for o in outputs:
        seen.setdefault(o.key, set()).add(o.partition)
    return seen


def test_every_output_of_a_request_carries_its_reply_partition(deepseek: Tokenizer) -> None:
    run = Run(REGISTRY, control=True)
    run.feed(
        chunk("a", 0, ids(deepseek, "Hello"), reply_partition=2, chat_request={"stop": ["lo w"]}),
        chunk("b", 0, ids(deepseek, "Hello")),
        chunk("c", 0, ids(deepseek, "Hi"), reply_partition=0),
    )
    run.feed(
        chunk("a", 1, ids(deepseek, " world again"), reply_partition=7),  # (ignored)
        chunk("b", 1, ids(deepseek, " world")),
        chunk("c", 3, ids(deepseek, "gap")),  # fails c: its error goes to 0 too
    )
    run.feed(end("a", 2), end("b", 2), end("c", 4))
    kinds = {(o.key, o.kind) for o in run.outputs}
    assert {("a", "chunk"), ("a", "done"), ("a", CONTROL), ("c", "error"), ("c", "done")} <= kinds
    assert by_request(run.outputs) == {"a": {2}, "b": {None}, "c": {0}}
    stored = run.stored("a")
    assert stored is not None and decode_state(stored.blob).reply_partition == 2


def test_an_invalid_reply_partition_dead_letters_the_record(deepseek: Tokenizer) -> None:
    run = Run(REGISTRY)
    run.feed(chunk("a", 0, ids(deepseek, "Hi"), reply_partition=-3))
    assert [d.kind for d in run.dead] == [DLQ]
    assert run.dead[0].partition is None
    (error,) = run.outputs
    assert (
        error.kind == "error" and "reply_partition" in json.loads(error.value)["error"]["message"]
    )
    assert error.partition is None  # (the record could not be read: no partition to trust)


def test_an_error_in_place_of_a_refused_output_keeps_the_partition(deepseek: Tokenizer) -> None:
    decoded = decode_batch(
        [InRecord(json.dumps(chunk("a", 0, ids(deepseek, "Hi"), reply_partition=5)).encode())],
        1 << 20,
    )
    result = process_batch(decoded, {}, REGISTRY)
    assert {o.partition for o in result.outputs} == {5}
    (error,) = fail_refused(result, result.outputs[-1:])
    assert error.kind == "error" and error.partition == 5
    assert decode_state(result.writes["a"].blob).reply_partition == 5


# -- the Kafka sink, over a producer stand-in (the seam: aiokafka's batch calls) ----------


class _Batch:
    def __init__(self) -> None:
        self.records: list[tuple[bytes | None, bytes]] = []

    def append(self, *, key: bytes | None, value: bytes, timestamp: Any, headers: Any) -> object:
        self.records.append((key, value))
        return object()


class _Producer:
    def __init__(self, partitions: dict[str, int]) -> None:
        self.partitions = partitions
        self.sent: list[tuple[str, int, bytes | None, bytes]] = []

    async def partitions_for(self, topic: str) -> set[int]:
        return set(range(self.partitions[topic]))

    def create_batch(self) -> _Batch:
        return _Batch()

    async def send_batch(
        self, batch: _Batch, topic: str, *, partition: int
    ) -> asyncio.Future[None]:
        self.sent += [(topic, partition, k, v) for k, v in batch.records]
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


def out(key: str, n: int, partition: int | None, kind: str = "chunk") -> OutRecord:
    return OutRecord(key, f"{key}{n}".encode(), [(H_KIND, kind.encode())], kind, None, partition)


def key_partition(key: str, count: int) -> int:
    parts = list(range(count))
    return int(DefaultPartitioner()(key.encode(), parts, parts))


def test_the_sink_writes_each_output_to_its_reply_partition(
    caplog: pytest.LogCaptureFixture,
) -> None:
    producer = _Producer({"out": 4, "dlq": 1, "ctl": 2})
    counted: list[None] = []  # (the worker's metric, `derender_reply_partition_missing`)
    sink = KafkaSink(producer, "out", "dlq", "ctl", lambda: counted.append(None))  # type: ignore[arg-type]
    outputs = [
        out("a", 0, 3),
        out("b", 0, None),
        out("a", 1, 3),
        out("c", 0, 9),  # the topic has no partition 9: the key's, and a warning
        out("a", 2, 3, CONTROL),  # control records go to their topic by key
        out("c", 1, 9),
        out("b", 1, None),
    ]
    dead = [out("d", 0, None, DLQ)]
    with caplog.at_level(logging.WARNING, "derender.worker"):
        asyncio.run(sink.send(outputs, dead))
        asyncio.run(sink.send([out("c", 2, 9)], []))
    where = {(t, k.decode() if k else None, v.decode()): p for t, p, k, v in producer.sent}
    assert where == {
        ("out", "a", "a0"): 3,
        ("out", "a", "a1"): 3,
        ("out", "b", "b0"): key_partition("b", 4),
        ("out", "b", "b1"): key_partition("b", 4),
        ("out", "c", "c0"): key_partition("c", 4),
        ("out", "c", "c1"): key_partition("c", 4),
        ("out", "c", "c2"): key_partition("c", 4),
        ("ctl", "a", "a2"): key_partition("a", 2),
        ("dlq", "d", "d0"): key_partition("d", 1),
    }
    # Per request, in order.
    assert [v for t, _, k, v in producer.sent if k == b"a" and t == "out"] == [b"a0", b"a1"]
    assert [v for t, _, k, v in producer.sent if k == b"c"] == [b"c0", b"c1", b"c2"]
    assert sink.misrouted.count == 3 and len(counted) == 3
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "request c names reply partition 9, which output topic out does not have "
        "(4 partitions): its outputs go to the key's partition"
    ]  # once per request
