"""Exactly-once's checkpoint: the steps of `checkpoint.Checkpoint` over Kafka transactions,
one per input partition (`ports.Transactions`), each spanning batches for up to
`interval_s` (`--commit-interval-ms`).

  2a. `claim` also begins the transaction of each partition of the batch that has none
      open; the outputs of step 4 go through it. One already open (begun by an earlier
      batch, less than `interval_s` ago) goes on.
  2b. `load` reads the states as of the batch's first offsets: Redis is outside the
      transaction, so a state saved by a batch whose transaction then aborted is passed
      over for the one before it (the store keeps both: `StateWrite.first_offset`).
  5.  `save` writes versioned states: `offsets` puts on them the transaction's first
      offset and the batch's first and last (`StateWrite.since_offset`). A batch that is
      not its transaction's first replaces what the transaction wrote before and keeps
      the state from before the transaction, so an abort of the whole transaction reads
      that one again.
  6.  `commit` adds `last + 1` to each partition's transaction, and commits those open for
      `interval_s` or longer: the outputs, the offsets and (through the versions) the
      states of all their batches become visible together or not at all. The others stay
      open; `commit_due` commits them between batches when their time is up (the lane
      asks `due` after every poll, so a quiet partition commits within one poll timeout
      of it), and `settle` commits a lane's open transactions when it stops and a
      revocation's before its partitions leave (a transaction left open would be aborted
      by the next owner's producer, its batches done again). With `track` (what `run`
      uses) a commit runs in the background: its partitions are held
      (`Transactions.hold`, no lane polls them) until it ends, and the lane goes on with
      its other partitions; each commit is handed to `track`, so that a revocation or a
      stop waits for it as for a batch in flight. A partition with a refused
      write is aborted, like one whose commit fails: both mean another owner may hold
      it, so its producer is dropped until the group is rejoined (a zombie must not start
      another producer: it would fence the real owner).
  -   `abort`: a batch that failed aborts its partitions' transactions, the batches before
      it in them included, and rewinds each to its transaction's first offset.

Why an interval: a transaction's commit costs 10-15 ms of waiting on the broker (its
markers written on every partition the transaction touched, acks=all), so one per batch
caps a lane at 60-100 batches a second however small they are, and makes the broker write
two markers per batch. The price is latency: a read_committed reader sees a batch's
outputs when its transaction commits, up to `interval_s` later (bench/README.md measures
both; the default is chosen there).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from worker.batch.checkpoint import Checkpoint
from worker.batch.steps import bounded
from worker.ports import Batch, Lease, Partition, Source, StateStore, Stored, Transactions

log = logging.getLogger("derender.worker")


@dataclass(slots=True)
class _Open:
    """A partition's open transaction."""

    since: int  # its first input offset: an abort rewinds there
    began: float  # when its first batch began it (the clock's time)
    next: int = -1  # what its commit stores (last + 1 of its last batch); -1: no batch done
    busy: bool = True  # a batch is adding to it (from `claim` to its `commit` or `abort`)


