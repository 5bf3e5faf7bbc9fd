"""`group_watch` without a broker: which members missed a change of their assignment,
the heartbeat timeout that sets the watch off, when it makes the member join again, and
the coordinator's answer read (`describe`).
On a real broker, paused: test_confluent_group.py."""

from __future__ import annotations

import asyncio
import io
import logging
from collections.abc import Callable, Iterator

import pytest
from aiokafka.errors import NotCoordinatorForGroupError

from worker.adapters.broker.confluent.describe import ConsumerGroupDescribeResponse_v0, view_of
from worker.adapters.broker.confluent.group_watch import (
    GroupView,
    GroupWatch,
    HeartbeatLog,
    astray,
)


def view(target: set[int], others: set[int] = frozenset()) -> GroupView:  # type: ignore[assignment]
    return GroupView(frozenset(target), frozenset(others))


@pytest.mark.parametrize(
    ("mine", "target", "others", "stale", "missing"),
    [
        ({0, 1, 2, 3}, {0, 1}, set(), {2, 3}, set()),  # told to give two up, never heard
        ({0, 1}, {0, 1, 2}, set(), set(), {2}),  # given a free one, never heard
        ({0, 1}, {0, 1}, {2, 3}, set(), set()),  # as the coordinator wants it
        (set(), {2, 3}, {0, 1, 2, 3}, set(), set()),  # a joiner waiting for the others
        ({0}, {0, 1}, {1}, set(), set()),  # still held by its old owner: not ours to take
    ],
)
def test_what_a_member_missed(
    mine: set[int], target: set[int], others: set[int], stale: set[int], missing: set[int]
) -> None:
    assert astray(mine, view(target, others)) == (stale, missing)


class Forward:
    def __init__(self) -> None:
        self.lines: list[tuple[object, ...]] = []

    def log(self, level: int, fmt: str, *args: object) -> None:
        self.lines.append(args)


def test_only_a_timed_out_heartbeat_sets_the_watch_off_and_every_line_goes_on() -> None:
    forward, timeouts = Forward(), []
    hook = HeartbeatLog(forward, lambda: timeouts.append(1))
    lines = [
        (
            "REQTMOUT",
            "c#consumer-1",
            "GroupCoordinator/1: Timed out ConsumerGroupHeartbeatRequest in flight "
            "(after 1001ms, timeout #0)",
        ),
        (
            "REQTMOUT",
            "c#consumer-1",
            "b/1: Timed out FetchRequest in flight (after 1001ms, timeout #0)",
        ),
        ("FAIL", "c#consumer-1", "Timed out ConsumerGroupHeartbeatRequest"),
        ("REQTMOUT",),
    ]
    for args in lines:
        hook.log(logging.INFO, "%s [%s] %s", *args)
    assert timeouts == [1]
    assert forward.lines == lines


class FakeMember:
    def __init__(self, held: set[int]) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.callbacks = 0
        self._held = held
        self.rejoined = 0

    def held(self) -> set[int]:
        return self._held

    def rejoin(self) -> None:
        self.rejoined += 1


def watched(
    member: FakeMember,
    views: Iterator[GroupView | Exception | None],
    on_rejoin: Callable[[], object] = lambda: None,
) -> GroupWatch:
    async def describe() -> GroupView | None:
        v = next(views)
        if isinstance(v, Exception):
            raise v
        return v

    return GroupWatch(
        member, describe, on_rejoin, first_look_s=0, look_every_s=0.01, watch_for_s=0.3
    )


async def run(watch: GroupWatch, member: FakeMember) -> None:
    member.loop = asyncio.get_running_loop()
    watch.heartbeat_timed_out()
    await asyncio.sleep(0.02)  # (call_soon_threadsafe: the watch starts)
    assert watch._task is not None
    await asyncio.wait_for(watch._task, 2)


def test_a_member_that_still_holds_what_it_gave_up_joins_again_once() -> None:
    member = FakeMember({0, 1, 2, 3})
    counted: list[int] = []  # (the worker's derender_group_rejoins_total)
    watch = watched(member, iter([view({0, 1})] * 100), lambda: counted.append(1))
    asyncio.run(run(watch, member))
    assert (member.rejoined, watch.rejoins, len(counted)) == (1, 1, 1)


def test_a_rebalance_callback_between_two_looks_is_a_member_still_at_work() -> None:
    member = FakeMember({0, 1, 2, 3})

    def views() -> Iterator[GroupView | Exception | None]:
        yield view({0, 1})
        member.callbacks += 1  # (its revocation began)
        yield view({0, 1})
        member._held = {0, 1}
        while True:
            yield view({0, 1}, {2, 3})

    watch = watched(member, views())
    asyncio.run(run(watch, member))
    assert member.rejoined == 0


def test_a_member_in_step_with_the_group_is_left_alone() -> None:
    member = FakeMember({0, 1})
    looks = iter([view({0, 1}, {2, 3})] * 100)
    watch = watched(member, looks)
    asyncio.run(run(watch, member))
    assert member.rejoined == 0
    assert len(list(looks)) == 99  # (one look was enough)


def test_a_coordinator_that_cannot_be_asked_is_no_reason_to_join_again() -> None:
    member = FakeMember({0, 1, 2, 3})
    answers: list[GroupView | Exception | None] = [None, RuntimeError("timed out")] * 100
    watch = watched(member, iter(answers))
    asyncio.run(run(watch, member))
    assert member.rejoined == 0


def test_a_joiner_waiting_for_others_is_left_alone() -> None:
    member = FakeMember(set())
    watch = watched(member, iter([view({2, 3}, {0, 1, 2, 3})] * 100))
    asyncio.run(run(watch, member))
    assert member.rejoined == 0


def described(members: list[tuple[str, dict[str, list[int]], dict[str, list[int]]]]) -> object:
    """A ConsumerGroupDescribe v0 answer, encoded and decoded again: (member id, its
    assignment, its target) per member."""

    def assignment(topics: dict[str, list[int]]) -> tuple[object, ...]:
        return ([(bytes(16), name, parts, {}) for name, parts in topics.items()], {})

    rows = [
        (mid, None, None, 3, "c", "/h", ["in"], None, assignment(a), assignment(t), {})
        for mid, a, t in members
    ]
    group = (0, None, "g", "Stable", 5, 5, "uniform", rows, -2147483648, {})
    encoded = ConsumerGroupDescribeResponse_v0(0, [group], {}).encode()
    return ConsumerGroupDescribeResponse_v0.decode(io.BytesIO(encoded))


def test_the_coordinators_answer_gives_the_members_target_and_what_the_others_hold() -> None:
    answer = described(
        [
            ("me", {"in": [0, 1, 2, 3], "other": [9]}, {"in": [0, 1]}),
            ("them", {"in": [4]}, {"in": [2, 3, 4]}),
            ("more", {"in": [5], "other": [7]}, {"in": [5]}),
        ]
    )
    assert view_of(answer, "me", "in") == view({0, 1}, {4, 5})
    assert view_of(answer, "gone", "in") is None


def test_a_group_error_is_raised() -> None:
    group = (16, "not the coordinator", "g", "", 0, 0, "", [], 0, {})
    answer = ConsumerGroupDescribeResponse_v0.decode(
        io.BytesIO(ConsumerGroupDescribeResponse_v0(0, [group], {}).encode())
    )
    with pytest.raises(NotCoordinatorForGroupError):
        view_of(answer, "me", "in")
