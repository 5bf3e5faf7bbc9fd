"""Whether batches get through: the outage clock and the Kafka steps that stalled.

A batch is through when its offsets are committed: at the end of the batch under
exactly-once, when its commit in the background succeeds under at-least-once
(`checkpoint.Behind`). Only that ends an outage or a run of stalls; a batch whose commit
then fails is done again, and counts as failing."""

from __future__ import annotations

import asyncio

from worker.batch.steps import StepTimeout
from worker.failures import KAFKA_STEPS, STALLS_BEFORE_REBUILD, ClientsStalled, Outage


class Health:
    def __init__(self, outage: Outage) -> None:
        self.outage = outage
        # Kafka steps in a row that timed out (any lane): at STALLS_BEFORE_REBUILD the
        # clients are replaced.
        self.stalls = 0

    def through(self) -> None:
        self.stalls = 0
        self.outage.recovered()

    def committed(self, commit: asyncio.Future[None]) -> None:
        """Done callback of a commit in the background."""
        if not commit.cancelled() and commit.exception() is None:
            self.through()

    async def failed(self, exc: BaseException) -> None:
        """A batch failed (it was rewound): back off, and raise `ClientsStalled` when
        Kafka steps timed out too many times in a row."""
        stalled = isinstance(exc, StepTimeout) and exc.step in KAFKA_STEPS
        self.stalls = self.stalls + 1 if stalled else 0
        await self.outage.failed("processing a batch", exc)
        if self.stalls >= STALLS_BEFORE_REBUILD:
            raise ClientsStalled(f"{self.stalls} Kafka steps in a row: {exc}") from exc
