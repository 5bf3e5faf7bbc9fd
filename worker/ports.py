"""The ports: what flows between the batch loop and its adapters, and the adapters' shapes.

A leaf module (it imports no other part of the worker), so sources, sinks and stores
depend on it and never on the loop or the pipeline:

    adapters (kafka_source, kafka_sink, files, redis_store, memory_store)
        → ports ←  pipeline, loop, checkpoint, runner, replay

Records are msgspec Structs: built in C, several times cheaper than a dataclass's
generated __init__, and a batch builds a few per input record. gc=False where nothing they
hold can lead back to them.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Protocol

import msgspec

# A partition as its source names it (aiokafka's TopicPartition; a file's name). Opaque to
# the loop: it keys offsets and epochs, and the source turns it into an epoch scope.
Partition = Hashable


class InRecord(msgspec.Struct, gc=False):
    value: bytes
    key: str | None = None
    timestamp_ms: int | None = None
    # Where it came from, for dead letters and logs: file:line, or (topic, partition,
    # offset), formatted only when a dead letter needs it (most records never do).
    origin: str | tuple[str, int, int] = ""
    # The partition it was read from: the unit whose offsets are committed and whose
    # owner epoch fences the states its requests write.
    partition: Partition = None
    # The input headers its outputs carry (W3C trace context, baggage, --pass-headers:
    # `worker.observe.propagation`), kept by the source; None, at no cost, when there are none.
    headers: tuple[tuple[str, bytes], ...] | None = None

    @property
    def source(self) -> str:
        o = self.origin
        return o if isinstance(o, str) else f"{o[0]}/{o[1]}/{o[2]}"


class OutRecord(msgspec.Struct, gc=False):
    key: str
    value: bytes
    headers: list[tuple[str, bytes]]
    kind: str
    # The input partition whose records produced it: under exactly-once, the transaction
    # that carries it (one per input partition; `adapters.broker.kafka_txn`).
    source_partition: Partition = None
    # The output topic's partition it goes to: its request's reply partition (the seq-0
    # record's `reply_partition`). None: the key's partition. Dead letters and control
    # records go to their own topics by key and ignore it.
    partition: int | None = None


class Stored(msgspec.Struct, gc=False):
    """A state as read from the store: its seq (kept beside the blob for compare-and-set),
    and the request's tables blob when the load asked for it (`tables_for`) and there is one."""

    seq: int
    blob: bytes
    tables: bytes | None = None


class StateWrite(msgspec.Struct, gc=False):
    request_id: str
    seq: int
    blob: bytes
    done: bool  # a tombstone: short TTL
    expected_seq: int | None  # the seq it was loaded at (None: there was none)
    epoch: int  # the writer's owner epoch for the partition of the request's records
    # Exactly-once only (-1 otherwise): the first and last input offsets of the writing
    # batch in the request's partition. The store keeps the state before this write beside
    # it, and a later load from an offset at or below `last_offset` (the batch came back:
    # its transaction never committed) reads that one instead (`StateStore.load_many`).
    first_offset: int = -1
    last_offset: int = -1
    # The request's tables (core/tables.py), written with the state that opens the
    # request and kept beside it, untouched by later writes; b"" for none.
    tables: bytes = b""
    # Exactly-once, a transaction spanning batches (`--transaction-ms`): the first input
    # offset of the writing batch's transaction (-1: `first_offset`, a transaction per
    # batch). A state written since then is this transaction's own, not yet committed: a
    # write over it keeps the state before the transaction (which its abort goes back to).
    since_offset: int = -1

    @property
    def versioned(self) -> bool:
        return self.last_offset >= 0

    @property
    def since(self) -> int:
        return self.first_offset if self.since_offset < 0 else self.since_offset


@dataclass(slots=True)
class Batch:
    """One poll's records, in partition order, with the offsets that bound them.

    `first` is where a rewind seeks back to (the batch is fetched again); `last` + 1 is
    what a commit stores. A request's records all sit in one partition (the Kafka key
    decides it), so each record's `partition` is also its request's."""

    records: list[InRecord]
    first: dict[Partition, int]
    last: dict[Partition, int]
    # The assignment it was polled under (`Lease.generation`): a batch whose partitions
    # were revoked while it ran is `Fenced` at its next step.
    generation: int = 0


class Fenced(Exception):
    """The batch's partitions were revoked while it ran (a rebalance outlasted it): it may
    touch nothing any more (no produce, save, commit, rewind or abort), since its
    partitions, their producers and positions may now be another lane's or worker's. It is
    dropped; the partitions' next owner does it again from the committed offsets."""

    def __init__(self, step: str, batch: Batch) -> None:
        parts = ", ".join(sorted(map(str, batch.last))) or "none"
        super().__init__(f"batch of {parts} fenced before {step}: its partitions were revoked")
        self.step = step


