"""The sticky assignor: balanced, complete, and moving only what must move."""

from __future__ import annotations

import random

import pytest
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.adapters.broker.kafka_assign import (
    StickyAssignor,
    assignors,
    decode_owned,
    encode_owned,
    sticky_assign,
)


class Cluster:
    def __init__(self, partitions: dict[str, int]) -> None:
        self.partitions = partitions

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        n = self.partitions.get(topic)
        return None if n is None else set(range(n))


def check_balanced(plan: dict[str, dict[str, list[int]]], topic: str, n: int) -> None:
    counts = [len(t.get(topic, [])) for t in plan.values()]
    got = sorted(p for t in plan.values() for p in t.get(topic, []))
    assert got == list(range(n)), "every partition exactly once"
    assert max(counts) - min(counts) <= 1, counts


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(1, 64),
    before=st.integers(1, 10),
    after=st.integers(1, 10),
    seed=st.integers(0, 1 << 16),
)
def test_a_membership_change_moves_only_what_the_new_shares_need(
    n: int, before: int, after: int, seed: int
) -> None:
    rng = random.Random(seed)
    old_members = [f"m{i}" for i in range(before)]
    first = sticky_assign({"t": list(range(n))}, {m: ["t"] for m in old_members}, {})
    check_balanced(first, "t", n)
    # Some leave, some join (the same count, or not), in any order of ids.
    stay = rng.sample(old_members, min(before, after))
    members = stay + [f"n{i}" for i in range(after - len(stay))]
    owned = {m: (0, first[m]) for m in stay}
    second = sticky_assign({"t": list(range(n))}, {m: ["t"] for m in members}, owned)
    check_balanced(second, "t", n)
    # The fewest moves possible: each member that stays keeps min(what it had, its share).
    base, extra = divmod(n, after)
    kept = sum(len(set(second[m].get("t", [])) & set(first[m].get("t", []))) for m in stay)
    had = sorted((len(first[m].get("t", [])) for m in stay), reverse=True)
    best = sum(min(h, base + (1 if i < extra else 0)) for i, h in enumerate(had))
    assert kept == best


def test_a_stale_claim_loses_to_the_later_round() -> None:
    # m1 was dropped from the group and still reports partition 0, which m2 got later.
    plan = sticky_assign(
        {"t": [0, 1, 2, 3]},
        {"m1": ["t"], "m2": ["t"]},
        {"m1": (3, {"t": [0, 1]}), "m2": (4, {"t": [0, 2]})},
    )
    assert plan["m2"]["t"] == [0, 2] and plan["m1"]["t"] == [1, 3]


def test_partitions_that_no_longer_exist_and_foreign_user_data_are_ignored() -> None:
    assert decode_owned(b"\x00\x01junk") == (-1, {})
    assert decode_owned(b"") == (-1, {})
    assert decode_owned(encode_owned(7, {"t": [1, 2]})) == (7, {"t": [1, 2]})
    plan = sticky_assign({"t": [0, 1]}, {"a": ["t"], "b": ["t"]}, {"a": (1, {"t": [5, 1]})})
    assert plan == {"a": {"t": [1]}, "b": {"t": [0]}}


def test_each_topic_goes_only_to_its_subscribers() -> None:
    plan = sticky_assign(
        {"x": [0, 1, 2], "y": [0, 1]}, {"a": ["x"], "b": ["x", "y"], "c": ["y"]}, {}
    )
    assert "y" not in plan["a"] and "x" not in plan["c"]
    check_balanced({m: t for m, t in plan.items() if m != "c"}, "x", 3)
    check_balanced({m: t for m, t in plan.items() if m != "a"}, "y", 2)


def _member(assignor: StickyAssignor) -> ConsumerProtocolMemberMetadata:
    # As the group coordinator hands it to the leader: encoded and decoded again.
    return ConsumerProtocolMemberMetadata.decode(assignor.metadata({"t"}).encode())


def test_members_report_what_they_got_and_keep_it_through_a_join() -> None:
    cluster = Cluster({"t": 8})
    a, b = StickyAssignor(), StickyAssignor()
    plan = a.assign(cluster, {"a": _member(a)})  # type: ignore[arg-type]
    a.on_assignment(plan["a"])
    assert a.owned == {"t": list(range(8))} and a.round == 0
    # b joins; b happens to lead this round.
    plan = b.assign(cluster, {"a": _member(a), "b": _member(b)})  # type: ignore[arg-type]
    a.on_assignment(plan["a"])
    b.on_assignment(plan["b"])
    assert a.round == b.round == 1
    assert len(a.owned["t"]) == len(b.owned["t"]) == 4
    assert set(a.owned["t"]) | set(b.owned["t"]) == set(range(8))
    before = dict(a.owned)
    c = StickyAssignor()
    plan = a.assign(cluster, {"a": _member(a), "b": _member(b), "c": _member(c)})  # type: ignore[arg-type]
    got = {m: set(plan[m].partitions()) for m in plan}
    assert {tp.partition for tp in got["a"]} <= set(before["t"])
    assert sorted(len(g) for g in got.values()) == [2, 3, 3]


@pytest.mark.parametrize(("name", "first"), [("sticky", "sticky"), ("roundrobin", "roundrobin")])
def test_sticky_is_offered_before_round_robin(name: str, first: str) -> None:
    chosen = assignors(name)
    assert chosen[0].name == first  # type: ignore[attr-defined]
    assert chosen[-1] is RoundRobinPartitionAssignor
