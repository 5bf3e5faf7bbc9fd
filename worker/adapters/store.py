"""The state store contract, shared by the Redis store (production) and the memory store.

Keys are request ids; the store adds its own prefix (`derender:{<request_id>}`, a hash
tag so Redis Cluster keeps each request's key in one slot). A write is a
compare-and-set: it is applied only when the stored seq still equals the seq the batch
loaded (`expected_seq`; None = there must be no state) and the writer's owner epoch is
not older than the one stored with the state. That is what keeps a zombie worker, one
that lost its partitions but still runs, from overwriting newer state.
"""

from __future__ import annotations

from typing import Protocol

from worker.pipeline import StateWrite, Stored

# How long a live request's state survives without a new record (CONTRACT.md §6).
DEFAULT_TTL_S = 3600
# How long a finished request's tombstone is kept: long enough that a redelivery after
# a crash (at most one uncommitted batch, or a rebalance) is recognised as a duplicate.
DEFAULT_DONE_TTL_S = 600


class StateStore(Protocol):
    async def load_many(self, request_ids: list[str]) -> dict[str, Stored | None]:
        """All states of a batch in one round trip; None where there is none."""
        ...

    async def save_many(self, writes: list[StateWrite]) -> list[str]:
        """All writes of a batch in one round trip, each a compare-and-set on
        `write.expected_seq` and `write.epoch`.

        Returns the request ids whose write was refused (seq or epoch moved on).
        Tombstones (`write.done`) get the short TTL.
        """
        ...

    async def claim_epoch(self, scope: str) -> int:
        """A new owner epoch for `scope` (e.g. group/topic/partition), larger than any
        handed out before."""
        ...

    async def close(self) -> None: ...
