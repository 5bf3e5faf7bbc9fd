"""Before the worker's Kafka clients start: may it connect, and may it do what it must?

aiokafka's clients hide why they could not connect: a refused password or an untrusted
broker certificate is logged, and `start()` raises "Unable to bootstrap", as it does for
a broker that is merely down. The worker would then retry until its outage limit and
exit as if the cluster had been away for a minute. A missing ACL shows up later still, in
the middle of a rebalance or a fetch, as an error with no hint of the fix.

`check_access` asks first, over one connection made as the clients will make it (the same
TLS context, SASL mechanism and credentials; aiokafka's own `create_conn`), and turns
every answer that waiting cannot change into a `ConfigError` naming what to fix:

- the TLS handshake: a certificate no CA in `--ssl-cafile` signed, a certificate for
  another host name, a client certificate the broker requires and did not get; a
  listener that speaks TLS to a plaintext client, or plaintext to a TLS one (it resets
  the handshake, as a restarting broker may: asked in plaintext, it answers);
- the SASL login: a refused user name or password, a mechanism the broker does not enable;
- the ACLs, from the broker's own answer (Metadata v8's `topic_authorized_operations`,
  DescribeGroups v3's `authorized_operations`): READ on the input topic, WRITE on the
  output, dead-letter and control topics, READ on the group; a topic that does not exist.

It also reads the smallest `max.message.bytes` of the topics the worker writes
(`message_limit`): the producers' batches are kept under it (`runner`), so a batch the
broker refuses as too large holds one record, too large by itself, and never the outputs
of other requests (sent again, those would land after their requests' later outputs).

A broker that does not answer at all stays what it was: a transient error, retried.
WRITE on the transactional ids of exactly-once cannot be asked without taking them (an
InitProducerId would fence their owners), so it is checked where it is first used
(`access_error`, from `kafka_txn`), as are rights revoked while the worker runs.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

from aiokafka import errors
from aiokafka.conn import AIOKafkaConnection, create_conn
from aiokafka.protocol.admin import (
    DescribeConfigsRequest,
    DescribeGroupsRequest_v3,
    DescribeGroupsResponse_v3,
)
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.coordination import FindCoordinatorRequest
from aiokafka.protocol.metadata import MetadataRequest_v4, MetadataRequest_v5
from aiokafka.protocol.types import Array, Boolean, Int16, Int32, Schema, String

from worker.adapters.broker.kafka_probe import speaks_kafka
from worker.failures import ConfigError
from worker.settings import KafkaSecurity, Settings

# Kafka's AclOperation codes: an authorized_operations field is a bit set of them.
READ, WRITE, DESCRIBE = 3, 4, 8
OPERATION_NAMES = {READ: "READ", WRITE: "WRITE", DESCRIBE: "DESCRIBE"}
# An authorized_operations the broker did not compute (not asked, or not known).
OPERATIONS_UNKNOWN = -(2**31)
# Kafka error codes the answers below carry.
UNKNOWN_TOPIC = 3
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
# OpenSSL's verify results for a certificate of another host name or IP address.
NAME_MISMATCH = (62, 64)


class MetadataResponse_v8(Response):  # type: ignore[misc]
    API_KEY = 3
    API_VERSION = 8
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "brokers",
            Array(
                ("node_id", Int32),
                ("host", String("utf-8")),
                ("port", Int32),
                ("rack", String("utf-8")),
            ),
        ),
        ("cluster_id", String("utf-8")),
        ("controller_id", Int32),
        (
            "topics",
            Array(
                ("error_code", Int16),
                ("topic", String("utf-8")),
                ("is_internal", Boolean),
                (
                    "partitions",
                    Array(
                        ("error_code", Int16),
                        ("partition", Int32),
                        ("leader", Int32),
                        ("leader_epoch", Int32),
                        ("replicas", Array(Int32)),
                        ("isr", Array(Int32)),
                        ("offline_replicas", Array(Int32)),
                    ),
                ),
                ("topic_authorized_operations", Int32),
            ),
        ),
        ("cluster_authorized_operations", Int32),
    )


class MetadataRequest_v8(RequestStruct):  # type: ignore[misc]
    """Metadata with the operations the caller may perform on each topic (KIP-430);
    aiokafka's own requests stop at v5. v8 is the last before the flexible encoding."""

    API_KEY = 3
    API_VERSION = 8
    RESPONSE_TYPE = MetadataResponse_v8
    SCHEMA = Schema(
        ("topics", Array(String("utf-8"))),
        ("allow_auto_topic_creation", Boolean),
        ("include_cluster_authorized_operations", Boolean),
        ("include_topic_authorized_operations", Boolean),
    )


