"""confluent-kafka (librdkafka) clients configured from Settings, for `--kafka-client
confluent`: KIP-848's consumer group protocol, TLS/SASL, read_committed under
exactly-once, and the thread pool their blocking calls run on.

librdkafka's calls block (a commit waits for the broker), so each runs on a thread of
`Blocking`, awaited with a bound. Its threads are daemons: a call stuck on a dead broker
never holds the process's exit (the worker has already given up on it by then).
librdkafka's errors are turned into aiokafka's error classes (`translated`), so
`failures.classify` and the runner's handling stay the same for both clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import confluent_kafka
from aiokafka import errors as kerrors

from worker.settings import EXACTLY_ONCE, KafkaSecurity, Settings

T = TypeVar("T")


# How long librdkafka may take over a blocking call the worker makes, as a ceiling on the
# caller's own bound (librdkafka has no cancellation: the call's thread finishes it).
CALL_TIMEOUT_S = 30.0


class ConfluentError(kerrors.KafkaError):  # type: ignore[misc]
    """A librdkafka error with no aiokafka counterpart: transient, retried."""

    retriable = True


def _codes() -> dict[int, type[kerrors.KafkaError]]:
    E = confluent_kafka.KafkaError
    return {
        E.MSG_SIZE_TOO_LARGE: kerrors.MessageSizeTooLargeError,
        E.RECORD_LIST_TOO_LARGE: kerrors.RecordListTooLargeError,
        E.TOPIC_AUTHORIZATION_FAILED: kerrors.TopicAuthorizationFailedError,
        E.GROUP_AUTHORIZATION_FAILED: kerrors.GroupAuthorizationFailedError,
        E.CLUSTER_AUTHORIZATION_FAILED: kerrors.ClusterAuthorizationFailedError,
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: kerrors.TransactionalIdAuthorizationFailed,
        E.PRODUCER_FENCED: kerrors.ProducerFenced,
        E._FENCED: kerrors.ProducerFenced,
        E.UNKNOWN_TOPIC_OR_PART: kerrors.UnknownTopicOrPartitionError,
        E._UNKNOWN_TOPIC: kerrors.UnknownTopicOrPartitionError,
        E._UNKNOWN_PARTITION: kerrors.UnknownTopicOrPartitionError,
    }


def translated(exc: BaseException) -> BaseException:
    """librdkafka's `KafkaException` (or a `KafkaError`) as the aiokafka error class the
    worker classifies; anything else as it is."""
    err = exc.args[0] if isinstance(exc, confluent_kafka.KafkaException) and exc.args else exc
    if not isinstance(err, confluent_kafka.KafkaError):
        return exc
    cls = _codes().get(err.code(), ConfluentError)
    out: BaseException = cls(f"{err.name()}: {err.str()}")
    return out


class Blocking:
    """Daemon threads for librdkafka's blocking calls, grown on demand up to `size`
    (concurrent commits of a lane's partitions each take one), reused after.

    A call that outlasts its awaiter's bound goes on on its thread, so a client is closed
    only once no call of its own runs (`wait_idle`): closing a librdkafka handle while
    another thread is inside one of its calls breaks that call (a flush then fails
    with a SystemError, or never returns)."""

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Any, Any] | None] = (
            queue.SimpleQueue()
        )
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._lock = threading.Lock()
        # Calls running per client (by id: a bound method's object), and their ends.
        self._calls: dict[int, int] = {}
        self._ended = threading.Condition(self._lock)

    async def run(self, fn: Callable[..., T], *args: Any, timeout_s: float | None = None) -> T:
        """`fn(*args)` on a pool thread; librdkafka's errors translated. Past `timeout_s`
        a TimeoutError is raised (the call itself ends within its own librdkafka bound)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        client = getattr(fn, "__self__", None)
        if client is None:
            call: Callable[[], Any] = lambda: fn(*args)  # noqa: E731
        else:
            key = id(client)
            with self._lock:
                self._calls[key] = self._calls.get(key, 0) + 1

            def call() -> Any:
                try:
                    return fn(*args)
                finally:
                    with self._lock:
                        if self._calls[key] <= 1:
                            del self._calls[key]
                            self._ended.notify_all()
                        else:
                            self._calls[key] -= 1

        self._submit(call, loop, future)
        try:
            if timeout_s is None:
                return await future
            return await asyncio.wait_for(future, timeout_s)
        except Exception as exc:
            raise translated(exc) from exc

    def wait_idle(self, client: Any, timeout_s: float) -> bool:
        """On a pool thread: wait until no call of `client`'s runs (False: still one after
        `timeout_s`)."""
        with self._ended:
            return self._ended.wait_for(lambda: id(client) not in self._calls, timeout_s)

    def _submit(self, call: Callable[[], Any], loop: Any, future: Any) -> None:
        with self._lock:
            if self._idle == 0 and len(self._threads) < self.size:
                t = threading.Thread(target=self._work, name="librdkafka-call", daemon=True)
                self._threads.append(t)
                t.start()
            else:
                self._idle -= 1
        self._jobs.put((call, loop, future))

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            call, loop, future = job
            try:
                result, error = call(), None
            except BaseException as exc:  # (handed to the awaiting coroutine)
                result, error = None, exc
            # (A loop that has closed meanwhile awaits nothing any more.)
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle, future, result, error)
            with self._lock:
                self._idle += 1


def settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # (its awaiter timed out or was cancelled)
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


def security_config(s: KafkaSecurity) -> dict[str, str]:
    """The TLS/SASL flags as librdkafka properties."""
    out = {"security.protocol": s.security_protocol.lower()}
    if s.security_protocol in ("SSL", "SASL_SSL"):
        for key, path in (
            ("ssl.ca.location", s.ssl_cafile),
            ("ssl.certificate.location", s.ssl_certfile),
            ("ssl.key.location", s.ssl_keyfile),
        ):
            if path:
                out[key] = path
    if s.security_protocol.startswith("SASL"):
        out["sasl.mechanism"] = s.sasl_mechanism or "PLAIN"
        out["sasl.username"] = s.sasl_username or ""
        out["sasl.password"] = s.sasl_password or ""
    return out


# The rebalance timeout's margin over the longest rebalance callback.
POLL_MARGIN_S = 10.0


def consumer_config(s: Settings) -> dict[str, Any]:
    """KIP-848: the broker assigns, and a rebalance revokes only the partitions that move.
    Its session and heartbeat intervals are the broker's (`group.consumer.*`), not ours."""
    reset = s.reset if s.reset in ("earliest", "latest") else "earliest"
    conf: dict[str, Any] = {
        "bootstrap.servers": s.bootstrap_servers,
        "group.id": s.group_id,
        "group.protocol": "consumer",
        "client.id": f"derender-worker-{s.group_id}",
        # Offsets are committed by hand after outputs are acked and states saved.
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": reset,
        "fetch.wait.max.ms": s.fetch_max_wait_ms,
        # Exactly-once: never read what an aborted transaction wrote upstream; a new
        # owner's offset fetch also waits for a transaction still carrying offsets.
        "isolation.level": "read_committed" if s.guarantee == EXACTLY_ONCE else "read_uncommitted",
        # What librdkafka prefetches per partition, on top of what a lane holds.
        "queued.max.messages.kbytes": 16384,
        # KIP-848's rebalance timeout: a member that has not given up what it should by
        # then is fenced. Above the longest rebalance callback; the last resort of a
        # member that missed its new assignment (`group_watch`), 300 s by default.
        "max.poll.interval.ms": int((callback_timeout_s(s) + POLL_MARGIN_S) * 1000),
        **security_config(s),
    }
    if s.group_instance_id:
        conf["group.instance.id"] = s.group_instance_id
    return conf


def callback_timeout_s(s: Settings) -> float:
    """How long a rebalance callback waits for the worker: its batches get half the
    session timeout, then the producers' calls their step timeout."""
    return s.session_timeout_ms / 2000 + 2 * s.step_timeout_s


def producer_config(s: Settings, transactional_id: str | None = None) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": s.bootstrap_servers,
        "client.id": f"derender-worker-{s.group_id}",
        # acks=all as the aiokafka producer: an output counts once every in-sync replica
        # has it. Idempotence stays off outside transactions (see kafka.make_producer).
        "acks": "all",
        "linger.ms": s.linger_ms,
        "batch.size": s.batch_bytes,
        "request.timeout.ms": s.request_timeout_ms,
        # murmur2 of the key, as aiokafka and the Java client: a request's outputs land
        # on the same partition whichever client a worker runs.
        "partitioner": "murmur2_random",
        **security_config(s),
    }
    if transactional_id is not None:
        conf["transactional.id"] = transactional_id
        conf["transaction.timeout.ms"] = s.transaction_timeout_ms
    else:
        conf["enable.idempotence"] = False
    return conf
