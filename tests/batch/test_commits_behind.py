"""At-least-once commits in the background (`checkpoint.Behind`, step 6 of the loop): in
order per partition, resolved before the lane polls on, failures raised where they
matter, every one waited for by a revocation or a stop."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import pytest
from aiokafka.errors import KafkaConnectionError

from worker.adapters.state.memory_store import MemoryStore
from worker.batch.checkpoint import Behind, Checkpoint
from worker.batch.steps import StepTimeout
from worker.ports import Batch, Lease, Partition
from worker.run.assignment import Assignment

Offsets = Mapping[Partition, int]
# Each body takes milliseconds; its bound is far above any slow machine's time for it.
BODY_TIMEOUT_S = 10.0


class Offsets_:
    """The Kafka half as `Behind` sees it: `ends` reads a position (as past_markers does),
    `commit` waits on a gate per call, then records or fails."""

    def __init__(self) -> None:
        self.position: dict[Partition, int] = {}
        self.committed: list[dict[Partition, int]] = []
        self.gates: list[asyncio.Event] = []
        self.fail: BaseException | None = None

    async def ends(self, offsets: Offsets) -> Offsets:
        return {p: max(o, self.position.get(p, 0)) for p, o in offsets.items()}

    async def commit(self, ends: Offsets) -> None:
        gate = asyncio.Event()
        self.gates.append(gate)
        await gate.wait()
        if self.fail is not None:
            raise self.fail
        self.committed.append(dict(ends))


class NoSource:
    """Commits go through `Behind`; nothing else of the source is used here."""

    async def poll(self) -> Batch | None:
        return None

    def rewind(self, batch: Batch, partitions: list[Partition] | None = None) -> None:
        raise AssertionError("no rewind expected")

    async def commit(self, offsets: Offsets) -> None:
        raise AssertionError("commits go through Behind")

    def scope(self, partition: Partition) -> str:
        return str(partition)


def _batch(partition: str, first: int, last: int, lease: Lease) -> Batch:
    return Batch([], {partition: first}, {partition: last}, lease.generation)


def _checkpoint(
    kafka: Offsets_, assignment: Assignment, timeout_s: float | None = None
) -> Checkpoint:
    behind = Behind(kafka.ends, kafka.commit, timeout_s, assignment.track)
    return Checkpoint(NoSource(), MemoryStore(), assignment.lease, behind)


def run(test: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    """An async test body run on a fresh event loop (pytest sees its fixtures), bounded:
    a commit left waiting on a gate nobody opens (a broken coalescing, a lost wake-up)
    fails the test in seconds instead of holding CI to its time limit."""

    async def bounded(*args: Any, **kwargs: Any) -> None:
        async with asyncio.timeout(BODY_TIMEOUT_S):
            await test(*args, **kwargs)

    @functools.wraps(test)
    def sync(*args: Any, **kwargs: Any) -> None:
        asyncio.run(bounded(*args, **kwargs))

    return sync


async def _open(kafka: Offsets_, i: int) -> None:
    """Let the broker answer commit `i` (once that commit has started)."""
    await _until(lambda: len(kafka.gates) > i)
    kafka.gates[i].set()


async def _until(cond: object, timeout_s: float = 5.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not cond():  # type: ignore[operator]
            await asyncio.sleep(0)


@run
async def test_the_commit_returns_before_the_broker_answers_and_stays_in_order() -> None:
    kafka, assignment = Offsets_(), Assignment()
    cp = _checkpoint(kafka, assignment)
    lease = assignment.lease
    # Returns at once: the broker has not answered (the gate is closed).
    assert await cp.commit(_batch("p0", 0, 9, lease), [], {}) == []
    assert kafka.committed == [] and len(assignment.in_flight) == 1
    # The next batch of that partition waits for the first commit before starting its own.
    second = asyncio.create_task(cp.commit(_batch("p0", 10, 19, lease), [], {}))
    await _until(lambda: len(kafka.gates) == 1 and not second.done())
    await asyncio.sleep(0.01)
    assert not second.done() and len(kafka.gates) == 1
    await _open(kafka, 0)
    await second
    await _until(lambda: len(kafka.gates) == 2)
    await _open(kafka, 1)
    await cp.settle()
    assert kafka.committed == [{"p0": 10}, {"p0": 20}]
    assert not assignment.in_flight


@run
async def test_what_is_committed_is_resolved_before_the_lane_polls_on() -> None:
    # past_markers reads the consumer's position; read after the lane's next poll it
    # would pass records that poll returned and nobody has done yet.
    kafka, assignment = Offsets_(), Assignment()
    cp = _checkpoint(kafka, assignment)
    kafka.position["p0"] = 11  # a transaction marker after offset 9
    await cp.commit(_batch("p0", 0, 9, assignment.lease), [], {})
    kafka.position["p0"] = 500  # the lane's next poll moved the position on
    await _open(kafka, 0)
    await cp.settle()
    assert kafka.committed == [{"p0": 11}]


@run
async def test_a_failed_commit_fails_the_next_batch_of_its_partitions() -> None:
    kafka, assignment = Offsets_(), Assignment()
    cp = _checkpoint(kafka, assignment)
    lease = assignment.lease
    await cp.commit(_batch("p0", 0, 9, lease), [], {})
    kafka.fail = KafkaConnectionError("broker gone")
    await _open(kafka, 0)
    await cp.settle()
    kafka.fail = None
    # Another partition's batch goes on.
    await cp.commit(_batch("p1", 0, 4, lease), [], {})
    # The next batch of p0 fails with it (the runner rewinds it: an outage)...
    with pytest.raises(KafkaConnectionError):
        await cp.commit(_batch("p0", 10, 19, lease), [], {})
    # ...once: its retry commits.
    await cp.commit(_batch("p0", 10, 19, lease), [], {})
    for i in (1, 2):
        await _open(kafka, i)
    await cp.settle()
    assert sorted(map(str, kafka.committed)) == ["{'p0': 20}", "{'p1': 5}"]


@run
async def test_a_failure_on_partitions_since_revoked_is_only_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    kafka, assignment = Offsets_(), Assignment()
    cp = _checkpoint(kafka, assignment)
    old = _batch("p0", 0, 9, assignment.lease)
    await cp.commit(old, [], {})
    kafka.fail = KafkaConnectionError("rebalance")
    revoking = asyncio.create_task(assignment.revoke(5.0))
    await asyncio.sleep(0.01)
    assert not revoking.done()  # the revocation waits for the commit in flight
    await _open(kafka, 0)
    await revoking
    assert "a commit in the background failed" in caplog.text
    kafka.fail = None
    # The partition comes back: its next batch is not failed by the old commit.
    new = _batch("p0", 0, 9, assignment.lease)
    await cp.commit(new, [], {})
    await _open(kafka, 1)
    await cp.settle()
    assert kafka.committed == [{"p0": 10}]


@run
async def test_a_commit_that_never_returns_is_a_step_timeout() -> None:
    kafka, assignment = Offsets_(), Assignment()
    cp = _checkpoint(kafka, assignment, timeout_s=0.05)
    lease = assignment.lease
    await cp.commit(_batch("p0", 0, 9, lease), [], {})
    await cp.settle()  # bounded: the gate never opens
    assert kafka.committed == []
    with pytest.raises(StepTimeout) as info:
        await cp.commit(_batch("p0", 10, 19, lease), [], {})
    assert info.value.step == "commit"


@run
async def test_a_failed_commit_of_several_partitions_fails_one_next_batch_only() -> None:
    # One commit covers both partitions of a lane's batch: its failure is raised once, by
    # the first next batch there; the other partition's next batch goes on.
    kafka, assignment = Offsets_(), Assignment()
    cp = _checkpoint(kafka, assignment)
    lease = assignment.lease
    both = Batch([], {"p0": 0, "p1": 0}, {"p0": 9, "p1": 4}, lease.generation)
    await cp.commit(both, [], {})
    kafka.fail = KafkaConnectionError("broker gone")
    await _open(kafka, 0)
    await cp.settle()
    kafka.fail = None
    with pytest.raises(KafkaConnectionError):
        await cp.commit(_batch("p0", 10, 19, lease), [], {})
    await cp.commit(_batch("p1", 5, 9, lease), [], {})
    assert cp.failed(["p0", "p1"]) is None
    await _open(kafka, 1)
    await cp.settle()
    assert kafka.committed == [{"p1": 10}]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _interval(kafka: Offsets_, assignment: Assignment, clock: Clock) -> Checkpoint:
    behind = Behind(kafka.ends, kafka.commit, None, assignment.track, 1.0, clock)
    return Checkpoint(NoSource(), MemoryStore(), assignment.lease, behind)


@run
async def test_one_commit_per_interval_carries_the_batches_in_between() -> None:
    """`--commit-interval-ms`: a batch within the interval of its partition's last commit
    leaves its offsets pending; the lane commits them between batches once it is up."""
    kafka, assignment, clock = Offsets_(), Assignment(), Clock()
    cp = _interval(kafka, assignment, clock)
    lease = assignment.lease
    await cp.commit(_batch("p0", 0, 9, lease), [], {})  # the first: committed at once
    await _open(kafka, 0)
    for at, first in ((0.3, 10), (0.6, 20)):
        clock.now = at
        await cp.commit(_batch("p0", first, first + 9, lease), [], {})
    await asyncio.sleep(0.01)
    assert len(kafka.gates) == 1 and cp.due(["p0"]) == []
    clock.now = 1.0
    assert cp.due(["p0", "p1"]) == ["p0"]
    await cp.commit_due(["p0"])
    await _open(kafka, 1)
    await cp.settle(["p0"])
    assert kafka.committed == [{"p0": 10}, {"p0": 30}]
    # A batch past the interval commits at once again, its own offsets and nothing older.
    clock.now = 2.5
    await cp.commit(_batch("p0", 30, 39, lease), [], {})
    await _open(kafka, 2)
    await cp.settle(["p0"])
    assert kafka.committed[-1] == {"p0": 40} and len(kafka.gates) == 3


@run
async def test_a_stop_or_a_revocation_commits_what_is_pending() -> None:
    """`settle` (a lane's last act; a revocation's, after the lease moved on) starts the
    pending commit after the running one: in order, and nothing left behind."""
    kafka, assignment, clock = Offsets_(), Assignment(), Clock()
    cp = _interval(kafka, assignment, clock)
    lease = assignment.lease
    await cp.commit(_batch("p0", 0, 9, lease), [], {})
    await cp.commit(_batch("p0", 10, 19, lease), [], {})  # pending: the first still runs
    await assignment.revoke(wait_s=0)  # (the lease moves on; the partitions are ours still)
    settle = asyncio.create_task(cp.settle(["p0"]))
    await asyncio.sleep(0.01)
    assert len(kafka.gates) == 1  # the pending one waits for the running one
    await _open(kafka, 0)
    await _open(kafka, 1)
    await settle
    assert kafka.committed == [{"p0": 10}, {"p0": 20}]
    cp.forget(["p0"])
    assert cp.due(["p0"]) == []


@run
async def test_a_failed_commit_is_raised_by_a_batch_that_leaves_its_offsets_pending() -> None:
    kafka, assignment, clock = Offsets_(), Assignment(), Clock()
    cp = _interval(kafka, assignment, clock)
    lease = assignment.lease
    kafka.fail = KafkaConnectionError("the broker went away")
    await cp.commit(_batch("p0", 0, 9, lease), [], {})
    await _open(kafka, 0)
    await cp.settle(["p0"])
    clock.now = 0.5
    with pytest.raises(KafkaConnectionError):
        await cp.commit(_batch("p0", 10, 19, lease), [], {})
    await cp.commit(_batch("p0", 10, 19, lease), [], {})  # (raised once: pending now)
    assert len(kafka.gates) == 1