class Metadata(Request[MetadataRequest_v4 | MetadataRequest_v5 | MetadataRequest_v8]):  # type: ignore[misc]
    """Metadata of `topics` (never created by asking), with the caller's rights on each
    where the broker tells them (v8+; a broker that stops earlier answers without)."""

    API_KEY = 3

    def __init__(self, topics: list[str]) -> None:
        self.topics = topics

    def build(self, request_struct_class: Any) -> Any:
        if request_struct_class.API_VERSION >= 8:
            return request_struct_class(self.topics, False, False, True)
        return request_struct_class(self.topics, False)


class _DescribeGroupsV3(DescribeGroupsRequest_v3):  # type: ignore[misc]
    # aiokafka's v3 request decodes its answer as v2, which lacks authorized_operations.
    RESPONSE_TYPE = DescribeGroupsResponse_v3


class DescribeGroup(Request[_DescribeGroupsV3]):  # type: ignore[misc]
    API_KEY = 15

    def __init__(self, group: str) -> None:
        self.group = group

    def build(self, request_struct_class: type[_DescribeGroupsV3]) -> _DescribeGroupsV3:
        return request_struct_class([self.group], True)


def principal(s: Settings) -> str:
    """Who the broker sees, as its ACLs name it (a certificate's principal depends on
    the broker's ssl.principal.mapping.rules: this is only the usual case)."""
    if s.security_protocol.startswith("SASL") and s.sasl_username:
        return f"User:{s.sasl_username}"
    if s.security_protocol == "SSL" and s.ssl_certfile:
        return f"the principal of the certificate {s.ssl_certfile}"
    return "User:ANONYMOUS"


def acl_missing(s: Settings, operation: str, kind: str, name: str, hint: str = "") -> str:
    """The one line that names a missing ACL and the kafka-acls arguments that add it."""
    flag = {"topic": "--topic", "group": "--group", "transactional id": "--transactional-id"}
    who = principal(s)
    allow = who if who.startswith("User:") else "<principal>"
    return (
        f"Kafka ACL missing: {who} may not {operation} {kind} {name!r} (kafka-acls --add "
        f"--allow-principal {allow} --operation {operation.capitalize()} {flag[kind]} "
        f"{hint or name})"
    )


def txn_acl_missing(s: Settings) -> str:
    """Exactly-once's transactional ids: `<prefix><group>-<input topic>-<partition>`."""
    ids = f"{s.transactional_id_prefix}{s.group_id}-{s.input_topic}-"
    return acl_missing(
        s, "WRITE", "transactional id", ids + "*", f"{ids} --resource-pattern-type prefixed"
    )


def _hosts(bootstrap: str) -> list[tuple[str, int]]:
    out = []
    for item in bootstrap.split(","):
        host, _, port = item.strip().rpartition(":")
        out.append((host.strip("[]") or "localhost", int(port or 9092)))
    return out


def tls_error(sec: KafkaSecurity, where: str, exc: ssl.SSLError) -> ConfigError:
    if isinstance(exc, ssl.SSLCertVerificationError):
        if exc.verify_code in NAME_MISMATCH:
            return ConfigError(
                f"the broker's TLS certificate at {where} is not for that name "
                f"({exc.verify_message}): list the brokers in --bootstrap-servers by a name "
                "their certificates carry"
            )
        ca = sec.ssl_cafile or "the system's CA bundle"
        return ConfigError(
            f"the broker's TLS certificate at {where} is not signed by a CA in {ca} "
            f"({exc.verify_message}): set --ssl-cafile to the CA that signed it"
        )
    if "CERTIFICATE" in str(exc.reason or ""):  # the broker's alert about ours
        return ConfigError(
            f"the broker at {where} refused the TLS handshake for want of a client "
            f"certificate it trusts ({exc.reason}): set --ssl-certfile and --ssl-keyfile to "
            "one its CA signed"
        )
    return ConfigError(
        f"TLS with the broker at {where} failed ({exc.reason or exc}): check "
        "--security-protocol, --ssl-cafile, --ssl-certfile and --ssl-keyfile"
    )


def sasl_error(sec: KafkaSecurity, where: str, exc: errors.KafkaError) -> ConfigError:
    if isinstance(exc, errors.UnsupportedSaslMechanismError):
        return ConfigError(
            f"the broker at {where} does not enable SASL mechanism {sec.sasl_mechanism}: "
            "set --sasl-mechanism to one it does"
        )
    return ConfigError(
        f"the broker at {where} refused the SASL login of {sec.sasl_username!r} "
        f"({sec.sasl_mechanism}): check --sasl-username and --sasl-password"
    )


