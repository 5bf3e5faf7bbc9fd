"""`derender-worker servers`: a local Kafka broker and redis-server for development."""

from __future__ import annotations

import argparse
from pathlib import Path

from worker.flags import Command, Flag

FLAGS: list[Flag] = [
    Flag(
        "kafka",
        None,
        "the broker: apache or tansu (default: apache when java and mvn are installed, else tansu)",
        choices=("apache", "tansu"),
    ),
    Flag(
        "data-dir",
        None,
        "keep the broker's log and Redis's data here, across runs (Apache Kafka only)",
        Path,
        metavar="DIR",
    ),
    Flag("kafka-port", None, "the broker's port (default: a free one)", int, metavar="N"),
    Flag(
        "redis-port",
        None,
        "redis-server's port (default: a free one; with --redis-cluster, the first of 2N "
        "consecutive ports)",
        int,
        metavar="N",
    ),
    Flag(
        "redis-cluster",
        None,
        "a Redis Cluster of N masters with a replica each instead of one redis-server; "
        "REDIS_URL is then its seed list (run the worker with --redis-mode cluster)",
        int,
        metavar="N",
    ),
]


def run(args: argparse.Namespace) -> int:
    from worker.tools.servers import Options, run_servers

    options = Options(
        args.kafka, args.data_dir, args.kafka_port, args.redis_port, args.redis_cluster
    )
    return run_servers(options)


COMMAND = Command(
    "servers",
    "a local Kafka broker and redis-server for development, until Ctrl-C",
    "Starts a broker (Apache Kafka when java and mvn are installed, else tansu) and "
    "redis-server on 127.0.0.1, creates the worker's default topics, prints "
    "KAFKA_BOOTSTRAP_SERVERS=… and REDIS_URL=… on stdout once both accept connections, "
    "and stops both on Ctrl-C or SIGTERM.",
    FLAGS,
    run,
)
