"""Constants of the worker benchmark and its two profiles (full and quick)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


# --redis: where the workers keep their states.
REDIS_SETUPS = ("standalone", "cluster-1", "cluster-3")

RESULTS_DIR = ROOT / "bench" / "results"
# The script the passthrough runs as (`worker_bench.py _passthrough`).
SCRIPT = ROOT / "bench" / "worker_bench.py"

# The passthrough's log line for an assignment (see `settle`).
ASSIGNED = "passthrough assigned"
# Input header the passthrough copies into `derender-seq` (the worker ignores it).
H_BENCH_SEQ = "bench-seq"

PARTITIONS = 4
# The reader is the measuring instrument: a short fetch wait, so it adds little delay.
READER_FETCH_WAIT_MS = 5
# tansu's group joins wait about half a session timeout (tests/integration/harness.py);
# Apache Kafka as kafka_server configures it accepts session timeouts from 1 s.
SESSION_TIMEOUT_MS = 3000
HEARTBEAT_MS = 500
# Paced publishing sends the records due every tick, as an engine emits one burst of
# records per decode step. 1 ms ticks cost tansu ~2.5× the CPU for the same records
# (one produce request per tick) and starved the 2-core machine.
TICK_S = 0.005
# The passthrough gets this many copies of the peak workload: it is faster, and a window
# under a second or two is noisy.
PASSTHROUGH_COPIES = 2
CREATED = 1_767_225_600

# Targets, reported against (never asserted).
TARGET_VS_PASSTHROUGH = 0.75  # worker records/s ≥ 0.75× the passthrough's, 1 process vs 1
TARGET_CPU_US = 28.0  # worker CPU per record at peak, 1-token records
TARGET_ADDED_P50_MS = 5.0  # e2e p50 over the passthrough's at the same rate (10 %, 50 %)
TARGET_P99_TIMES = 1.5  # e2e p99 ≤ 1.5× the passthrough's at the same rate
TARGET_EXACTLY_ONCE = 0.8  # exactly-once records/s ≥ 0.8× at-least-once
TARGET_ROUND_TRIPS = 2.0  # exactly one load + one save per batch
# The worker's histogram column: the share of records within this (a bucket bound).
TARGET_P99_S = 0.025
HALF = 0.5
TENTH = 0.1

# The worker's delivery guarantees (`run --guarantee`).
AT_LEAST_ONCE = "at-least-once"
EXACTLY_ONCE = "exactly-once"

BROKERS = ("apache", "tansu")
# The JVM of a benchmarked broker: kafka_server's fast-start options less C1-only
# (`TieredStopAtLevel=1`, which that module says to drop for throughput), and a larger
# heap fixed at start. The serial collector stays: on 2 cores, concurrent GC threads
# would compete with the system under test.
BENCH_JVM_OPTIONS = (
    "-Xms512m",
    "-Xmx1g",
    "-XX:+UseSerialGC",
    "-XX:+ExitOnOutOfMemoryError",
)
# The warm-up's paced points: at the profile's fractions of this share of the warm-up
# passthrough's own peak (about the worker's peak, whose points come first), each this
# long; its runs repeat until the broker's JIT compiler threads use under JIT_IDLE_CORES
# over one, at most WARMUP_MAX_RUNS times (runs.warm_broker; 2 min into a
# bench that warmed on a peak alone, C2 had used 10.8 s of CPU, the busiest request
# handler thread 2.7 s).
WARMUP_SHARE = 0.5
WARMUP_POINT_S = 5.0
JIT_IDLE_CORES = 0.1
WARMUP_MAX_RUNS = 6
# Transactions the warm-up commits before an exactly-once system runs, so the broker's
# transaction coordinator is compiled and its internal topic loaded.
WARMUP_TRANSACTIONS = 200
# Cores used by other processes above which the report warns that it was not measured alone.
OTHER_LOAD_WARN = 0.25


@dataclass(frozen=True)
class Profile:
    requests: int  # concurrent, interleaved requests in each workload
    chunks: int  # chunk records per request in the peak workload (plus its `end`)
    fractions: tuple[float, ...]  # latency points, as fractions of the worker's peak
    point_s: float  # length of one latency point
    repeats: int  # peak measurements per system and chunk size (median reported)
    peak_timeout_s: float = 120.0
    # Large requests: each request's seq-0 record carries a chat request with
    # this many tools (4 typed parameters each) and stop strings of 100 characters that the
    # output never meets (`--tools`, `--stops`); 0 and 0: no request at all.
    tools: int = 0
    stops: int = 0

    def request(self) -> dict[str, Any] | None:
        if not (self.tools or self.stops):
            return None
        from tests.core.parsers.shared.samples import decoy_tools

        req: dict[str, Any] = {"messages": []}
        if self.tools:
            req["tools"] = decoy_tools(self.tools)
        if self.stops:
            req["stop"] = [f"\u2603{i:05d}" + "\u2604" * 94 for i in range(self.stops)]
        return req


FULL = Profile(
    requests=2000,
    chunks=30,
    fractions=(0.1, 0.25, 0.5),
    point_s=5.0,
    repeats=3,
)
# Both profiles have the points the targets and the summary read: 10 % and 50 %.
QUICK = Profile(
    requests=1000,
    chunks=15,
    fractions=(0.1, 0.5),
    point_s=2.5,
    repeats=1,
)