def _speaks_tls(exc: BaseException) -> bool:
    """A plaintext client read a TLS alert record (0x15 0x03 …) as a reply's length."""
    return isinstance(exc, asyncio.IncompleteReadError) and (exc.expected or 0) >> 16 == 0x1503


def _refusal(sec: KafkaSecurity, where: str, exc: BaseException) -> ConfigError | None:
    """The ConfigError for a failed connection that waiting cannot mend, else None."""
    if isinstance(exc, ssl.SSLError):
        return tls_error(sec, where, exc)
    if isinstance(exc, errors.SaslAuthenticationFailed | errors.UnsupportedSaslMechanismError):
        return sasl_error(sec, where, exc)
    cause = exc.__cause__ or exc.__context__
    if isinstance(cause, ssl.SSLError):
        return tls_error(sec, where, cause)
    if cause is not None and _speaks_tls(cause):
        return ConfigError(
            f"the broker at {where} speaks TLS: set --security-protocol SSL or SASL_SSL "
            "(and --ssl-cafile)"
        )
    return None


def _not_about_a_certificate(exc: BaseException) -> bool:
    """The failure is not a verdict on a certificate (which only a TLS listener gives)."""
    cause = exc.__cause__ or exc.__context__
    return not isinstance(exc, ssl.SSLCertVerificationError) and not isinstance(
        cause, ssl.SSLCertVerificationError
    )


async def connect(
    bootstrap: str, sec: KafkaSecurity, kw: dict[str, Any], timeout_ms: int, client_id: str
) -> tuple[AIOKafkaConnection, str]:
    """A connection to the first bootstrap broker that answers, logged in as the clients
    will be. ConfigError when a broker refuses the TLS handshake or the login; a
    KafkaConnectionError when none answers. `kw`: the clients' `security_kwargs`."""
    last: BaseException | None = None
    for host, port in _hosts(bootstrap):
        where = f"{host}:{port}"
        conn = None
        try:
            conn = await create_conn(
                host,
                port,
                client_id=client_id,
                request_timeout_ms=timeout_ms,
                security_protocol=kw["security_protocol"],
                ssl_context=kw.get("ssl_context"),
                sasl_mechanism=kw.get("sasl_mechanism"),
                sasl_plain_username=kw.get("sasl_plain_username"),
                sasl_plain_password=kw.get("sasl_plain_password"),
            )
            # One request: under TLS 1.3 a broker's refusal of our certificate comes now.
            await conn.send(Metadata([]))
            return conn, where
        except (OSError, TimeoutError, errors.KafkaError) as exc:
            if conn is not None:
                conn.close()
            refused = _refusal(sec, where, exc)
            # A plaintext listener resets a TLS handshake as a restarting broker may:
            # asked in plaintext, it answers (a TLS listener or a dead port does not).
            tls = sec.security_protocol.endswith("SSL") and _not_about_a_certificate(exc)
            if tls and await asyncio.to_thread(speaks_kafka, host, port):
                refused = ConfigError(
                    f"the broker at {where} speaks plaintext Kafka, not TLS: set "
                    "--security-protocol PLAINTEXT or SASL_PLAINTEXT"
                )
            if refused is not None:
                raise refused from None
            last = exc
    raise errors.KafkaConnectionError(f"no broker of {bootstrap} answers: {last}")


async def check_login(bootstrap: str, sec: KafkaSecurity, kw: dict[str, Any]) -> None:
    """`publish` and `tail`: ConfigError unless a broker accepts this TLS and login."""
    conn, _ = await connect(bootstrap, sec, kw, 10000, "derender-tools")
    conn.close()


def _allowed(operations: int | None, op: int) -> bool:
    """Whether `op` is in a broker's authorized_operations (unknown: assumed so, and a
    refusal shows where it happens)."""
    return operations is None or operations == OPERATIONS_UNKNOWN or bool(operations >> op & 1)


def _check_topics(s: Settings, meta: Any) -> None:
    wants = {s.input_topic: READ, s.output_topic: WRITE, s.dlq_topic: WRITE}
    if s.control_topic:
        wants[s.control_topic] = WRITE
    with_rights = meta.API_VERSION >= 8
    answered = {t[1]: (t[0], t[-1] if with_rights else None) for t in meta.topics}
    missing = [t for t in wants if answered.get(t, (UNKNOWN_TOPIC, 0))[0] == UNKNOWN_TOPIC]
    if missing:
        raise ConfigError(
            f"topic(s) {', '.join(missing)} do not exist on {s.bootstrap_servers} (create "
            "them, or point --input-topic/--output-topic/--dlq-topic/--control-topic elsewhere)"
        )
    for topic, op in wants.items():
        code, allowed = answered[topic]
        if code == TOPIC_AUTHORIZATION_FAILED or (code == 0 and not _allowed(allowed, op)):
            raise ConfigError(acl_missing(s, OPERATION_NAMES[op], "topic", topic))
        if code:
            raise errors.for_code(code)(f"metadata of topic {topic!r}")


