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

import enum

from aiokafka import errors as kafka
from redis import exceptions as redis


class Kind(enum.Enum):
    TRANSIENT = "transient"  # back off and retry the batch from its first offsets
    CONFIG = "config"  # exit at once: no retry can succeed until someone changes something
    DATA = "data"  # one record cannot be delivered: fail its request, move on


class ConfigError(Exception):
    """The worker cannot run as configured (exit code 2, nothing retried)."""


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
