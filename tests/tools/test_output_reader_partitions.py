"""`OutputReader(partitions=…)` against a real broker: a gateway replica reads only its reply
partitions, by assignment; a partition the topic lacks is refused at start."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from worker.constants import CHUNK, DONE_KIND, H_KIND, H_PART, H_REQUEST_ID, H_SEQ
from worker.tools.output_reader import OutputReader
from worker.wire.output import Output

pytestmark = pytest.mark.integration


def _headers(rid: str, seq: int, kind: str) -> list[tuple[str, bytes]]:
    return [
        (H_REQUEST_ID, rid.encode()),
        (H_SEQ, str(seq).encode()),
        (H_PART, b"0"),
        (H_KIND, kind.encode()),
    ]


async def _write(bootstrap: str, topic: str, placed: dict[str, int], length: int) -> None:
    """Each request's `length` chunks and its [DONE], on the partition given for it."""
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await p.start()
    try:
        for seq in range(length + 1):
            for rid, partition in placed.items():
                kind = DONE_KIND if seq == length else CHUNK
                value = b"[DONE]" if kind == DONE_KIND else json.dumps([rid, seq]).encode()
                headers = _headers(rid, seq, kind)
                await p.send(topic, value, key=rid.encode(), partition=partition, headers=headers)
        await p.flush()
    finally:
        await p.stop()


async def _read(bootstrap: str, topic: str, **kw: Any) -> list[Output]:
    async with OutputReader(
        bootstrap, topic, from_beginning=True, idle_timeout_s=1.0, **kw
    ) as reader:
        return [o async for o in reader]


def test_a_reader_of_some_partitions_sees_only_theirs(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=4)
    placed = {"a": 0, "b": 1, "c": 2, "d": 3, "e": 2}
    asyncio.run(_write(kafka_bootstrap, topic, placed, 5))
    some = asyncio.run(_read(kafka_bootstrap, topic, partitions=[2, 3]))
    assert {o.request_id for o in some} == {"c", "d", "e"}
    assert {o.partition for o in some} == {2, 3}
    for rid in ("c", "d", "e"):
        assert [o.seq for o in some if o.request_id == rid] == list(range(6))
    # The default still reads the whole topic.
    every = asyncio.run(_read(kafka_bootstrap, topic))
    assert {o.request_id for o in every} == set(placed)
    assert len(every) == 6 * len(placed)


def test_a_partition_the_topic_lacks_is_named(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=2)
    with pytest.raises(ValueError, match=rf"'{topic}' has no partition 2, 5 \(it has 2: 0-1\)"):
        asyncio.run(_read(kafka_bootstrap, topic, partitions={0, 2, 5}))


@pytest.mark.parametrize(
    ("partitions", "error", "message"),
    [
        ([], ValueError, "names no partition"),
        ([0, -1], ValueError, "numbers >= 0, not -1"),
        (["1"], ValueError, "numbers >= 0, not '1'"),
        ("0-3", TypeError, "collection of partition numbers"),
    ],
)
def test_bad_partitions_are_refused_at_once(
    partitions: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        OutputReader("localhost:1", partitions=partitions)
