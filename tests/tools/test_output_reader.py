"""`OutputReader` against a real broker: output records written as the worker writes them
(key, identity headers, payload), repeats included, read back once each, in order."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from tests.support.server_fixtures import TANSU, kafka_plan
from worker.constants import CHUNK, DONE_KIND, ERROR, H_KIND, H_PART, H_REQUEST_ID, H_SEQ, RESPONSE
from worker.tools.output_reader import OutputReader
from worker.wire.output import Output

pytestmark = pytest.mark.integration

Record = tuple[str, bytes, list[tuple[str, bytes]]]


def rec(rid: str, seq: int, part: int, kind: str = CHUNK) -> Record:
    value = b"[DONE]" if kind == DONE_KIND else json.dumps({"id": rid, "at": [seq, part]}).encode()
    headers = [
        (H_REQUEST_ID, rid.encode()),
        (H_SEQ, str(seq).encode()),
        (H_PART, str(part).encode()),
        (H_KIND, kind.encode()),
        ("traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
    ]
    return rid, value, headers


async def write(bootstrap: str, topic: str, records: Iterable[Record], **producer: Any) -> None:
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", **producer)
    await p.start()
    try:
        for rid, value, headers in records:
            await p.send(topic, value, key=rid.encode(), headers=headers)
        await p.flush()
    finally:
        await p.stop()


async def read_all(bootstrap: str, topic: str, **kw: Any) -> tuple[list[Output], OutputReader]:
    kw = {"from_beginning": True, "idle_timeout_s": 1.0, **kw}
    async with OutputReader(bootstrap, topic, **kw) as reader:
        outs = [o async for o in reader]
    return outs, reader


def places(outs: list[Output], rid: str) -> list[tuple[int, int]]:
    return [(o.seq, o.part) for o in outs if o.request_id == rid]


def test_each_output_once_in_order_across_partitions(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """Twenty interleaved requests on four partitions; after each batch a redelivery
    repeats some of it (never past what was written) before the stream goes on."""
    topic = new_topic(partitions=4)
    rng = random.Random(7)
    truth = {
        f"r{i}": [(s, p) for s in range(8) for p in range(rng.randint(1, 3))] + [(8, 0)]
        for i in range(20)
    }  # (8, 0): each request's [DONE]
    log: list[Record] = []
    cursor = dict.fromkeys(truth, 0)
    repeats = 0
    while any(cursor[r] < len(truth[r]) for r in truth):
        rid = rng.choice([r for r in truth if cursor[r] < len(truth[r])])
        start, step = cursor[rid], rng.randint(1, 4)
        batch = truth[rid][start : start + step]
        for s, p in batch:
            log.append(rec(rid, s, p, DONE_KIND if s == 8 else CHUNK))
        cursor[rid] += len(batch)
        if rng.random() < 0.4:  # the batch again, from some point in it
            again = batch[rng.randrange(len(batch)) :]
            log += [rec(rid, s, p, DONE_KIND if s == 8 else CHUNK) for s, p in again]
            repeats += len(again)
    asyncio.run(write(kafka_bootstrap, topic, log))

    outs, reader = asyncio.run(read_all(kafka_bootstrap, topic))

    assert {rid: places(outs, rid) for rid in truth} == truth
    assert reader.duplicates == repeats > 0
    assert reader.ended == len(truth)
    for o in outs:
        assert o.headers["traceparent"].startswith("00-0af765")
        assert o.json() == (None if o.done else {"id": o.request_id, "at": [o.seq, o.part]})
        assert o.end == o.done
    # Within a partition the reader keeps the log's order.
    for partition in {o.partition for o in outs}:
        offsets = [o.offset for o in outs if o.partition == partition]
        assert offsets == sorted(offsets)


def test_the_end_of_a_request_is_its_done_or_its_whole_response(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic()
    log = [
        rec("stream", 0, 0),
        rec("stream", 0, 1),
        rec("stream", 1, 0, DONE_KIND),
        rec("whole", 0, 0, RESPONSE),
        rec("failed", 0, 0, ERROR),  # a stream that failed: its [DONE] comes at its end
        rec("failed", 3, 0, DONE_KIND),
        rec("stream", 1, 0, DONE_KIND),  # repeats after the end
        rec("whole", 0, 0, RESPONSE),
    ]
    asyncio.run(write(kafka_bootstrap, topic, log))
    outs, reader = asyncio.run(read_all(kafka_bootstrap, topic))
    assert [(o.request_id, o.kind, o.end) for o in outs] == [
        ("stream", CHUNK, False),
        ("stream", CHUNK, False),
        ("stream", DONE_KIND, True),
        ("whole", RESPONSE, True),
        ("failed", ERROR, False),
        ("failed", DONE_KIND, True),
    ]
    assert reader.ended == 3 and reader.duplicates == 2


def test_an_error_written_after_the_rest_of_its_batch_is_not_taken_for_a_repeat(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """The broker refused (1, 0): the worker wrote the rest of the batch, then the error
    in its place; a redelivery writes the error again."""
    topic = new_topic()
    log = [rec("a", 0, 0), rec("a", 2, 0), rec("a", 1, 0, ERROR), rec("a", 1, 0, ERROR)]
    asyncio.run(write(kafka_bootstrap, topic, log))
    outs, reader = asyncio.run(read_all(kafka_bootstrap, topic))
    assert [(o.seq, o.part, o.kind) for o in outs] == [(0, 0, CHUNK), (2, 0, CHUNK), (1, 0, ERROR)]
    assert reader.duplicates == 1


def test_only_the_requests_followed(kafka_bootstrap: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(partitions=2)
    log = [rec(rid, s, 0) for s in range(3) for rid in ("a", "b", "c")]
    log += [rec("a", 3, 0, DONE_KIND), rec("b", 3, 0, DONE_KIND), rec("a", 3, 0, DONE_KIND)]
    asyncio.run(write(kafka_bootstrap, topic, log))

    async def main() -> tuple[list[Output], OutputReader]:
        reader = OutputReader(
            kafka_bootstrap, topic, request_ids=["a"], from_beginning=True, idle_timeout_s=1.0
        )
        async with reader:
            reader.follow("c")
            outs = [o async for o in reader]
            assert reader.following == {"c"}  # a left at its end; c never ended
            assert reader.remembered == 1
            reader.forget("c")
            assert reader.following == frozenset() and reader.remembered == 0
        return outs, reader

    outs, reader = asyncio.run(main())
    assert places(outs, "a") == [(0, 0), (1, 0), (2, 0), (3, 0)]
    assert places(outs, "c") == [(0, 0), (1, 0), (2, 0)]
    assert places(outs, "b") == []
    assert reader.ended == 1 and reader.duplicates == 0  # a's repeat was filtered out


def test_what_is_kept_per_request_is_bounded(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic()
    ids = [f"r{i}" for i in range(10)]
    log = [rec(rid, 0, 0) for rid in ids] + [rec(rid, 1, 0, DONE_KIND) for rid in ids]
    asyncio.run(write(kafka_bootstrap, topic, log))

    # Every request: at most `remember` of them are kept, finished ones too.
    outs, reader = asyncio.run(read_all(kafka_bootstrap, topic, remember=3))
    assert len(outs) == 20 and reader.remembered == 3
    # Followed requests: each is dropped at its end.
    outs, reader = asyncio.run(read_all(kafka_bootstrap, topic, request_ids=ids))
    assert len(outs) == 20 and reader.ended == 10
    assert reader.remembered == 0 and reader.following == frozenset()


def test_from_now_on_reads_what_is_written_after_start(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=2)
    asyncio.run(write(kafka_bootstrap, topic, [rec("old", 0, 0)]))

    async def main() -> list[Output]:
        async with OutputReader(kafka_bootstrap, topic, idle_timeout_s=1.0) as reader:
            await write(kafka_bootstrap, topic, [rec("new", 0, 0), rec("new", 1, 0, DONE_KIND)])
            return [o async for o in reader]

    assert [(o.request_id, o.seq) for o in asyncio.run(main())] == [("new", 0), ("new", 1)]


def test_stop_is_prompt_and_ends_a_waiting_read(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic()

    async def main() -> tuple[Output | None, list[Output], float]:
        reader = OutputReader(kafka_bootstrap, topic)
        await reader.start()
        waiting = asyncio.create_task(reader.read())
        iterating = asyncio.create_task(_collect(reader))
        await asyncio.sleep(0.5)
        assert not waiting.done() and not iterating.done()
        t0 = time.monotonic()
        await reader.stop()
        got = await asyncio.wait_for(waiting, 5)
        outs = await asyncio.wait_for(iterating, 5)
        return got, outs, time.monotonic() - t0

    got, outs, took = asyncio.run(main())
    assert got is None and outs == []
    assert took < 2.0


async def _collect(reader: OutputReader) -> list[Output]:
    return [o async for o in reader]


def test_a_read_with_a_timeout_returns_none_in_time(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic()

    async def main() -> tuple[Output | None, float]:
        async with OutputReader(kafka_bootstrap, topic) as reader:
            t0 = time.monotonic()
            got = await reader.read(timeout_s=0.3)
            return got, time.monotonic() - t0

    got, took = asyncio.run(main())
    assert got is None and 0.25 < took < 1.5


def test_a_topic_that_does_not_exist_is_named(kafka_bootstrap: str) -> None:
    async def main() -> None:
        async with OutputReader(kafka_bootstrap, "no-such-topic-3f9c"):
            pass

    with pytest.raises(ValueError, match="output topic 'no-such-topic-3f9c' does not exist"):
        asyncio.run(main())


def test_read_committed_never_sees_an_aborted_transaction(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    if kafka_plan().kind == TANSU:
        pytest.skip("tansu has no transactions")
    topic = new_topic()

    async def transactions() -> None:
        p = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, transactional_id=f"t-{topic}")
        await p.start()
        try:
            for rid, commit in (("aborted", False), ("committed", True)):
                await p.begin_transaction()
                for key, value, headers in (rec(rid, 0, 0), rec(rid, 1, 0, DONE_KIND)):
                    await p.send(topic, value, key=key.encode(), headers=headers)
                await (p.commit_transaction() if commit else p.abort_transaction())
        finally:
            await p.stop()

    asyncio.run(transactions())
    committed, _ = asyncio.run(read_all(kafka_bootstrap, topic, isolation_level="read_committed"))
    assert {o.request_id for o in committed} == {"committed"}
    everything, _ = asyncio.run(read_all(kafka_bootstrap, topic))
    assert {o.request_id for o in everything} == {"aborted", "committed"}


def test_misuse_is_named() -> None:
    with pytest.raises(ValueError, match="isolation_level must be one of"):
        OutputReader("localhost:9", isolation_level="committed")  # type: ignore[arg-type]

    with pytest.raises(TypeError, match="not one id"):
        OutputReader("localhost:9", request_ids="chatcmpl-1")

    async def unstarted() -> None:
        await OutputReader("localhost:9").read()

    with pytest.raises(RuntimeError, match="start the reader first"):
        asyncio.run(unstarted())
