"""Reply routing on the real broker with a real worker: a request whose seq-0 record names a
`reply_partition` has every output on that partition of the output topic, in order; readers
of the whole topic still see every output; a request without one lands on its key's
partition as before; one naming a partition the topic lacks lands there too, with a
warning. Under both guarantees."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from aiokafka.partitioner import DefaultPartitioner
from tokenizers import Tokenizer

from tests.integration.harness import (
    Generation,
    Output,
    WorkerProcess,
    done_count,
    interleave,
    make_generations,
    publish,
    read_all,
    verify,
)
from worker.tools.output_reader import OutputReader
from worker.wire.output import Output as ReaderOutput

pytestmark = pytest.mark.integration

PARTITIONS = 4  # the output topic's (the `topics` fixture)
BAD = 9  # a partition it does not have


def key_partition(request_id: str) -> int:
    parts = list(range(PARTITIONS))
    return int(DefaultPartitioner()(request_id.encode(), parts, parts))


def name_partitions(gens: list[Generation], plan: Callable[[int], int | None]) -> dict[str, int]:
    """Put `reply_partition` on each request's seq-0 record as `plan(n)` says (None: none);
    returns where each request's outputs must land."""
    where = {}
    for n, g in enumerate(gens):
        reply = plan(n)
        if reply is not None:
            g.records[0]["reply_partition"] = reply
        where[g.request_id] = reply if reply is not None and reply < PARTITIONS else None
        if where[g.request_id] is None:
            where[g.request_id] = key_partition(g.request_id)
    return where


def check_routing(outputs: list[Output], where: dict[str, int]) -> None:
    wrong = [(o.key, o.partition, where[o.key]) for o in outputs if o.partition != where[o.key]]
    assert not wrong, f"outputs off their partition (request, got, want): {wrong[:10]}"


async def read_partitions(
    bootstrap: str, topic: str, partitions: set[int], requests: int, isolation: Any
) -> list[ReaderOutput]:
    """What a gateway replica owning `partitions` reads: until `requests` requests ended."""
    reader = OutputReader(
        bootstrap, topic, partitions=partitions, from_beginning=True, isolation_level=isolation
    )
    got: list[ReaderOutput] = []
    ended = 0
    async with reader, asyncio.timeout(90):
        async for out in reader:
            got.append(out)
            ended += out.end
            if ended >= requests:
                break
    return got


@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_outputs_go_to_the_partition_each_request_names(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
    guarantee: str,
) -> None:
    gens = make_generations(deepseek, 24, seed=38, prefix="reply")
    # Replica A owns {1}, replica B {2, 3}; every fourth request names none; one names a
    # partition the topic lacks.
    plan = {0: 1, 1: 2, 2: 3, 3: None}
    where = name_partitions(gens, lambda n: BAD if n == 5 else plan[n % 4])
    w = worker_factory("--guarantee", guarantee)
    asyncio.run(publish(kafka_bootstrap, topics["input"], interleave(gens, seed=39)))
    isolation = "read_committed" if guarantee == "exactly-once" else "read_uncommitted"
    everything = asyncio.run(
        read_all(
            kafka_bootstrap, topics["output"], lambda o: done_count(o) >= len(gens),
            isolation_level=isolation,
        )
    )  # fmt: skip
    # A reader of the whole topic (an archiver, `tail`) sees every output, each request's
    # in order, as without reply partitions.
    verify(everything, gens)
    check_routing(everything, where)
    # Each replica reads only its own partitions and gets its requests whole, in order.
    for owned in ({1}, {2, 3}):
        mine = {rid for rid, p in where.items() if p in owned}
        got = asyncio.run(
            read_partitions(kafka_bootstrap, topics["output"], owned, len(mine), isolation)
        )
        assert {o.request_id for o in got} == mine
        assert {o.partition for o in got} <= owned
        # Whole and in order: the same check as the whole topic's, on what the reader gave.
        as_read = [Output(o.request_id, o.headers, o.value, o.partition, o.offset) for o in got]
        verdict = verify(as_read, [g for g in gens if g.request_id in mine])
        assert verdict.repeats == 0  # (the reader drops them)
    bad = gens[5].request_id
    assert f"request {bad} names reply partition {BAD}" in w.log_text()
    assert w.stop() == 0, w.log_tail()
