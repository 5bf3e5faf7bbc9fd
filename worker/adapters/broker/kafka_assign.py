"""A sticky partition assignor for aiokafka's (eager) group protocol.

aiokafka's assignors (range, round robin) deal the partitions out afresh on every
rebalance, so a member joining or leaving moves most partitions, not just the few that
must move: each moved partition waits for its new owner's producer and first fetch.
This one keeps every member's partitions up to its fair share and deals out only the rest.

Each member tells the leader what it owns in its join metadata (`user_data`): the round of
the assignment that gave them, and the partitions. A partition two members claim (one was
dropped from the group for a missed session and has not yet heard) goes to the claim of
the later round. The leader puts the new round in every member's assignment.

Eager still revokes everything on each rebalance; the partitions a member gets back are
the same ones, so what it kept open for them (`kafka_txn.Transactions` keeps their
producers) serves again at once. Its protocol name is our own: a member of an older
version lists only round robin, and the group then agrees on that.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping

from aiokafka.cluster import ClusterMetadata
from aiokafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.coordinator.protocol import (
    ConsumerProtocolMemberAssignment,
    ConsumerProtocolMemberMetadata,
)

log = logging.getLogger("derender.worker")

ROUND_ROBIN = "roundrobin"
STICKY = "sticky"
ASSIGNORS = (STICKY, ROUND_ROBIN)

# (round, partitions per topic) that a member reports as owned
Owned = tuple[int, dict[str, list[int]]]


def sticky_assign(
    partitions: Mapping[str, list[int]],
    subscriptions: Mapping[str, Iterable[str]],
    owned: Mapping[str, Owned],
) -> dict[str, dict[str, list[int]]]:
    """member → topic → partitions. Per topic, over the members subscribed to it: each
    member keeps what it owned up to its share (⌊n/m⌋, or one more for the `n mod m`
    members that owned the most), and the rest goes to those below their share, fewest
    first. Deterministic: ties go by member id."""
    out: dict[str, dict[str, list[int]]] = {m: {} for m in subscriptions}
    for topic, parts in sorted(partitions.items()):
        members = sorted(m for m, topics in subscriptions.items() if topic in set(topics))
        if not members or not parts:
            continue
        existing = set(parts)
        claim: dict[int, tuple[int, str]] = {}  # partition → (round, member) of the claim kept
        for m in members:
            rnd, topics = owned.get(m, (-1, {}))
            for p in topics.get(topic, []):
                if p in existing and (p not in claim or rnd > claim[p][0]):
                    claim[p] = (rnd, m)
        kept: dict[str, list[int]] = defaultdict(list)
        for p, (_, m) in sorted(claim.items()):
            kept[m].append(p)
        base, extra = divmod(len(parts), len(members))
        by_claims = sorted(members, key=lambda m: (-len(kept[m]), m))
        quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_claims)}
        got = {m: kept[m][: quota[m]] for m in members}
        taken = {p for ps in got.values() for p in ps}
        for p in sorted(existing - taken):
            m = min((m for m in members if len(got[m]) < quota[m]), key=lambda m: (len(got[m]), m))
            got[m].append(p)
        for m in members:
            if got[m]:
                out[m][topic] = sorted(got[m])
    return out


def encode_owned(rnd: int, topics: Mapping[str, list[int]]) -> bytes:
    return json.dumps({"round": rnd, "owned": topics}, separators=(",", ":")).encode()


def decode_owned(data: bytes | None) -> Owned:
    """What a member reported; nothing (round -1) for empty or foreign user data."""
    if not data:
        return -1, {}
    try:
        doc = json.loads(data)
        rnd = int(doc["round"])
        owned = {str(t): [int(p) for p in ps] for t, ps in doc["owned"].items()}
    except (ValueError, KeyError, TypeError, AttributeError):
        return -1, {}
    return rnd, owned


class StickyAssignor(AbstractPartitionAssignor):  # type: ignore[misc]
    """One per consumer: it remembers what the last assignment gave this member, which
    its next join reports. (aiokafka calls `metadata`, `assign` and `on_assignment` on the
    object it is given, so instance state is fine.)"""

    name = STICKY
    version = 0

    def __init__(self) -> None:
        self.round = -1
        self.owned: dict[str, list[int]] = {}

    def metadata(self, topics: Iterable[str]) -> ConsumerProtocolMemberMetadata:
        return ConsumerProtocolMemberMetadata(
            self.version, sorted(topics), encode_owned(self.round, self.owned)
        )

    def assign(
        self,
        cluster: ClusterMetadata,
        members: Mapping[str, ConsumerProtocolMemberMetadata],
    ) -> dict[str, ConsumerProtocolMemberAssignment]:
        topics = {t for md in members.values() for t in md.subscription}
        partitions: dict[str, list[int]] = {}
        for t in topics:
            ps = cluster.partitions_for_topic(t)
            if ps is None:
                log.warning("no partition metadata for topic %s", t)
                continue
            partitions[t] = sorted(ps)
        owned = {m: decode_owned(md.user_data) for m, md in members.items()}
        rnd = max((o[0] for o in owned.values()), default=-1) + 1
        plan = sticky_assign(partitions, {m: md.subscription for m, md in members.items()}, owned)
        return {
            m: ConsumerProtocolMemberAssignment(
                self.version, sorted(plan[m].items()), encode_owned(rnd, {})
            )
            for m in members
        }

    def on_assignment(self, assignment: ConsumerProtocolMemberAssignment) -> None:
        self.round = decode_owned(assignment.user_data)[0]
        self.owned = {t: sorted(ps) for t, ps in assignment.assignment}


def assignors(name: str) -> tuple[object, ...]:
    """The `partition_assignment_strategy` for `--assignor`: sticky is offered before round
    robin, so a group with members that lack it (during a rolling upgrade) still agrees."""
    if name == STICKY:
        return (StickyAssignor(), RoundRobinPartitionAssignor)
    return (RoundRobinPartitionAssignor,)