class TransactionalCheckpoint(Checkpoint):
    """Exactly-once: the steps of the loop over one Kafka transaction per input partition,
    each open for up to `interval_s` (0: a transaction per batch). `timeout_s` bounds the
    commits made between batches (`commit_due`, `settle`) and in the background, as
    `step_timeout_s` bounds a batch's. `track`: commits run in the background, each
    handed to it (None: awaited in the batch, as the tests drive it)."""

    def __init__(
        self,
        source: Source,
        store: StateStore,
        transactions: Transactions,
        lease: Lease | None = None,
        *,
        interval_s: float = 0.0,
        timeout_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        track: Callable[[asyncio.Future[None]], None] | None = None,
    ) -> None:
        super().__init__(source, store, lease)
        self.transactions = transactions
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.clock = clock
        self.track = track
        self._open: dict[Partition, _Open] = {}
        # The commit running in the background per partition (held meanwhile).
        self._committing: dict[Partition, asyncio.Future[None]] = {}

    async def claim(self, batch: Batch) -> tuple[Mapping[Partition, int], int]:
        # (A held partition is not polled; a batch polled before its commit began waits.)
        if running := {c for p in batch.last if (c := self._committing.get(p)) is not None}:
            await asyncio.wait(running)
        epochs, claimed = await super().claim(batch)
        # Fenced here, a batch that outlived its revocation never begins a transaction on
        # a producer that the partitions' next assignment (maybe to another lane of this
        # worker) opened: the crash "IN_TRANSACTION -> IN_TRANSACTION".
        self.fence(batch, "begin")
        new = []
        now = self.clock()
        for p in batch.last:
            if (txn := self._open.get(p)) is not None:
                txn.busy = True
            else:
                # (Noted before the begin: if it fails, `abort` finds what to abort.)
                self._open[p] = _Open(batch.first[p], now)
                new.append(p)
        if new:
            await self.transactions.begin(new)
        return epochs, claimed

    async def load(
        self,
        batch: Batch,
        requests: Mapping[str, Partition],
        tables_for: AbstractSet[str] = frozenset(),
    ) -> dict[str, Stored | None]:
        firsts = [batch.first[p] for p in requests.values()]
        return await self.store.load_many(list(requests), firsts, tables_for)

    def offsets(self, batch: Batch) -> tuple[Mapping[Partition, int], ...]:
        # (Revoked during the load, the batch's transactions may be gone or another's.)
        self.fence(batch, "core")
        since = {p: self._open[p].since for p in batch.last}
        return since, batch.first, batch.last

    async def commit(
        self, batch: Batch, refused: list[str], partition_of: Mapping[str, Partition]
    ) -> list[Partition]:
        lost = sorted({partition_of[r] for r in refused if r in partition_of}, key=str)
        if lost:
            log.warning(
                "%d state writes refused (partitions %s moved on): aborting them and "
                "rejoining the group",
                len(refused),
                ", ".join(map(str, lost)),
            )
            self.fence(batch, "abort")
            for p in lost:
                self._open.pop(p, None)
            await self.transactions.abort(lost)
            await self.transactions.drop(lost)
            self.forget(lost)
        # (Fenced before anything is noted: the open transactions may be another batch's.)
        self.fence(batch, "commit")
        now = self.clock()
        due = []
        for p, off in batch.last.items():
            if (txn := self._open.get(p)) is not None:
                txn.next, txn.busy = off + 1, False
                if now - txn.began >= self.interval_s:
                    due.append(p)
        if self.track is not None:
            self._behind(due)
            return lost
        return lost + await self._commit(due)

    def due(self, partitions: Iterable[Partition]) -> list[Partition]:
        """Of `partitions`, those whose transaction is open with nothing adding to it, and
        has been for `interval_s`."""
        now = self.clock()
        return [
            p
            for p in partitions
            if (txn := self._open.get(p)) is not None
            and not txn.busy
            and txn.next >= 0
            and now - txn.began >= self.interval_s
        ]

    async def commit_due(self, partitions: Iterable[Partition]) -> list[Partition]:
        """Commit the transactions `due` says are due (between batches: nothing else
        touches them meanwhile). Returns the partitions whose commit failed (given up;
        in the background: none, the commit logs and gives up its own)."""
        if self.track is not None:
            self._behind(self.due(partitions))
            return []
        return await bounded(self._commit(self.due(partitions)), self.timeout_s, "commit")

    def _behind(self, partitions: list[Partition]) -> None:
        """Start committing the partitions' transactions in the background (taken off the
        open ones now), holding them until it ends."""
        if not partitions:
            return
        assert self.track is not None
        offsets = {p: self._open.pop(p).next for p in partitions}
        self.transactions.hold(partitions)
        commit = asyncio.ensure_future(self._commit_held(offsets))
        for p in partitions:
            self._committing[p] = commit

        def ended(done: asyncio.Future[None]) -> None:  # (cancelled too)
            for p in partitions:
                if self._committing.get(p) is done:
                    del self._committing[p]
            self.transactions.release(partitions)

        commit.add_done_callback(ended)
        self.track(commit)

    async def _commit_held(self, offsets: dict[Partition, int]) -> None:
        """One background commit: a failed partition is given up (`Transactions.commit`
        drops its producer); a commit that does not end in time gives all of its
        partitions up, as one between batches does (`Runner._commit_due`)."""
        try:
            failed = await bounded(self.transactions.commit(offsets), self.timeout_s, "commit")
        except Exception as exc:
            log.warning("committing transactions in the background failed: %s", exc)
            self.forget(offsets)
            await self.transactions.drop(list(offsets))
            return
        self.forget(failed)

    async def settle(self, partitions: Iterable[Partition] = ()) -> None:
        """Commit the open transactions of `partitions` whose batches are all done (a
        lane's last act; a revocation's before its partitions leave), after the commits
        running in the background. A transaction with a batch still adding to it (fenced
        by a revocation) is left to be aborted."""
        if running := set(self._committing.values()):
            await bounded(asyncio.wait(running), self.timeout_s, "commit")
        ready = [p for p in partitions if (t := self._open.get(p)) and not t.busy and t.next >= 0]
        if ready:
            await bounded(self._commit(ready), self.timeout_s, "commit")

    async def _commit(self, partitions: list[Partition]) -> list[Partition]:
        """Commit the partitions' transactions (taken off the open ones first). Returns
        those that failed: their producers were dropped (`Transactions.commit`)."""
        if not partitions:
            return []
        offsets = {p: self._open.pop(p).next for p in partitions}
        failed = await self.transactions.commit(offsets)
        self.forget(failed)
        return failed

    async def abort(self, batch: Batch) -> None:
        # The whole transaction goes, so the rewind is to where it began, not to the
        # batch's first offsets. A revoked partition's part is not touched: its transaction
        # was aborted when its producer closed, and what is open there now is another
        # batch's. An incremental revocation leaves the batch's other partitions here,
        # their transactions holding what the batch began: aborted and rewound as for a
        # failed batch. (Re-checked after the abort, which may outlast a revocation.)
        kept = self._kept(batch)
        if not kept:
            return
        since = {p: txn.since for p in kept if (txn := self._open.pop(p, None))}
        await self.transactions.abort(kept)
        if kept := self._kept(batch):
            self.source.rewind(Batch([], {**batch.first, **since}, batch.last), kept)

    def _kept(self, batch: Batch) -> list[Partition]:
        return list(batch.last) if self.lease is None else self.lease.kept(batch)

    def forget(self, partitions: Iterable[Partition]) -> None:
        partitions = list(partitions)
        for p in partitions:
            self._open.pop(p, None)  # (their producers abort it when they close)
        super().forget(partitions)
