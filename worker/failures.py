"""What an error means for the loop: retry the batch, stop the worker, or fail one request.

The loop used to retry every Kafka and Redis error alike until `outage_limit_s`. But some
errors cannot pass by waiting: a configuration error (a refused credential or ACL, a
missing topic) should stop the worker at once with a message an operator can act on, and a
data error (one output the broker refuses as too large) must fail that one request, not
block its partition for ever (every restart would replay the same batch).

aiokafka marks each error class with `retriable`; redis-py's error classes say what
happened. Anything not named here stays transient: waiting and then giving up after the
outage limit is the old, safe behaviour.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import random
import time
from typing import Protocol

from aiokafka import errors as kafka
from redis import exceptions as redis

from worker.errors import ConfigError as ConfigError  # (exit code 2, nothing retried)

log = logging.getLogger("derender.worker")

# Backoff between retries of a failed batch: doubles from the first value up to the
# cap, with full jitter so a fleet of workers does not retry in lockstep.
BACKOFF_FIRST_S = 0.1
BACKOFF_CAP_S = 5.0


class Kind(enum.Enum):
    TRANSIENT = "transient"  # back off and retry the batch from its first offsets
    CONFIG = "config"  # exit at once: no retry can succeed until someone changes something
    DATA = "data"  # one record cannot be delivered: fail its request, move on


# Kafka errors an output can earn on its own (its size or its bytes), not the cluster.
_KAFKA_DATA = (
    kafka.MessageSizeTooLargeError,
    kafka.RecordListTooLargeError,
    kafka.RecordTooLargeError,
    kafka.CorruptRecordException,
)
_KAFKA_CONFIG = (
    kafka.TopicAuthorizationFailedError,
    kafka.GroupAuthorizationFailedError,
    kafka.ClusterAuthorizationFailedError,
    kafka.TransactionalIdAuthorizationFailed,
    kafka.InvalidTopicError,
    kafka.UnsupportedVersionError,
    kafka.UnsupportedSaslMechanismError,
)
_REDIS_CONFIG = (redis.AuthenticationError, redis.AuthorizationError, redis.NoPermissionError)
_CONFIG = (*_KAFKA_CONFIG, *_REDIS_CONFIG, ConfigError)

# The exception types the loop handles at all; anything else is a bug and propagates.
HANDLED = (kafka.KafkaError, redis.RedisError, ConnectionError, TimeoutError, OSError)


def classify(exc: BaseException) -> Kind:
    if isinstance(exc, _KAFKA_DATA):
        return Kind.DATA
    if isinstance(exc, _CONFIG):
        return Kind.CONFIG
    # A Kafka error not marked retriable (KafkaTimeoutError, a fenced commit, …) is still
    # worth waiting for: the cluster may come back, the rebalance settle.
    return Kind.TRANSIENT


class OutageTooLong(Exception):
    """Redis or the broker stayed unavailable past the configured limit."""


class ClientsStalled(Exception):
    """The Kafka clients stopped answering: the worker replaces them (`Runner._rebuild`).

    Raised by a lane after `STALLS_BEFORE_REBUILD` Kafka steps in a row waited past the
    step timeout. Seen after a broker restart under load: aiokafka's group coordinator
    never found its way back, every commit waited its whole timeout, and the worker sat in
    an outage until the limit while a new consumer would have joined at once (other Kafka
    clients have the same failure, and the same cure: librdkafka #2725, kafkajs #1152)."""


# A batch's steps (`loop.run_batch`'s names) that wait on Kafka, not Redis.
KAFKA_STEPS = frozenset({"produce", "commit"})
# How many Kafka steps in a row may time out before the clients are rebuilt: one may be a
# slow broker (a coordinator moving, a log being loaded); two in a row, a minute of
# silence at the default step timeout, is a client that will not come back by itself.
STALLS_BEFORE_REBUILD = 2


class _Counter(Protocol):
    def inc(self, amount: float = 1) -> None: ...


class Outage:
    """The worker's current outage, if any: when it began and how many retries it took.

    `failed` backs off before a retry (returning early when `stopping` is set), or raises
    when retrying cannot help (ConfigError) or has not for `limit_s` (OutageTooLong);
    `recovered` ends the outage. `waited` counts the seconds spent backing off."""

    def __init__(self, limit_s: float, stopping: asyncio.Event, waited: _Counter) -> None:
        self.limit_s = limit_s
        self.stopping = stopping
        self.waited = waited
        self.since: float | None = None
        self.failures = 0

    async def failed(self, what: str, exc: BaseException) -> None:
        if classify(exc) is Kind.CONFIG:
            raise ConfigError(f"{what}: {type(exc).__name__}: {exc}") from exc
        now = time.monotonic()
        if self.since is None:
            self.since = now
            log.warning("%s failed, retrying: %s: %s", what, type(exc).__name__, exc)
        elapsed = now - self.since
        if elapsed > self.limit_s:
            raise OutageTooLong(
                f"{what} kept failing for {elapsed:.0f}s (limit {self.limit_s:.0f}s); "
                f"last error: {type(exc).__name__}: {exc}"
            )
        self.failures += 1
        delay = random.uniform(0, min(BACKOFF_CAP_S, BACKOFF_FIRST_S * 2**self.failures))
        self.waited.inc(delay)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stopping.wait(), timeout=delay)

    def recovered(self) -> None:
        if self.since is not None:
            log.info("recovered after %.1fs", time.monotonic() - self.since)
        self.since = None
        self.failures = 0
