"""What the worker has done: the totals of its last log line, and the metrics each batch
moves (records by result, outputs by kind, tokens, batch sizes, requests still open)."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

from worker.batch.loop import BatchReport
from worker.constants import DLQ
from worker.observe.metrics import Metrics
from worker.ports import StateWrite

# How often requests that went quiet past their TTL leave the active-requests gauge.
ACTIVE_PRUNE_EVERY_S = 10.0


@dataclass
class Totals:
    records: Counter[str] = field(default_factory=Counter)
    outputs: int = 0
    tokens: int = 0
    batches: int = 0

    def summary(self) -> str:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.records.items())) or "none"
        return (
            f"{sum(self.records.values())} records ({counts}), {self.outputs} outputs, "
            f"{self.tokens} tokens"
        )


class Accounts:
    """A batch's report into `totals` and `metrics`; `state_ttl_s` ends a quiet request."""

    def __init__(self, metrics: Metrics, state_ttl_s: float) -> None:
        self.metrics = metrics
        self.state_ttl_s = state_ttl_s
        self.totals = Totals()
        self._active: dict[str, float] = {}
        self._pruned_at = time.monotonic()

    def batch(self, report: BatchReport) -> None:
        result, m, t = report.result, self.metrics, self.totals
        t.batches += 1
        t.records.update(result.results)
        t.outputs += len(result.outputs)
        t.tokens += result.tokens
        m.batch_size.observe(report.records)
        m.tokens.inc(result.tokens)
        for k, v in result.results.items():
            m.records.labels(k).inc(v)
        for code, n in result.errors.items():
            m.errors.labels(code).inc(n)
        # One increment per kind, not per output (a labelled increment costs ~1.8 µs).
        for kind, n in Counter(o.kind for o in result.outputs).items():
            m.outputs.labels(kind).inc(n)
        if result.dead_letters:
            m.outputs.labels(DLQ).inc(len(result.dead_letters))
        self._track_active(report.writes)

    def _track_active(self, writes: list[StateWrite]) -> None:
        now = time.monotonic()
        for w in writes:
            if w.done:
                self._active.pop(w.request_id, None)
            else:
                self._active[w.request_id] = now
        # Prune abandoned requests past their TTL; a scan of every open request, so not
        # on every batch (at peak that scan was 2 % of the worker's CPU).
        if now - self._pruned_at >= ACTIVE_PRUNE_EVERY_S:
            self._pruned_at = now
            cutoff = now - self.state_ttl_s
            self._active = {k: v for k, v in self._active.items() if v >= cutoff}
        self.metrics.active_requests.set(len(self._active))