async def _check_group(s: Settings, conn: AIOKafkaConnection, kw: dict[str, Any]) -> None:
    found = await conn.send(FindCoordinatorRequest(s.group_id, 0))
    if found.error_code == GROUP_AUTHORIZATION_FAILED:
        raise ConfigError(acl_missing(s, "READ", "group", s.group_id))
    if found.error_code:
        raise errors.for_code(found.error_code)(f"coordinator of group {s.group_id!r}")
    coordinator = conn
    if (found.host, found.port) != (conn.host, conn.port):
        at = f"{found.host}:{found.port}"
        coordinator, _ = await connect(at, s, kw, s.request_timeout_ms, "derender-worker")
    try:
        described = await coordinator.send(DescribeGroup(s.group_id))
    except (NotImplementedError, errors.IncompatibleBrokerVersion):
        return  # (a broker without DescribeGroups v3: the join will tell)
    finally:
        if coordinator is not conn:
            coordinator.close()
    group = described.groups[0]
    code, allowed = group[0], group[-1]
    if code == GROUP_AUTHORIZATION_FAILED or (code == 0 and not _allowed(allowed, READ)):
        raise ConfigError(acl_missing(s, "READ", "group", s.group_id))
    if code:
        raise errors.for_code(code)(f"describing group {s.group_id!r}")


async def check_access(s: Settings, kw: dict[str, Any]) -> int | None:
    """Raise ConfigError when the worker, as configured, cannot log in or lacks a right
    (the module docstring lists which); a KafkaError when no broker answers. `kw` are
    the clients' `security_kwargs`. Returns the written topics' `message_limit`."""
    client_id = f"derender-worker-{s.group_id}"
    conn, _ = await connect(s.bootstrap_servers, s, kw, s.request_timeout_ms, client_id)
    try:
        written = [s.output_topic, s.dlq_topic] + ([s.control_topic] if s.control_topic else [])
        meta = await conn.send(Metadata([s.input_topic, *written]))
        _check_topics(s, meta)
        await _check_group(s, conn, kw)
        return await message_limit(conn, written)
    finally:
        conn.close()


_TOPIC = 2  # (DescribeConfigs' resource type for a topic)
MAX_MESSAGE_BYTES = "max.message.bytes"


async def message_limit(conn: AIOKafkaConnection, topics: list[str]) -> int | None:
    """The smallest `max.message.bytes` of `topics` (the largest record batch the broker
    accepts there); None when the broker does not tell (no DESCRIBE_CONFIGS right, an
    old broker): the batches stay as configured."""
    try:
        answer = await conn.send(
            DescribeConfigsRequest([(_TOPIC, t, [MAX_MESSAGE_BYTES]) for t in topics])
        )
    except errors.KafkaError:
        return None
    limits = []
    for code, _message, _kind, _name, entries, *_ in answer.resources:
        if code:
            return None
        limits += [int(e[1]) for e in entries if e[0] == MAX_MESSAGE_BYTES and e[1]]
    return min(limits, default=None)


def refusal(s: Settings, exc: BaseException) -> ConfigError | None:
    """What `run` exits 2 with: a ConfigError (a right refused mid-run named by its cause,
    as `access_error` names it), a Kafka error that is a refused right, or None (another
    error, which is not a configuration's)."""
    if isinstance(exc, ConfigError):
        return (access_error(s, exc.__cause__) if exc.__cause__ else None) or exc
    return access_error(s, exc)


def access_error(s: Settings, exc: BaseException) -> ConfigError | None:
    """A right refused while running (an ACL removed, a transactional id not allowed),
    as the line that names it; None for any other error."""
    if isinstance(exc, errors.TopicAuthorizationFailedError):
        topics = str(exc.args[0]) if exc.args else ""
        if s.input_topic in topics:
            return ConfigError(acl_missing(s, "READ", "topic", s.input_topic))
        outputs = [t for t in (s.output_topic, s.dlq_topic, s.control_topic) if t]
        named = [t for t in outputs if t in topics]
        return ConfigError(acl_missing(s, "WRITE", "topic", (named or outputs)[0]))
    if isinstance(exc, errors.GroupAuthorizationFailedError):
        return ConfigError(acl_missing(s, "READ", "group", s.group_id))
    if isinstance(exc, errors.TransactionalIdAuthorizationFailed):
        return ConfigError(txn_acl_missing(s))
    return None
