"""The secured Apache Kafka of the security tests: one per test session, shared.

`secured_kafka` (session) starts `secured_kafka.SecuredKafka` with certificates made by
`certs.make_pki` in a temporary folder: SASL_SSL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512),
mutual TLS, two listeners with a wrong certificate (UNTRUSTED: signed by another CA;
WRONGHOST: for another name), one enabling SCRAM-SHA-512 only (SCRAMONLY), ACLs
enforced. Users: `admin` (a super user) and `worker`, whose client certificate
(CN=worker) maps to the same principal, User:worker.

Tests share the broker and the principal; each uses its own topics and group (`fresh`),
so the ACLs one test grants or revokes on its own resources never touch another's.

The fixture is defined here and imported by each test module; a module-level cache keeps
it one broker per session (pytest would otherwise start one per importing module).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.conn import create_conn
from aiokafka.helpers import create_ssl_context
from aiokafka.protocol.admin import CreateAclsRequest_v1, DeleteAclsRequest_v1
from aiokafka.protocol.api import Request

from tests.security.broker.secured_kafka import KeyPair, SecuredKafka
from tests.security.certs import Pki, make_pki
from worker.adapters.local import kafka_server

ADMIN = "admin"
WORKER = "worker"
# Secrets are random per session: a test that greps for them cannot meet them by chance.
ADMIN_PASSWORD = f"adm-{uuid.uuid4().hex}"
WORKER_PASSWORD = f"wkr-{uuid.uuid4().hex}"
PRINCIPAL = f"User:{WORKER}"

# Kafka's ACL codes (org.apache.kafka.common.acl / resource).
TOPIC, GROUP, TRANSACTIONAL_ID = 2, 3, 5
LITERAL, PREFIXED = 3, 4
READ, WRITE, DESCRIBE = 3, 4, 8
ALLOW = 3

Acl = tuple[int, str, int, int]  # (resource type, name, pattern type, operation)


@dataclass
class Topics:
    input: str
    output: str
    dlq: str
    group: str

    def worker_acls(self) -> list[Acl]:
        """What `run` needs, and no more (at-least-once)."""
        return [
            (TOPIC, self.input, LITERAL, READ),
            (TOPIC, self.output, LITERAL, WRITE),
            (TOPIC, self.dlq, LITERAL, WRITE),
            (GROUP, self.group, LITERAL, READ),
        ]

    def flags(self) -> list[str]:
        return [
            "--input-topic", self.input, "--output-topic", self.output,
            "--dlq-topic", self.dlq, "--group-id", self.group,
        ]  # fmt: skip


class _CreateAcls(Request[CreateAclsRequest_v1]):  # type: ignore[misc]
    API_KEY = 30

    def __init__(self, entries: list[Any]) -> None:
        self.entries = entries

    def build(self, request_struct_class: Any) -> Any:
        return request_struct_class(self.entries)


class _DeleteAcls(Request[DeleteAclsRequest_v1]):  # type: ignore[misc]
    API_KEY = 31

    def __init__(self, entries: list[Any]) -> None:
        self.entries = entries

    def build(self, request_struct_class: Any) -> Any:
        return request_struct_class(self.entries)


@dataclass
class SecuredBroker:
    kafka: SecuredKafka
    pki: Pki
    dir: Path

    @property
    def sasl(self) -> str:
        return self.kafka.sasl_bootstrap

    @property
    def mtls(self) -> str:
        return self.kafka.mtls_bootstrap

    def bad(self, listener: str) -> str:
        return f"{self.kafka.host}:{self.kafka.port_of(listener)}"

    def sasl_flags(self, mechanism: str = "SCRAM-SHA-512", user: str = WORKER) -> list[str]:
        """A worker's or a tool's flags for SASL_SSL (the password goes by variable)."""
        return [
            "--security-protocol", "SASL_SSL", "--sasl-mechanism", mechanism,
            "--sasl-username", user, "--ssl-cafile", str(self.pki.ca),
        ]  # fmt: skip

    def mtls_flags(self) -> list[str]:
        return [
            "--security-protocol", "SSL", "--ssl-cafile", str(self.pki.ca),
            "--ssl-certfile", str(self.pki.client.cert), "--ssl-keyfile", str(self.pki.client.key),
        ]  # fmt: skip

    def admin_kwargs(self) -> dict[str, Any]:
        """aiokafka options of the test's admin: the super user, over SASL_SSL."""
        return {
            "security_protocol": "SASL_SSL",
            "ssl_context": create_ssl_context(cafile=str(self.pki.ca)),
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": ADMIN,
            "sasl_plain_password": ADMIN_PASSWORD,
        }

    async def _send(self, request: Any) -> Any:
        # Over the internal PLAINTEXT listener (User:ANONYMOUS, a super user): a TLS
        # connection's close would still be under way when the test's event loop ends.
        conn = await create_conn(self.kafka.host, self.kafka.port, request_timeout_ms=10000)
        try:
            return await conn.send(request)
        finally:
            conn.close()

    async def grant(self, acls: list[Acl], principal: str = PRINCIPAL) -> None:
        creations = [(rt, name, pt, principal, "*", op, ALLOW) for rt, name, pt, op in acls]
        reply = await self._send(_CreateAcls(creations))
        assert all(code == 0 for code, _ in reply.creation_responses), reply

    async def revoke(self, acls: list[Acl], principal: str = PRINCIPAL) -> None:
        filters = [(rt, name, pt, principal, "*", op, ALLOW) for rt, name, pt, op in acls]
        reply = await self._send(_DeleteAcls(filters))
        assert all(r[0] == 0 and r[2] for r in reply.filter_responses), reply

    async def publish(self, topic: str, records: list[dict[str, Any]]) -> None:
        """Records keyed by request id, as the test's admin."""
        producer = AIOKafkaProducer(bootstrap_servers=self.sasl, **self.admin_kwargs())
        await producer.start()
        try:
            for r in records:
                await producer.send_and_wait(
                    topic, json.dumps(r).encode(), key=r["request_id"].encode()
                )
        finally:
            await producer.stop()

    async def fresh(self, partitions: int = 2) -> Topics:
        """New topics and a group name, unique to the caller; no ACL on them yet."""
        tag = uuid.uuid4().hex[:8]
        t = Topics(f"in-{tag}", f"out-{tag}", f"dlq-{tag}", f"g-{tag}")
        admin = AIOKafkaAdminClient(bootstrap_servers=self.sasl, **self.admin_kwargs())
        await admin.start()
        try:
            await admin.create_topics(
                [NewTopic(name, partitions, 1) for name in (t.input, t.output, t.dlq)]
            )
        finally:
            await admin.close()
        return t


