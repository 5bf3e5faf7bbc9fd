"""Worker settings: every `run` flag, its `DERENDER_<FLAG>` variable and its default.

One table (`FLAGS`) drives `run`'s argument parser, the environment lookup and the CLI
reference (docs/operate/cli.md, written from it), so the three cannot drift apart.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, fields
from typing import Any

from worker import constants
from worker.flags import (
    SECRET_FILE_SUFFIX,
    add_flag_list,
    read_secret_files,
)
from worker.flags import Flag as Flag  # (re-exported: flags are `run`'s settings)
from worker.flags import SettingsError as SettingsError
from worker.flags import env_name as env_name
from worker.observe.propagation import pass_header_names
from worker.run.cpus import usable_cpus
from worker.urls import redact_url

ENV_PREFIX = constants.ENV_PREFIX

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# The flags of a Kafka connection's security, shared by `run`, `publish` and `tail`.
KAFKA_SECURITY_FLAGS = (
    "security-protocol",
    "sasl-mechanism",
    "sasl-username",
    "sasl-password",
    "ssl-cafile",
    "ssl-certfile",
    "ssl-keyfile",
)

AT_LEAST_ONCE = "at-least-once"
EXACTLY_ONCE = "exactly-once"
GUARANTEES = (AT_LEAST_ONCE, EXACTLY_ONCE)
AIOKAFKA = "aiokafka"
CONFLUENT = "confluent"
KAFKA_CLIENTS = (AIOKAFKA, CONFLUENT)


def count_or_auto(raw: str) -> int:
    """A positive count, or `auto`: the CPUs this process may use (cgroup quota included)."""
    if raw.strip().lower() == "auto":
        return usable_cpus()
    return int(raw)


FLAGS: list[Flag] = [
    Flag("bootstrap-servers", "localhost:9092", "Kafka bootstrap servers, comma-separated"),
    Flag("input-topic", constants.INPUT_TOPIC, "topic of ChunkRecords (key = request_id)"),
    Flag("output-topic", constants.OUTPUT_TOPIC, "topic of OpenAI payloads"),
    Flag("dlq-topic", constants.DLQ_TOPIC, "dead-letter topic for undecodable records"),
    Flag(
        "control-topic",
        None,
        "topic of early-stop records for the engine (a request the worker finished "
        "first: stop string, failure, abort); off when unset",
    ),
    Flag("group-id", constants.GROUP_ID, "Kafka consumer group"),
    Flag(
        "group-instance-id",
        None,
        "static group membership id (e.g. the pod name): a restart within the "
        "session timeout does not rebalance",
    ),
    Flag("redis-url", "redis://localhost:6379/0", "Redis URL (redis:// or rediss://)", secret=True),
    Flag("state-prefix", "derender:", "Redis key prefix (a separate one isolates a replay run)"),
    Flag(
        "redis-mode",
        "standalone",
        "standalone: one Redis command per batch each way; cluster: a Redis Cluster "
        "(--redis-url lists seed nodes, comma-separated), one pipeline per master each way; "
        "proxy: single-key commands only (Redis Cluster behind a cluster-aware proxy)",
    ),
    Flag(
        "redis-wait-replicas",
        0,
        "each state save returns once this many replicas of its master have it (WAIT, in "
        "the same round trip); fewer within --redis-wait-timeout-ms is retried like an "
        "outage. 0: Redis's asynchronous replication (a failover may lose the last saves)",
        int,
    ),
    Flag(
        "redis-wait-timeout-ms",
        1000,
        "how long a save waits for --redis-wait-replicas",
        int,
    ),
    Flag(
        "guarantee",
        AT_LEAST_ONCE,
        "at-least-once (outputs may repeat after a crash, with identical bytes: consumers "
        "drop repeated (request, seq, part) headers) or exactly-once (each partition's "
        "outputs, offsets and states in one Kafka transaction: read_committed consumers "
        "see every output once)",
    ),
    Flag(
        "commit-interval-ms",
        # A shorter interval costs exactly-once throughput, a longer one read_committed
        # readers' latency (bench/results/: commit-interval, prefilled).
        250,
        "how often a partition's progress is committed (0: after every batch). "
        "Exactly-once: how long its transaction stays open over successive batches; "
        "read_committed readers see outputs up to this much later. At-least-once: at most "
        "one offsets commit (in the background) per interval; a crash redelivers up to "
        "this much more (no-ops)",
        int,
    ),
    Flag(
        "transaction-timeout-ms",
        10000,
        "exactly-once: the broker aborts a transaction open this long (a dead worker's "
        "open transaction holds read_committed readers back at most this long)",
        int,
    ),
    Flag(
        "transactional-id-prefix",
        "derender-",
        "exactly-once: transactional ids are <prefix><group>-<topic>-<partition>",
    ),
    Flag("models", None, "model registry TOML (default: the built-in DeepSeek V4 entry)"),
    Flag("metrics-port", 9400, "port of /metrics, /healthz and /readyz (0 = off)", int),
    Flag("metrics-host", "0.0.0.0", "address the metrics server binds"),
    Flag("max-batch", 500, "records per poll batch at most", int),
    Flag(
        "lanes",
        2,
        "batches in flight at once, each over its own share of the assigned partitions: "
        "one lane's core runs while another waits on the broker and Redis (1 = one batch "
        "at a time)",
        int,
    ),
    Flag(
        "processes",
        1,
        "worker processes in this pod, each its own consumer-group member, under one "
        "supervisor that serves the metrics port ('auto' = one per usable CPU)",
        count_or_auto,
    ),
    Flag("poll-timeout-ms", 100, "how long a poll waits for records", int),
    Flag("state-ttl-s", 3600, "TTL of a live request's state, refreshed on every write", int),
    Flag("done-ttl-s", 600, "TTL of a finished request's tombstone (dedupes redeliveries)", int),
    Flag(
        "outage-limit-s",
        60.0,
        "exit non-zero after Redis or the broker failed this long (the supervisor restarts)",
        float,
    ),
    Flag("max-record-bytes", 8 * 1024 * 1024, "input records larger than this are refused", int),
    Flag(
        "max-output-bytes",
        constants.DEFAULT_MAX_OUTPUT_BYTES,
        "an output larger than this fails its request (keep it under the output topic's "
        "max.message.bytes)",
        int,
    ),
    Flag(
        "request-timeout-ms",
        40000,
        "how long a Kafka request may go unanswered before it fails (and the batch is "
        "retried): a frozen broker is noticed after this long",
        int,
    ),
    Flag(
        "step-timeout-s",
        30.0,
        "longest one step of a batch may wait on a server (claim, load, produce and its "
        "acks, save, commit, a transaction call): past it the step is an outage, the batch "
        "is rewound and retried, and --outage-limit-s applies",
        float,
    ),
    Flag(
        "shutdown-timeout-s",
        10.0,
        "on SIGTERM: how long the batches in flight may take to finish and commit before "
        "they are abandoned (their partitions' next owner redoes them); closing the "
        "clients and leaving the group take at most 5 s more. Keep the sum under the "
        "pod's terminationGracePeriodSeconds",
        float,
    ),
    Flag("session-timeout-ms", 10000, "Kafka consumer group session timeout", int),
    # Short: a member hears of a rebalance at its next heartbeat, and the partitions of
    # the members that heard first wait for the last (docs/design/rebalancing.md).
    Flag("heartbeat-interval-ms", 250, "Kafka consumer heartbeat interval", int),
    Flag(
        "assignor",
        "sticky",
        "how the group deals out the input partitions: sticky (a rebalance moves only "
        "the partitions that must move; each member keeps the rest, and under "
        "exactly-once their producers) or roundrobin (aiokafka's: everything dealt anew)",
        choices=("sticky", "roundrobin"),
    ),
    Flag(
        "kafka-client",
        "aiokafka",
        "aiokafka (the classic group protocol: every rebalance stops every partition) or "
        "confluent (experimental: confluent-kafka on librdkafka with KIP-848's consumer "
        "group protocol, Apache Kafka 4.0+: a rebalance stops only the partitions that "
        "move; --assignor, --session-timeout-ms and --heartbeat-interval-ms are then the "
        "broker's group.consumer.* settings)",
        choices=KAFKA_CLIENTS,
    ),
    # 0: the worker already hands the producer one full record batch per partition
    # (kafka_sink.py), so waiting for more records only adds latency.
    Flag("linger-ms", 0, "producer linger", int),
    # aiokafka's default of 16 KiB cut a 500-record batch's outputs into ~10 record
    # batches, sent as ~5 produce requests one after another (one in flight per broker),
    # each awaited with acks=all: most of the `produce` stage.
    Flag(
        "batch-bytes",
        262144,
        "largest record batch the producer builds for one partition (outputs, dead letters); "
        "cut at start-up to the smallest max.message.bytes of the topics written, when the "
        "broker tells it",
        int,
    ),
    Flag(
        "fetch-max-wait-ms",
        10,
        "longest a fetch waits on the broker for new records: bounds the added latency "
        "when the broker does not answer a fetch as soon as data arrives",
        int,
    ),
    # Long: idle, the worker and its broker kept busy on a fetch every --fetch-max-wait-ms,
    # while Apache Kafka answers a whole fetch as soon as records arrive anyway.
    Flag(
        "fetch-whole-wait-ms",
        500,
        "longest a fetch that asks for every assigned partition waits (0: "
        "--fetch-max-wait-ms): fewer fetches while idle, on a broker that answers a fetch "
        "as soon as records arrive, as Apache Kafka does; 0 for one that holds them to the "
        "end of the wait (tansu)",
        int,
    ),
    Flag(
        "reset",
        None,
        "where a new group starts: 'earliest', 'latest', or an epoch-ms timestamp "
        "(reprocess a topic under another --group-id, --state-prefix and --output-topic)",
    ),
    Flag("security-protocol", "PLAINTEXT", "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"),
    Flag("sasl-mechanism", None, "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"),
    Flag("sasl-username", None, "SASL user name"),
    Flag(
        "sasl-password",
        None,
        "SASL password (prefer the variable or --sasl-password-file: a flag shows in ps)",
        secret=True,
    ),
    Flag("ssl-cafile", None, "CA bundle for TLS to the brokers"),
    Flag("ssl-certfile", None, "client certificate (mutual TLS)"),
    Flag("ssl-keyfile", None, "client key (mutual TLS)"),
    Flag(
        "event-loop",
        "auto",
        "auto (uvloop when installed, else asyncio), uvloop or asyncio",
    ),
    Flag("log-format", "text", "text or json"),
    Flag("log-level", "INFO", "DEBUG, INFO, WARNING or ERROR"),
    Flag(
        "pass-headers",
        None,
        "input header names, comma-separated, copied onto every record an input record "
        "produces (a tenant id a deployment routes by), as traceparent, tracestate and "
        "baggage always are",
    ),
]


@dataclass(frozen=True)
class KafkaSecurity:
    """How a Kafka client connects: `run`'s settings (a `Settings` is one) and the tools'
    flags (`publish`, `tail`: the same flags)."""

    security_protocol: str
    sasl_mechanism: str | None
    sasl_username: str | None
    sasl_password: str | None
    ssl_cafile: str | None
    ssl_certfile: str | None
    ssl_keyfile: str | None

    def __repr__(self) -> str:  # (never the password)
        return f"<KafkaSecurity {self.security_protocol} {self.sasl_mechanism} ***>"


@dataclass(frozen=True, repr=False)
class Settings(KafkaSecurity):
    """`run`'s settings, one field per flag (FLAGS); the security fields come from
    `KafkaSecurity`."""

    bootstrap_servers: str
    input_topic: str
    output_topic: str
    dlq_topic: str
    control_topic: str | None
    group_id: str
    group_instance_id: str | None
    redis_url: str
    state_prefix: str
    redis_mode: str
    redis_wait_replicas: int
    redis_wait_timeout_ms: int
    guarantee: str
    commit_interval_ms: int
    transaction_timeout_ms: int
    transactional_id_prefix: str
    models: str | None
    metrics_port: int
    metrics_host: str
    max_batch: int
    lanes: int
    processes: int
    poll_timeout_ms: int
    state_ttl_s: int
    done_ttl_s: int
    outage_limit_s: float
    max_record_bytes: int
    max_output_bytes: int
    request_timeout_ms: int
    step_timeout_s: float
    shutdown_timeout_s: float
    session_timeout_ms: int
    heartbeat_interval_ms: int
    assignor: str
    kafka_client: str
    linger_ms: int
    batch_bytes: int
    fetch_max_wait_ms: int
    fetch_whole_wait_ms: int
    reset: str | None
    event_loop: str
    log_format: str
    log_level: str
    pass_headers: str | None

    def __repr__(self) -> str:  # (what may be logged: secrets masked)
        return f"Settings({self.redacted()})"

    def redacted(self) -> dict[str, Any]:
        """The settings as they may be logged: secrets masked."""
        secret = {f.attr for f in FLAGS if f.secret}
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "redis_url" and isinstance(value, str):
                value = redact_url(value)
            elif f.name in secret and value is not None:
                value = "***"
            out[f.name] = value
        return out


def add_flags(parser: argparse.ArgumentParser, environ: dict[str, str] | None = None) -> None:
    add_flag_list(parser, FLAGS, environ)


def security_flags() -> list[Flag]:
    return [f for f in FLAGS if f.name in KAFKA_SECURITY_FLAGS]


def add_security_flags(parser: argparse.ArgumentParser) -> None:
    add_flag_list(parser, security_flags())


def security_from_args(args: argparse.Namespace) -> KafkaSecurity:
    read_secret_files(args, security_flags())
    sec = KafkaSecurity(**{f.attr: getattr(args, f.attr) for f in security_flags()})
    validate_security(sec)
    return sec


def to_env(s: Settings) -> dict[str, str | None]:
    """The settings as `DERENDER_*` variables (None = unset): how a supervisor hands them
    to its worker processes, so that no secret shows on a command line."""
    env = {f.env: None if (v := getattr(s, f.attr)) is None else str(v) for f in FLAGS}
    # A secret read from its file is passed on as its value: the file's variable is unset.
    env |= {env_name(f.name + SECRET_FILE_SUFFIX): None for f in FLAGS if f.secret}
    return env


def from_args(args: argparse.Namespace) -> Settings:
    read_secret_files(args, FLAGS)
    values = {f.attr: getattr(args, f.attr) for f in FLAGS}
    s = Settings(**values)
    validate(s)
    return s


def validate_security(s: KafkaSecurity) -> None:
    """The Kafka security flags, before anything connects: a typo in a mechanism or a
    path is a configuration error, not an outage."""
    if s.security_protocol not in SECURITY_PROTOCOLS:
        raise SettingsError(
            f"--security-protocol: unknown protocol {s.security_protocol!r} "
            f"(expected {', '.join(SECURITY_PROTOCOLS)})"
        )
    if s.security_protocol.startswith("SASL"):
        if s.sasl_mechanism not in SASL_MECHANISMS:
            raise SettingsError(
                f"--sasl-mechanism: unknown mechanism {s.sasl_mechanism!r} "
                f"(expected {', '.join(SASL_MECHANISMS)})"
            )
        if not s.sasl_username or s.sasl_password is None:
            raise SettingsError(
                f"--security-protocol {s.security_protocol} needs --sasl-username and "
                "--sasl-password (or --sasl-password-file)"
            )
    if s.security_protocol in ("SSL", "SASL_SSL"):
        for flag, path in (
            ("--ssl-cafile", s.ssl_cafile),
            ("--ssl-certfile", s.ssl_certfile),
            ("--ssl-keyfile", s.ssl_keyfile),
        ):
            if path is not None and not os.access(path, os.R_OK):
                raise SettingsError(f"{flag}: cannot read {path}")
        if s.ssl_keyfile and not s.ssl_certfile:
            raise SettingsError("--ssl-keyfile needs --ssl-certfile")


def validate(s: Settings) -> None:
    validate_security(s)
    if s.redis_mode not in ("standalone", "cluster", "proxy"):
        raise SettingsError(
            f"--redis-mode: expected standalone, cluster or proxy, got {s.redis_mode!r}"
        )
    if s.redis_wait_replicas < 0:
        raise SettingsError("--redis-wait-replicas must be 0 or more")
    if s.redis_wait_replicas and s.redis_mode == "proxy":
        raise SettingsError("--redis-wait-replicas needs --redis-mode standalone or cluster")
    if not 0 < s.redis_wait_timeout_ms < 5000:
        raise SettingsError("--redis-wait-timeout-ms must be between 1 and 4999")
    if s.guarantee not in GUARANTEES:
        raise SettingsError(
            f"--guarantee: expected at-least-once or exactly-once, got {s.guarantee!r}"
        )
    if s.transaction_timeout_ms < 1000:
        raise SettingsError("--transaction-timeout-ms must be at least 1000")
    # (A transaction open for longer than half the broker's timeout risks being aborted
    # by the broker before its commit arrives.)
    if not 0 <= s.commit_interval_ms <= s.transaction_timeout_ms // 2:
        raise SettingsError(
            f"--commit-interval-ms must be between 0 and half --transaction-timeout-ms "
            f"({s.transaction_timeout_ms // 2}), got {s.commit_interval_ms}"
        )
    if s.event_loop not in ("auto", "uvloop", "asyncio"):
        raise SettingsError(f"--event-loop: expected auto, uvloop or asyncio, got {s.event_loop!r}")
    if s.log_format not in ("text", "json"):
        raise SettingsError(f"--log-format: expected text or json, got {s.log_format!r}")
    if s.max_output_bytes < 1:
        raise SettingsError("--max-output-bytes must be at least 1")
    if s.request_timeout_ms < 1000:
        raise SettingsError("--request-timeout-ms must be at least 1000")
    if s.fetch_whole_wait_ms < 0:
        raise SettingsError("--fetch-whole-wait-ms must be 0 or more")
    if s.step_timeout_s <= 0:
        raise SettingsError("--step-timeout-s must be more than 0")
    if s.shutdown_timeout_s <= 0:
        raise SettingsError("--shutdown-timeout-s must be more than 0")
    if not 16384 <= s.batch_bytes <= 1048576:
        raise SettingsError("--batch-bytes must be between 16384 and 1048576")
    if s.max_batch < 1:
        raise SettingsError("--max-batch must be at least 1")
    if s.lanes < 1:
        raise SettingsError("--lanes must be at least 1")
    if s.processes < 1:
        raise SettingsError("--processes must be at least 1 (or auto)")
    if s.reset not in (None, "earliest", "latest") and not s.reset.isdigit():
        raise SettingsError(f"--reset: expected earliest, latest or epoch ms, got {s.reset!r}")
    if s.kafka_client == CONFLUENT and s.reset is not None and s.reset.isdigit():
        raise SettingsError("--reset <epoch ms> needs --kafka-client aiokafka")
    try:
        pass_header_names(s.pass_headers)
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
    topics = [s.input_topic, s.output_topic, s.dlq_topic]
    topics += [s.control_topic] if s.control_topic is not None else []
    if len(set(topics)) != len(topics):
        raise SettingsError(
            "--input-topic, --output-topic, --dlq-topic and --control-topic must differ"
        )
