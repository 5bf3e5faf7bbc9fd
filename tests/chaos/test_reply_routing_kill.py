"""A worker killed mid-request: the next one resumes the request from its stored state, and
the outputs it writes still go to the partition the request's seq-0 record named (only
that record carries it: the state is what brings it back)."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from typing import Any

import pytest
from tokenizers import Tokenizer

from tests.chaos.tools import chaos_env, wait_exit
from tests.integration.harness import (
    Output,
    WorkerProcess,
    end_offsets,
    interleave,
    make_generations,
    publish,
    read_all,
    verify,
)
from tests.integration.test_reply_routing import PARTITIONS, check_routing, key_partition

pytestmark = [pytest.mark.chaos, pytest.mark.integration]


@pytest.mark.parametrize(
    ("guarantee", "point"),
    [("at-least-once", "kill_before_save"), ("exactly-once", "kill_before_txn_commit")],
)
def test_a_resumed_request_still_goes_to_its_reply_partition(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
    guarantee: str,
    point: str,
) -> None:
    gens = make_generations(deepseek, 8, seed=83, prefix="rkill", max_chunk=3)
    # Each names a partition other than its key's, so only routing can put it there.
    where = {}
    for g in gens:
        where[g.request_id] = (key_partition(g.request_id) + 1) % PARTITIONS
        g.records[0]["reply_partition"] = where[g.request_id]
    isolation: Any = "read_committed" if guarantee == "exactly-once" else "read_uncommitted"
    output = topics["output"]

    def opened(outputs: list[Any]) -> bool:
        return {o.key for o in outputs if o.headers["derender-seq"] == "0"} == set(where)

    # 1) A worker opens every request (seq 0), and stops cleanly: the states are saved.
    first = worker_factory("--guarantee", guarantee)
    asyncio.run(publish(kafka_bootstrap, topics["input"], [g.records[0] for g in gens]))
    asyncio.run(read_all(kafka_bootstrap, output, opened, isolation_level=isolation))
    assert first.stop() == 0, first.log_tail()
    # 2) The next is killed in the middle of the rest: after producing its first batch,
    # before it is saved (at-least-once) or committed (exactly-once). The rest is in the
    # topic before it starts, so that batch is a full one: records published while it
    # polls could make it a record or two whose text is all held back (no output to
    # repeat), which made the at-least-once repeats depend on timing.
    rest = interleave([type(g)(g.request_id, g.ids, g.expected, g.records[1:]) for g in gens], 84)
    asyncio.run(publish(kafka_bootstrap, topics["input"], rest))
    killed = worker_factory("--guarantee", guarantee, **chaos_env(**{point: 1}))
    assert wait_exit(killed, 60) == -signal.SIGKILL, killed.log_tail()
    assert "chaos: killed before" in killed.log_text()
    if guarantee == "at-least-once":  # what the killed batch wrote, which must come again

        def wrote(outputs: list[Any]) -> bool:
            return any(o.headers["derender-seq"] != "0" for o in outputs)

        written = asyncio.run(read_all(kafka_bootstrap, output, wrote, timeout_s=20))
        assert wrote(written), "the killed batch wrote nothing: nothing to repeat"
    # 3) A third resumes every request from its state. Nothing of theirs was saved past
    # seq 0, so it writes every request again, each up to a [DONE] of its own: read until
    # those, past what the killed one left (which may hold every request's [DONE] already,
    # when its one batch took every partition's records).
    marks = asyncio.run(end_offsets(kafka_bootstrap, output))

    def fresh(o: Output) -> bool:
        return o.offset >= marks[o.partition]

    def resumed(outputs: list[Output]) -> bool:
        return len({o.key for o in outputs if fresh(o) and o.value == b"[DONE]"}) == len(gens)

    last = worker_factory("--guarantee", guarantee)
    outputs = asyncio.run(read_all(kafka_bootstrap, output, resumed, isolation_level=isolation))
    assert resumed(outputs), last.log_tail()
    verdict = verify(outputs, gens)
    check_routing(outputs, where)
    # What a reader saw of the killed worker: at-least-once, its outputs (each written
    # again, exactly once, by the third); exactly-once, nothing (its transaction was aborted).
    killed_wrote = sum(1 for o in outputs if not fresh(o) and o.headers["derender-seq"] != "0")
    assert verdict.repeats == killed_wrote, verdict
    if guarantee == "at-least-once":
        assert killed_wrote > 0, verdict
    else:
        assert killed_wrote == 0, verdict
    assert last.stop() == 0, last.log_tail()
