"""KIP-848's ConsumerGroupDescribe (API 69, version 0) over aiokafka: the coordinator's
view of one member, for `group_watch`.

Not confluent-kafka's AdminClient: a describe whose coordinator lookup timed out while
the broker stalled aborted the worker inside librdkafka (an assertion in its admin
coordinator request), and the look is made exactly when the broker is slow. aiokafka
has no request for this API, so it is declared here from Kafka's message schema
(clients/src/main/resources/common/message/ConsumerGroupDescribe*.json).
"""

from __future__ import annotations

from io import BytesIO
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import for_code
from aiokafka.protocol.abstract import AbstractType
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import (
    Boolean,
    CompactArray,
    CompactString,
    Int16,
    Int32,
    Schema,
    TaggedFields,
)

from worker.adapters.broker.confluent.group_watch import GroupView


# (The aiokafka protocol classes are untyped: hence the ignores below.)
class Uuid(AbstractType[bytes]):  # type: ignore[misc]
    """Kafka's uuid: 16 bytes."""

    @classmethod
    def encode(cls, value: bytes) -> bytes:
        return value

    @classmethod
    def decode(cls, data: BytesIO) -> bytes:
        value = data.read(16)
        if len(value) != 16:
            raise ValueError("Buffer underrun decoding a uuid")
        return value


_STRING = CompactString("utf-8")
_ASSIGNMENT = Schema(
    (
        "topic_partitions",
        CompactArray(
            ("topic_id", Uuid),
            ("topic_name", _STRING),
            ("partitions", CompactArray(Int32)),
            ("tags", TaggedFields),
        ),
    ),
    ("tags", TaggedFields),
)


class ConsumerGroupDescribeResponse_v0(Response):  # type: ignore[misc]
    API_KEY = 69
    API_VERSION = 0
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "groups",
            CompactArray(
                ("error_code", Int16),
                ("error_message", _STRING),
                ("group_id", _STRING),
                ("group_state", _STRING),
                ("group_epoch", Int32),
                ("assignment_epoch", Int32),
                ("assignor_name", _STRING),
                (
                    "members",
                    CompactArray(
                        ("member_id", _STRING),
                        ("instance_id", _STRING),
                        ("rack_id", _STRING),
                        ("member_epoch", Int32),
                        ("client_id", _STRING),
                        ("client_host", _STRING),
                        ("subscribed_topic_names", CompactArray(_STRING)),
                        ("subscribed_topic_regex", _STRING),
                        ("assignment", _ASSIGNMENT),
                        ("target_assignment", _ASSIGNMENT),
                        ("tags", TaggedFields),
                    ),
                ),
                ("authorized_operations", Int32),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


class ConsumerGroupDescribeRequest_v0(RequestStruct):  # type: ignore[misc]
    FLEXIBLE_VERSION = True
    API_KEY = 69
    API_VERSION = 0
    RESPONSE_TYPE = ConsumerGroupDescribeResponse_v0
    SCHEMA = Schema(
        ("group_ids", CompactArray(_STRING)),
        ("include_authorized_operations", Boolean),
        ("tags", TaggedFields),
    )


class ConsumerGroupDescribeRequest(Request[ConsumerGroupDescribeRequest_v0]):  # type: ignore[misc]
    API_KEY = 69

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id

    def build(
        self, request_struct_class: type[ConsumerGroupDescribeRequest_v0]
    ) -> ConsumerGroupDescribeRequest_v0:
        return request_struct_class([self.group_id], False, {})


def _partitions(assignment: Any, topic: str) -> frozenset[int]:
    topics, _tags = assignment
    return frozenset(p for _id, name, parts, _t in topics if name == topic for p in parts)


def view_of(response: Any, member_id: str, topic: str) -> GroupView | None:
    """`member_id`'s target for `topic` and what the others hold; None when the
    coordinator does not know the member. An error of the group raises it."""
    (error, message, *_), members = response.groups[0][:7], response.groups[0][7]
    if error:
        raise for_code(error)(message or "ConsumerGroupDescribe")
    target: frozenset[int] | None = None
    others: set[int] = set()
    for m in members:
        if m[0] == member_id:
            target = _partitions(m[9], topic)
        else:
            others |= _partitions(m[8], topic)
    return None if target is None else GroupView(target, frozenset(others))


async def describe_member(
    admin: AIOKafkaAdminClient, group: str, member_id: str, topic: str
) -> GroupView | None:
    """Ask the group's coordinator (each call looks it up: it moves with the broker)."""
    node = await admin.find_coordinator(group)
    # (aiokafka's admin sends a request it does not declare through this one method.)
    response = await admin._send_request(ConsumerGroupDescribeRequest(group), node)
    return view_of(response, member_id, topic)