_started: list[SecuredBroker] = []


@pytest.fixture(scope="session")
def secured_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    if not kafka_server.starts_from_cache() and kafka_server.missing_tools():
        pytest.skip(f"Apache Kafka needs {', '.join(kafka_server.missing_tools())}")
    if _started:
        yield _started[0]
        return
    base = tmp_path_factory.mktemp("secured-kafka")
    pki = make_pki(base / "pki")
    kafka = SecuredKafka(
        ca=pki.ca,
        server=KeyPair(pki.server.cert, pki.server.key),
        users={ADMIN: ADMIN_PASSWORD, WORKER: WORKER_PASSWORD},
        super_users=(ADMIN,),
        listeners={
            "UNTRUSTED": KeyPair(pki.untrusted_server.cert, pki.untrusted_server.key),
            "WRONGHOST": KeyPair(pki.wrong_host_server.cert, pki.wrong_host_server.key),
            "SCRAMONLY": KeyPair(pki.server.cert, pki.server.key),
        },
        mechanisms={"SCRAMONLY": ["SCRAM-SHA-512"]},
    )
    kafka.start()
    broker = SecuredBroker(kafka, pki, base)
    _started.append(broker)
    try:
        yield broker
    finally:
        _started.clear()
        kafka.close()


def run(coro: Any) -> Any:
    """Run a coroutine from a sync test."""
    return asyncio.run(coro)
