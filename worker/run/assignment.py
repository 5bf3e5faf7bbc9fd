"""What the lanes hold of the assigned partitions, and how a rebalance takes it away.

aiokafka's rebalances are eager: every partition is revoked, the group rejoined, then the
new share assigned, each step running in the background while the lanes go on. Three
things keep a batch from crossing that line:

- **No poll spans a rebalance.** From the revocation until the new assignment is ready,
  no lane polls, and the polls waiting on the consumer are cancelled (a waiting `getmany`
  has drained nothing, so cancelling it loses nothing). A poll let on would wake with the
  new assignment and return records of a partition that came back, read from wherever
  the consumer stood: under exactly-once before `Transactions.open` had sought it to its
  committed offset. Another lane then fetched the same records again (422
  outputs twice to a read_committed reader).
- **The batches in flight finish first**, within a bound (half the session timeout, so
  the rebalance is not held up for long); their partitions are still ours until the
  rejoin completes.
- **A batch that outlives that is fenced.** The lease's generation moves on
  (`ports.Lease`); every later step of the batch checks it (`Checkpoint.fence`) and
  raises `Fenced`, so it never touches a producer, state or offset that now belongs to
  another lane or worker (`IN_TRANSACTION -> IN_TRANSACTION`, a stale batch
  beginning a transaction on the producer a new assignment had opened for another lane).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator

from worker.ports import Batch, Lease, Partition

log = logging.getLogger("derender.worker")


class PartitionLease(Lease):
    """A lease that an incremental rebalance (KIP-848) takes back partition by partition:
    a batch is held unless one of its partitions was revoked since it was polled, so the
    batches of the partitions that stay are never fenced."""

    __slots__ = ("_floor", "_revoked_at")

    def __init__(self) -> None:
        super().__init__()
        self._floor = 0  # batches polled before this generation: all revoked
        # The generation each partition was last revoked at (one entry per partition
        # the worker ever held: bounded by the topic's partitions).
        self._revoked_at: dict[Partition, int] = {}

    def revoke(self, partitions: list[Partition] | None = None) -> None:
        self.generation += 1
        if partitions is None:
            self._floor = self.generation
        else:
            for p in partitions:
                self._revoked_at[p] = self.generation

    def holds(self, batch: Batch) -> bool:
        g = batch.generation
        if g < self._floor:
            return False
        return all(self._revoked_at.get(p, -1) <= g for p in batch.last)

    def kept(self, batch: Batch) -> list[Partition]:
        g = batch.generation
        if g < self._floor:
            return []
        return [p for p in batch.last if self._revoked_at.get(p, -1) <= g]


class Assignment:
    """The lease on the assigned partitions, the lanes' waiting polls and their batches in
    flight. `on_drop` is called for every batch dropped because of a rebalance."""

    def __init__(self, on_drop: Callable[[], None] = lambda: None) -> None:
        self.lease = PartitionLease()
        self._on_drop = on_drop
        # Set while no rebalance is under way: lanes poll only then.
        self._settled = asyncio.Event()
        self._settled.set()
        self._polls: set[asyncio.Future[Batch | None]] = set()
        # One future per batch being processed, resolved when it is done.
        self.in_flight: set[asyncio.Future[None]] = set()

    @property
    def settled(self) -> bool:
        return self._settled.is_set()

    async def wait_settled(self, timeout_s: float) -> None:
        """Wait until the rebalance under way is over, or `timeout_s`."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._settled.wait(), timeout_s)

    async def poll(self, poll: Callable[[], Awaitable[Batch | None]]) -> Batch | None:
        """The next batch from `poll()`, stamped with the lease it was polled under; None
        if a revocation cancelled the poll, or if its records were drained under the
        assignment before (the new one starts again from the committed offsets, so
        dropping them loses nothing)."""
        generation = self.lease.generation
        waiting = asyncio.ensure_future(poll())
        self._polls.add(waiting)
        try:
            # (asyncio.wait: a poll cancelled by a revocation is not this lane cancelled.)
            await asyncio.wait({waiting})
        finally:
            self._polls.discard(waiting)
            waiting.cancel()  # (only does something if the lane itself was cancelled)
        if waiting.cancelled():
            return None
        batch = waiting.result()
        if batch is None:
            return None
        batch.generation = generation
        if not self.lease.holds(batch) or not self.settled:
            self._on_drop()
            log.info("dropped a poll of %s fetched before a rebalance", partitions(batch))
            return None
        return batch

    @contextlib.contextmanager
    def processing(self) -> Iterator[None]:
        """Around one batch: a revocation waits for it (within its bound)."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.in_flight.add(done)
        try:
            yield
        finally:
            self.in_flight.discard(done)
            done.set_result(None)

    def track(self, work: asyncio.Future[None]) -> None:
        """Work that a batch left running (its commit, in the background): a revocation
        waits for it as for a batch in flight."""
        self.in_flight.add(work)
        work.add_done_callback(self.in_flight.discard)

    async def revoke(self, wait_s: float, moved: list[Partition] | None = None) -> None:
        """A revocation begins: stop polling, give the batches in flight `wait_s` to
        finish, then move the lease on (fencing any still running). `moved` (an
        incremental rebalance): only those partitions go; the lanes poll on (their
        sources leave out the partitions being revoked) and only batches touching
        `moved` are fenced."""
        if moved is None:
            self._settled.clear()
            for waiting in self._polls:
                waiting.cancel()
        if self.in_flight:
            await asyncio.wait(list(self.in_flight), timeout=wait_s)
        self.lease.revoke(moved)

    def assigned(self) -> None:
        """The new assignment is ready (producers opened, positions sought): poll again."""
        self._settled.set()

    def reset(self) -> None:
        """The clients were replaced, with every batch stopped: a new lease (anything
        left of the old one is fenced) and nothing to wait for until the new consumer's
        first assignment."""
        self.lease.revoke()
        self._settled.set()


def partitions(batch: Batch) -> str:
    return ", ".join(sorted(map(str, batch.last))) or "none"
