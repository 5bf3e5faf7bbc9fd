"""Paths, constants and the four runs of `make autoscale`."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCALED_OBJECT = ROOT / "deploy" / "k8s" / "keda-scaledobject.yaml"
RESULTS = ROOT / "bench" / "results"
VENV_BIN = Path(sys.executable).parent
DEFAULT_KEDALAG = Path.home() / ".cache" / "derender-keda" / "kedalag"

PARTITIONS = 8
COMPRESSION = 10.0
GRACE_S = 30.0  # Kubernetes' terminationGracePeriodSeconds default
SIGTERM_TARGET_S = 15.0
PAUSE_P50_TARGET_S = 1.0
PAUSE_MAX_TARGET_S = 3.0
# A scale event's pause is looked for in this window after it (cut at the next event).
EVENT_WINDOW_S = 20.0
# While a scale-out's lag lasts, a worker is replaced this often (a rolling update during
# the scale); its old worker is stopped once the new one holds partitions, or after this.
REPLACE_EVERY_S = 3.0
READY_WITHIN_S = 15.0
# The targets for partitions at a scale event: those that did not move pause at most
# this long; those that moved stall at most these (p50, max).
UNMOVED_PAUSE_TARGET_S = 0.5
MOVED_STALL_P50_TARGET_S = 1.0
MOVED_STALL_MAX_TARGET_S = 2.0
CREATED = 1_767_225_600
TICK_S = 0.005
# The broker's JVM: bench/worker_bench.py's (full JIT tiers, a fixed heap, serial GC).
JVM_OPTIONS = ("-Xms512m", "-Xmx1g", "-XX:+UseSerialGC", "-XX:+ExitOnOutOfMemoryError")
# KIP-848 groups (`--kafka-client confluent`): the broker sets the members' heartbeat and
# session (the local broker's 3 s session is for tests; 10 s as the aiokafka workers'
# --session-timeout-ms).
BROKER_CONFIG = {
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "10000",
    # A new assignment as soon as a member joins or leaves, not at most once a second.
    "group.consumer.assignment.interval.ms": "0",
    # Kafka's default (the local broker's 3 s is for tests): see bench/rebalance_bench.py.
    "broker.session.timeout.ms": "9000",
}

AT_LEAST_ONCE, EXACTLY_ONCE = "at-least-once", "exactly-once"
RUNS = {
    "alo-dynamic": (AT_LEAST_ONCE, False),
    "alo-static": (AT_LEAST_ONCE, True),
    "eos-dynamic": (EXACTLY_ONCE, False),
    "eos-static": (EXACTLY_ONCE, True),
}
