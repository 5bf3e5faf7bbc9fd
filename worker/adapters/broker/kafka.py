"""aiokafka clients configured from Settings: TLS/SASL, manual commits, acks=all, and the
transactional producers of exactly-once."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaConnectionError
from aiokafka.helpers import create_ssl_context

from worker.adapters.broker import kafka_access, kafka_join
from worker.adapters.broker.kafka_assign import assignors
from worker.settings import EXACTLY_ONCE, KafkaSecurity, Settings

log = logging.getLogger("derender.worker")


def security_kwargs(s: KafkaSecurity) -> dict[str, Any]:
    kw: dict[str, Any] = {"security_protocol": s.security_protocol}
    if s.security_protocol in ("SSL", "SASL_SSL"):
        kw["ssl_context"] = create_ssl_context(
            cafile=s.ssl_cafile, certfile=s.ssl_certfile, keyfile=s.ssl_keyfile
        )
    if s.security_protocol.startswith("SASL"):
        kw["sasl_mechanism"] = s.sasl_mechanism
        kw["sasl_plain_username"] = s.sasl_username
        kw["sasl_plain_password"] = s.sasl_password
    return kw


def check_bootstrapped(consumer: AIOKafkaConsumer) -> None:
    """Raise KafkaConnectionError when the started consumer knows no broker.

    aiokafka's bootstrap succeeds on a MetadataResponse that lists no brokers (a KRaft
    broker just resumed from a freeze answered so, in the chaos suite), and the group
    coordinator then dies on an assertion ("Did we not perform bootstrap?"): the consumer
    never joins, and nothing reports it. Failing the connect instead makes it an outage
    the runner retries. (`_client.cluster` is aiokafka's; no public call says this.)"""
    if not consumer._client.cluster.brokers():
        raise KafkaConnectionError("the broker's metadata lists no brokers yet")


# Not 0: an idle lane takes its records within this, and the next fetch then asks for
# its partition again; with 0 that partition was left out of a fetch that waited up to
# fetch_max_wait_ms on the others, and its next record waited with it.
PREFETCH_BACKOFF_S = 0.005


def fetch_each_partition(consumer: AIOKafkaConsumer) -> None:
    """After `start`: a partition whose fetched records wait to be consumed no longer
    holds back the fetches of the other partitions its broker leads.

    aiokafka sends no fetch to a broker while any partition it leads holds records not yet
    consumed, for up to `prefetch_backoff` (100 ms; a Fetcher argument AIOKafkaConsumer
    does not expose). With lanes on one consumer, a lane running a batch leaves its
    partitions' records waiting, so no other lane's partitions were fetched until it
    polled again: the lanes polled in lockstep, each record waiting on the other lane's
    batch too. After `PREFETCH_BACKOFF_S`, the partition with records waiting is left
    out of the next fetch and the others are fetched, as the Java consumer does; what is
    buffered stays bounded (one fetch's worth per partition). (`_fetcher` is aiokafka's;
    like `check_bootstrapped`, no public call reaches it.)"""
    consumer._fetcher._prefetch_backoff = PREFETCH_BACKOFF_S


def wait_longer_when_whole(consumer: AIOKafkaConsumer, whole_wait_ms: int) -> None:
    """After `start`: a fetch that asks for every assigned partition long-polls for
    `whole_wait_ms` instead of `fetch_max_wait_ms` (0 or less than it: off).

    The short wait is there for a partition left out of the fetch in flight (its records
    still waiting to be consumed: `fetch_each_partition`), which is asked for again only
    when that fetch returns. A fetch that left none out has no such partition: a broker
    that answers as soon as records arrive (Apache Kafka) answers it no later, and an idle
    consumer sends a fetch per `whole_wait_ms` instead of one per `fetch_max_wait_ms`.
    Not for a broker that answers only at the end of the wait (tansu): its records would
    wait that long (`derender-worker demo` and `servers` say so, and the tests set 0 on
    it). (`_fetcher` is aiokafka's, as in `fetch_each_partition`.)"""
    if whole_wait_ms <= 0:
        return  # (off: aiokafka's fetcher as it is)
    fetcher = consumer._fetcher
    short = fetcher._fetch_max_wait_ms
    if whole_wait_ms <= short:
        return
    build = fetcher._get_actions_per_node

    def actions(assignment: Any) -> Any:
        states = (assignment.state_value(tp) for tp in assignment.tps)
        whole = not fetcher._records and all(
            st.has_valid_position and not st.paused for st in states
        )
        fetcher._fetch_max_wait_ms = whole_wait_ms if whole else short
        return build(assignment)

    fetcher._get_actions_per_node = actions


def make_consumer(s: Settings) -> AIOKafkaConsumer:
    kafka_join.install()  # (one JoinGroup per rejoin, with every assignor)
    reset = s.reset if s.reset in ("earliest", "latest") else "earliest"
    return AIOKafkaConsumer(
        bootstrap_servers=s.bootstrap_servers,
        group_id=s.group_id,
        group_instance_id=s.group_instance_id,
        client_id=f"derender-worker-{s.group_id}",
        # Offsets are committed by hand after outputs are acked and states saved.
        enable_auto_commit=False,
        auto_offset_reset=reset,
        max_poll_records=s.max_batch,
        fetch_max_wait_ms=s.fetch_max_wait_ms,
        session_timeout_ms=s.session_timeout_ms,
        request_timeout_ms=s.request_timeout_ms,
        heartbeat_interval_ms=s.heartbeat_interval_ms,
        # Sticky: a rebalance moves only the partitions that must move (kafka_assign).
        partition_assignment_strategy=assignors(s.assignor),
        # Exactly-once: never read what an aborted transaction wrote upstream, and stop
        # at the last stable offset.
        isolation_level="read_committed" if s.guarantee == EXACTLY_ONCE else "read_uncommitted",
        **security_kwargs(s),
    )


def make_producer(s: Settings) -> AIOKafkaProducer:
    return AIOKafkaProducer(
        bootstrap_servers=s.bootstrap_servers,
        client_id=f"derender-worker-{s.group_id}",
        # acks=all: an output counts as delivered only once every in-sync replica has
        # it; the input offset is committed after that. (aiokafka's default is acks=1.)
        # Producer idempotence is left off: a retried send can duplicate a record,
        # which consumers drop by its (request_id, seq, part) headers anyway, and some
        # Kafka-compatible brokers do not implement it.
        acks="all",
        linger_ms=s.linger_ms,
        max_batch_size=s.batch_bytes,
        request_timeout_ms=s.request_timeout_ms,
        **security_kwargs(s),
    )


def make_transactional_producer(s: Settings, transactional_id: str) -> AIOKafkaProducer:
    """Exactly-once: a producer for one input partition's transactions (idempotent,
    acks=all, both implied by the transactional id)."""
    return AIOKafkaProducer(
        bootstrap_servers=s.bootstrap_servers,
        client_id=f"derender-worker-{s.group_id}",
        transactional_id=transactional_id,
        transaction_timeout_ms=s.transaction_timeout_ms,
        linger_ms=s.linger_ms,
        max_batch_size=s.batch_bytes,
        request_timeout_ms=s.request_timeout_ms,
        **security_kwargs(s),
    )


async def check_access(s: Settings) -> int | None:
    """Before the clients start: a refused login, an untrusted certificate, a missing
    topic or ACL is a ConfigError naming the fix (`kafka_access`). Returns the smallest
    `max.message.bytes` of the topics the worker writes (None: the broker did not say)."""
    return await kafka_access.check_access(s, security_kwargs(s))


def within_limit(s: Settings, limit: int | None) -> Settings:
    """`--batch-bytes` cut to the written topics' `max.message.bytes` (`limit`; None:
    unknown, unchanged), with a warning: a batch over it would be refused whole, and
    records of other requests sent again after their requests' later outputs."""
    if limit is None or s.batch_bytes <= limit:
        return s
    log.warning(
        "--batch-bytes %d is over the max.message.bytes of the topics written (%d): "
        "record batches are kept to %d bytes",
        s.batch_bytes,
        limit,
        limit,
    )
    return dataclasses.replace(s, batch_bytes=limit)
