"""What one run found: its events, polls, pauses, workers, checks and targets."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tests.autoscale.checks.measure import EventPause
from tests.autoscale.checks.moves import EventMoves
from tests.autoscale.load.fleet import ScaleEvent, Worker
from tests.autoscale.scaling.hpa import HpaSettings
from tests.autoscale.scaling.keda import Poll


@dataclass
class RunResult:
    name: str
    guarantee: str
    static: bool
    folder: Path
    settings: HpaSettings
    events: list[ScaleEvent] = field(default_factory=list)
    polls: list[Poll] = field(default_factory=list)
    pauses: list[EventPause] = field(default_factory=list)
    # Per scale event: its window's moves, pauses and stalls (checks/moves.py).
    moves: list[EventMoves] = field(default_factory=list)
    # Rolling replacements during scale-outs: (when, old worker, new worker).
    replacements: list[tuple[float, str, str]] = field(default_factory=list)
    workers: list[Worker] = field(default_factory=list)
    timeline: list[tuple[float, int]] = field(default_factory=list)
    records: int = 0
    requests: int = 0
    outputs: int = 0
    repeats: int = 0
    burst_records: int = 0
    burst_publish_s: float = 0.0
    drain_s: float = 0.0
    peak_metric: float = 0.0
    peak_replicas: int = 0
    start: float = 0.0
    marks: list[tuple[float, str]] = field(default_factory=list)
    checks: dict[str, str] = field(default_factory=dict)  # name → "" (ok) or what failed
    code: str = ""  # code_hash() at the start
    notes: list[str] = field(default_factory=list)
    # Issue 24's targets: reported, not failing the run (name → "" met, or the miss).
    targets: dict[str, str] = field(default_factory=dict)
    lag_compare: str = ""
    rest_lag: tuple[float, list[float | None]] | None = None  # KEDA, the workers' gauges

    @property
    def passed(self) -> bool:
        return not any(self.checks.values())
