"""The commit protocol's owner: owner epochs, state loads and saves, offset commits.

A batch counts as done when its states are saved and its offsets committed, in that order,
after its outputs were acknowledged (docs/integrate/contract.md, "Guarantees", "State").
`Checkpoint` does the store and source half of `loop.run_batch` (at-least-once); its steps,
numbered as there:

  2a. `claim`: an owner epoch for every partition of the batch not claimed since it was
      assigned (one `claim_epoch` round trip each; none in steady state). Every state the
      batch writes carries its partition's epoch, so a worker that lost the partition but
      still runs (a zombie) cannot overwrite what the new owner saved.
  2b. `load`: every state the batch needs, in one round trip.
  5.  `save`: every state write in one round trip, each a compare-and-set on seq and epoch.
  6.  `commit`: `last + 1` per partition, except partitions with a refused write: another
      owner moved on there, so they are rewound to the batch's first offsets and their
      epoch dropped (the next batch there claims anew, and the seq check makes what was
      already applied a no-op). With `Behind` (what `run` uses) the commit runs in the
      background while the lane polls and works on its next batch: it is not on any
      record's path (the states are saved, so a commit that never lands only means a
      redelivery that the seq check turns into no-ops). Commits of one partition stay in
      order (each awaits the one before), the failure of one fails the next batch of its
      partitions that is still ours, and whoever waits for the batches in flight (a
      revocation, a stop) waits for these commits too (`Behind.track`). At most one
      commit starts per partition per `Behind.interval_s` (`--commit-interval-ms`): a
      batch that ends sooner leaves its offsets pending, and the next commit there (a
      later batch's, or `commit_due` between batches, or `settle` at a stop or a
      revocation) carries them, since a partition's last offsets cover all before them.
      Under load that is one OffsetCommit per interval instead of one per batch, for the
      worker and the broker (about a tenth of the worker's CPU at 10 % of its peak), at
      the price of up to an interval more of redelivery after a crash (no-ops).
  -   `abort`: a batch that failed before 6 (an outage) is rewound whole; nothing is
      committed, and the next poll fetches it again.
  -   `fence`: before each step that touches something shared (a producer, the store, the
      offsets), the batch's lease is checked: a batch whose partitions were revoked while
      it ran (`ports.Lease`) raises `Fenced` there and touches nothing more. Each check
      sits in the same synchronous stretch as the call it guards, so no rebalance can
      slip in between.

`TransactionalCheckpoint` (exactly-once, batch/transactional.py) has the same calls over
Kafka transactions.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from worker.batch.steps import bounded
from worker.ports import (
    Batch,
    Fenced,
    Lease,
    Partition,
    Source,
    StateStore,
    StateWrite,
    Stored,
)

log = logging.getLogger("derender.worker")


Offsets = Mapping[Partition, int]


@dataclass(frozen=True)
class Behind:
    """Commits in the background (see step 6), in two halves: `ends(offsets)`, in the
    batch, says what committing `offsets` means now (Kafka: past transaction markers, read
    from the consumer's position before the lane polls on), and `commit(ends)` runs in the
    background, within `timeout_s` (`StepTimeout` "commit", as when awaited in the batch).
    Each background commit is handed to `track`, so that a revocation or a stop waits for
    it as for a batch in flight."""

    ends: Callable[[Offsets], Awaitable[Offsets]]
    commit: Callable[[Offsets], Awaitable[None]]
    timeout_s: float | None
    track: Callable[[asyncio.Future[None]], None] = lambda _commit: None
    # At most one commit starts per partition in this long (0: one per batch); the offsets
    # of a batch that ends sooner are pending until the next (see step 6).
    interval_s: float = 0.0
    clock: Callable[[], float] = time.monotonic


class Checkpoint:
    """Steps 2a, 5 and 6 of the loop over one source and one store.

    `source`: where offsets are committed and rewound; `store`: where states are saved;
    `lease`: the worker's hold on its partitions (None: nothing is ever revoked, as in
    replay and the tests)."""

    def __init__(
        self,
        source: Source,
        store: StateStore,
        lease: Lease | None = None,
        behind: Behind | None = None,
    ) -> None:
        self.source = source
        self.store = store
        self.lease = lease
        self.behind = behind
        # Owner epoch per partition, claimed on first use after each assignment.
        self.epochs: dict[Partition, int] = {}
        # The last commit started in the background per partition, with its batch (kept
        # until the next commit there has looked at how it ended).
        self._commits: dict[Partition, tuple[Batch, asyncio.Future[None]]] = {}
        # Per partition: when its last commit started, and (`Behind.interval_s`) the ends
        # a batch left for the next commit, with that batch.
        self._started: dict[Partition, float] = {}
        self._pending: dict[Partition, tuple[Batch, int]] = {}

    def fence(self, batch: Batch, step: str) -> None:
        """Raise `Fenced` if the batch's partitions were revoked since it was polled."""
        if self.lease is not None and not self.lease.holds(batch):
            raise Fenced(step, batch)

    async def claim(self, batch: Batch) -> tuple[Mapping[Partition, int], int]:
        """Step 2a. Returns the epochs of the batch's partitions (claiming new ones) and
        how many were claimed (each a store round trip)."""
        claimed = 0
        for partition in batch.last:
            if partition not in self.epochs:
                self.fence(batch, "claiming an owner epoch")
                scope = self.source.scope(partition)
                self.epochs[partition] = await self.store.claim_epoch(scope)
                claimed += 1
        return self.epochs, claimed

    def load(
        self,
        batch: Batch,
        requests: Mapping[str, Partition],
        tables_for: AbstractSet[str] = frozenset(),
    ) -> Awaitable[dict[str, Stored | None]]:
        """Step 2b: the states of `requests` (request id → its partition), with the
        tables of `tables_for`. (The store's own awaitable: a coroutine frame less per
        batch; the loop awaits it at once.)"""
        return self.store.load_many(list(requests), None, tables_for)

    def offsets(self, batch: Batch) -> tuple[Mapping[Partition, int], ...] | None:
        """What the batch's state writes must carry, per partition (versioned writes only:
        the first offset of the batch's transaction, the batch's first and last)."""
        return None

    def save(self, writes: list[StateWrite]) -> Awaitable[list[str]]:
        """Step 5. Returns the request ids whose write was refused. (As `load`: the
        store's own awaitable.)"""
        return self.store.save_many(writes) if writes else _none_refused()

    async def commit(
        self, batch: Batch, refused: list[str], partition_of: Mapping[str, Partition]
    ) -> list[Partition]:
        """Step 6. Returns the partitions not committed (rewound) because of `refused`."""
        self.fence(batch, "commit")
        if not refused:  # (the usual case: every partition of the batch is committed)
            lost: list[Partition] = []
            offsets = {p: off + 1 for p, off in batch.last.items()}
        else:
            lost = sorted({partition_of[r] for r in refused if r in partition_of}, key=str)
            offsets = {p: off + 1 for p, off in batch.last.items() if p not in lost}
        if lost:
            log.warning(
                "%d state writes refused (partitions %s moved on); not committing them",
                len(refused),
                ", ".join(map(str, lost)),
            )
            self.forget(lost)
            self.source.rewind(batch, lost)
        if not offsets:
            return lost
        if self.behind is None:
            await self.source.commit(offsets)
            return lost
        behind = self.behind
        if behind.interval_s > 0 and not self._due(offsets, behind):
            self._raise_failed(offsets)
            ends = await behind.ends(offsets)
            self.fence(batch, "commit")
            for p, end in ends.items():
                self._pending[p] = (batch, end)
            return lost
        await self._after_earlier(offsets)
        ends = await behind.ends(offsets)
        self.fence(batch, "commit")  # (the waits above may have outlasted a revocation)
        self._start(batch, ends)
        return lost

    def _due(self, partitions: Iterable[Partition], behind: Behind) -> bool:
        """Whether a commit may start on every one of `partitions` now."""
        now = behind.clock()
        return all(now - self._started.get(p, -math.inf) >= behind.interval_s for p in partitions)

    def _start(self, batch: Batch, ends: Mapping[Partition, int]) -> None:
        """Start the background commit of `ends` (on behalf of `batch`)."""
        behind = self.behind
        assert behind is not None
        commit = asyncio.ensure_future(bounded(behind.commit(ends), behind.timeout_s, "commit"))
        commit.add_done_callback(_report_failure)
        entry = (batch, commit)  # (one object for all its partitions: `_take` forgets by it)
        now = behind.clock()
        for p in ends:
            self._commits[p] = entry
            self._started[p] = now
            self._pending.pop(p, None)  # (these ends are the later ones)
        behind.track(commit)

    def _raise_failed(self, partitions: Iterable[Partition]) -> None:
        """Raise the failure of a finished commit on `partitions` still ours (taken)."""
        for p in partitions:
            earlier = self._commits.get(p)
            failure = self._take(earlier) if earlier and earlier[1].done() else None
            if failure is not None:
                raise failure[1]

    async def _after_earlier(self, offsets: Mapping[Partition, int]) -> None:
        """Wait for the commits still running on these partitions (commits of a partition
        stay in order); raise the failure of one whose partitions are still ours."""
        for p in offsets:
            earlier = self._commits.get(p)
            if earlier is None:
                continue
            if not earlier[1].done():
                # (asyncio.wait: this batch's own timeout must not cancel the earlier one.)
                await asyncio.wait({earlier[1]})
            if (failure := self._take(earlier)) is not None:
                raise failure[1]

    def _take(
        self, earlier: tuple[Batch, asyncio.Future[None]]
    ) -> tuple[Batch, BaseException] | None:
        """Forget a finished commit (on every partition it covered); its failure, if it
        failed while its batch's partitions are still ours."""
        batch, commit = earlier
        for q in batch.last:
            if self._commits.get(q) is earlier:
                del self._commits[q]
        exc = None if commit.cancelled() else commit.exception()
        if exc is None or (self.lease is not None and not self.lease.holds(batch)):
            return None
        return batch, exc

    def failed(self, partitions: Iterable[Partition]) -> tuple[Batch, BaseException] | None:
        """A background commit on `partitions` that failed while its batch's partitions
        are still ours (taken: reported once). With no next batch there to raise it, the
        lane handles it as that batch's failure: rewound, done again (no-ops), committed."""
        for p in partitions:
            earlier = self._commits.get(p)
            if earlier is None or not earlier[1].done():
                continue
            if (failure := self._take(earlier)) is not None:
                return failure
        return None

    def due(self, partitions: Iterable[Partition]) -> list[Partition]:
        """Of `partitions`, those with pending offsets whose interval is up and no commit
        running (committed between batches: `commit_due`)."""
        if self.behind is None or not self._pending:
            return []
        now, interval = self.behind.clock(), self.behind.interval_s
        return [
            p
            for p in partitions
            if p in self._pending
            and now - self._started.get(p, -math.inf) >= interval
            and ((c := self._commits.get(p)) is None or c[1].done())
        ]

    async def commit_due(self, partitions: Iterable[Partition]) -> list[Partition]:
        """Start the commit of the pending offsets of `partitions` (between batches, from
        the lane that owns them). A failure shows at the next batch there, or at
        `failed`."""
        self._flush(list(partitions))
        return []

    def _flush(self, partitions: list[Partition]) -> None:
        """Start one commit per batch that left offsets pending on `partitions` (each
        partition's last pending ends). No lease check: pending offsets are the current
        assignment's (`forget` drops them at a revocation, after `settle` has committed
        them: the partitions are still ours until the rejoin, and their batches done)."""
        by_batch: dict[int, tuple[Batch, dict[Partition, int]]] = {}
        for p in partitions:
            if (entry := self._pending.get(p)) is None:
                continue
            batch, end = entry
            by_batch.setdefault(id(batch), (batch, {}))[1][p] = end
        for batch, ends in by_batch.values():
            self._start(batch, ends)

    async def settle(self, partitions: Iterable[Partition] = ()) -> None:
        """Start the commits still pending on `partitions`, then wait for every commit
        still running in the background (a lane's last act; a revocation's, before its
        partitions move)."""
        if self.behind is not None:
            # (A commit still running there goes first: commits of a partition in order.)
            await self._after_running(partitions := list(partitions))
            self._flush(partitions)
        running = {c for _, c in self._commits.values() if not c.done()}
        if running:
            await asyncio.wait(running)

    async def _after_running(self, partitions: list[Partition]) -> None:
        running = {c[1] for p in partitions if (c := self._commits.get(p)) and not c[1].done()}
        if running:
            await asyncio.wait(running)

    async def abort(self, batch: Batch) -> None:
        """The batch failed before it was committed, or was fenced: deliver it again, on
        the partitions still ours (a revoked one's position is its new owner's now; an
        incremental revocation leaves the batch's other partitions here, and nobody else
        does their records again)."""
        kept = list(batch.last) if self.lease is None else self.lease.kept(batch)
        if kept:
            self.source.rewind(batch, kept)

    def forget(self, partitions: Iterable[Partition]) -> None:
        """The partitions left us (revoked, or another owner wrote): claim anew if back."""
        for p in partitions:
            self.epochs.pop(p, None)
            self._commits.pop(p, None)  # (a revocation waited for it: `Behind.track`)
            self._pending.pop(p, None)  # (a revocation committed it first: `settle`)


async def _none_refused() -> list[str]:
    return []


def _report_failure(commit: asyncio.Future[None]) -> None:
    """Every failed background commit is logged when it ends, whether or not a later batch
    of its partitions raises it (it may be revoked first, or never come)."""
    if not commit.cancelled() and (exc := commit.exception()) is not None:
        log.warning("a commit in the background failed: %s: %s", type(exc).__name__, exc)