class Lease:
    """The worker's hold on its assigned partitions, as a generation number that grows at
    every revocation. Batches are stamped with it when polled; one stamped with an older
    generation is a zombie inside its own process, and every step that touches shared
    things (a producer, the store, the offsets) checks it first (`Checkpoint.fence`)."""

    __slots__ = ("generation",)

    def __init__(self) -> None:
        self.generation = 0

    def revoke(self) -> None:
        self.generation += 1

    def holds(self, batch: Batch) -> bool:
        return batch.generation == self.generation

    def kept(self, batch: Batch) -> list[Partition]:
        """The batch's partitions not revoked since it was polled (here: all or none)."""
        return list(batch.last) if self.holds(batch) else []


class Source(Protocol):
    async def poll(self) -> Batch | None:
        """The next batch, or None when there is nothing (yet, or any more)."""
        ...

    def rewind(self, batch: Batch, partitions: list[Partition] | None = None) -> None:
        """Deliver the batch's records again from `first` (only `partitions`, if given)."""
        ...

    async def commit(self, offsets: Mapping[Partition, int]) -> None:
        """Store `offsets` (the next offset to read, i.e. last + 1) as consumed."""
        ...

    def scope(self, partition: Partition) -> str:
        """The name of the owner-epoch counter of `partition` (group/topic/partition)."""
        ...


class OutputsRefused(Exception):
    """Records the broker will never take (each with the error it gave); every other
    record of the batch was delivered."""

    def __init__(self, refused: list[tuple[OutRecord, BaseException]]) -> None:
        super().__init__(f"{len(refused)} outputs refused by the broker: {refused[0][1]}")
        self.refused = refused


class Sink(Protocol):
    async def send(self, outputs: list[OutRecord], dead_letters: list[OutRecord]) -> None:
        """Publish every record and return once each is acknowledged; raises otherwise
        (`OutputsRefused` when only some records were refused, for themselves)."""
        ...


class Transactions(Protocol):
    """Exactly-once's Kafka side (`adapters.broker.kafka_txn`): one transaction per input
    partition, carrying its outputs (the Sink's `send`) and its next offset."""

    async def begin(self, partitions: list[Partition]) -> None: ...

    async def send(self, outputs: list[OutRecord], dead_letters: list[OutRecord]) -> None: ...

    async def commit(self, offsets: Mapping[Partition, int]) -> list[Partition]:
        """Commit each partition's transaction with its offset; returns those that failed
        (fenced, timed out, outcome unknown): they are no longer ours to process."""
        ...

    async def abort(self, partitions: list[Partition]) -> None: ...

    def hold(self, partitions: list[Partition]) -> None:
        """No lane polls the partitions until `release` (their transactions are being
        committed in the background)."""
        ...

    def release(self, partitions: list[Partition]) -> None: ...

    async def drop(self, partitions: list[Partition]) -> None:
        """Give the partitions up until the group is rejoined."""
        ...


class StateStore(Protocol):
    """Keys are request ids; the store adds its own prefix (`constants.KEY_PREFIX`). A
    write is a compare-and-set: applied only when the stored seq still equals the seq the
    batch loaded (`expected_seq`; None = there must be no state) and the writer's owner
    epoch is not older than the one stored with the state. That is what keeps a zombie
    worker, one that lost its partitions but still runs, from overwriting newer state."""

    async def load_many(
        self,
        request_ids: list[str],
        first_offsets: list[int] | None = None,
        tables_for: AbstractSet[str] = frozenset(),
    ) -> dict[str, Stored | None]:
        """All states of a batch in one round trip; None where there is none.

        `first_offsets` (exactly-once): per request, the batch's first offset in its
        partition. A state written by a batch that reached that offset was never committed
        (its records are being read again), so the state saved before it is returned.
        `tables_for`: the requests whose tables blob to return too (`Stored.tables`), in
        the same round trip — those the worker does not hold compiled."""
        ...

    async def save_many(self, writes: list[StateWrite]) -> list[str]:
        """All writes of a batch in one round trip, each a compare-and-set on
        `write.expected_seq` and `write.epoch`.

        Returns the request ids whose write was refused (seq or epoch moved on).
        Tombstones (`write.done`) get the short TTL. A versioned write (`first_offset` set)
        compares `expected_seq` against the state `load_many` would return for its batch,
        replaces a state left by an uncommitted batch, and otherwise keeps the state it
        replaces as the one before it.
        """
        ...

    async def claim_epoch(self, scope: str) -> int:
        """A new owner epoch for `scope` (e.g. group/topic/partition), larger than any
        handed out before."""
        ...

    async def start(self) -> None:
        """Connect before the first batch (a Redis Cluster's topology is read here); a
        transient error is retried by the caller, ConfigError stops the worker."""
        ...

    async def close(self) -> None: ...
