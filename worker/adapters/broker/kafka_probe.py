"""Just enough of the Kafka protocol to ask a broker for metadata and for a group
coordinator, with the standard library only:
- `kafka_metadata` tells whether a broker on host:port answers, which cluster it belongs
  to and which brokers it lists. `kafka_server.ApacheKafka` waits on it at start
  (listening is not the same as serving).
- `speaks_kafka` tells whether something answers a plaintext ApiVersions request on
  host:port: a worker set for TLS that cannot connect asks it, to tell a plaintext
  listener (a misconfiguration: exit 2) from a broker that is down (an outage).
- `group_coordinator_error` asks which broker coordinates a consumer group. On a fresh
  cluster the first such question creates the `__consumer_offsets` topic, and until it is
  loaded the answer is COORDINATOR_NOT_AVAILABLE: `ApacheKafka` asks at start, so the
  first consumer group (a worker's) joins at once instead of retrying and logging an
  error.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass


@dataclass(frozen=True)
class BrokerMetadata:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[tuple[int, str, int], ...]  # (node id, host, port)


# Metadata v4 with request header v1: the oldest version Kafka 4.x still serves (KIP-896
# removed v0-v3), and the newest before the "flexible" encoding, so fixed-width fields
# suffice. tansu answers it too.
METADATA_API_KEY = 3
METADATA_VERSION = 4


def kafka_metadata(host: str, port: int, timeout_s: float = 1.0) -> BrokerMetadata | None:
    """The broker list and cluster id a Kafka broker on host:port reports, or None when
    nothing answers a Metadata request there (yet)."""
    client_id = b"derender-probe"
    correlation_id = 1
    request = (
        struct.pack(">hhih", METADATA_API_KEY, METADATA_VERSION, correlation_id, len(client_id))
        + client_id
        # topics: an empty array (none; null would list every topic), and
        # allow_auto_topic_creation: false.
        + struct.pack(">i?", 0, False)
    )
    try:
        return _parse_metadata(_exchange(host, port, request, timeout_s), correlation_id)
    except (OSError, struct.error, ValueError, UnicodeDecodeError):
        return None


# ApiVersions v0: what every broker answers before anything else, a SASL listener included
# (it is allowed before the handshake), and in the v0 layout even when it would want a
# newer version.
API_VERSIONS_API_KEY = 18


def speaks_kafka(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """Whether a plaintext Kafka listener answers on host:port (a TLS one does not: it
    reads the request as a malformed handshake and closes)."""
    client_id = b"derender-probe"
    correlation_id = 3
    request = (
        struct.pack(">hhih", API_VERSIONS_API_KEY, 0, correlation_id, len(client_id)) + client_id
    )
    try:
        reply = _exchange(host, port, request, timeout_s)
        got_id, _code, count = struct.unpack_from(">ihi", reply)
    except (OSError, struct.error, ValueError):
        return False
    return bool(got_id == correlation_id and count >= 0)


# FindCoordinator v1 (v0 is gone in 4.x; v3 is flexible): a key and its type, 0 = group.
FIND_COORDINATOR_API_KEY = 10
FIND_COORDINATOR_VERSION = 1
GROUP_KEY_TYPE = 0


def group_coordinator_error(
    host: str, port: int, group: str = "derender-probe", timeout_s: float = 1.0
) -> int | None:
    """The error code of a FindCoordinator request for `group` (0: there is one), or None
    when nothing answers."""
    client_id = b"derender-probe"
    key = group.encode()
    correlation_id = 2
    request = (
        struct.pack(
            ">hhih",
            FIND_COORDINATOR_API_KEY,
            FIND_COORDINATOR_VERSION,
            correlation_id,
            len(client_id),
        )
        + client_id
        + struct.pack(">h", len(key))
        + key
        + struct.pack(">b", GROUP_KEY_TYPE)
    )
    try:
        reply = _exchange(host, port, request, timeout_s)
        # correlation_id, throttle_time_ms, error_code (then the coordinator's address)
        got_id, _, code = struct.unpack_from(">iih", reply)
    except (OSError, struct.error, ValueError):
        return None
    return int(code) if got_id == correlation_id else None


def _exchange(host: str, port: int, request: bytes, timeout_s: float) -> bytes:
    """Send one size-prefixed request, return the reply without its size."""
    with socket.create_connection((host, port), timeout=timeout_s) as s:
        s.sendall(struct.pack(">i", len(request)) + request)
        (size,) = struct.unpack(">i", _recv_exactly(s, 4))
        return _recv_exactly(s, size)


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise ValueError("connection closed mid-reply")
        data += chunk
    return data


def _parse_metadata(reply: bytes, correlation_id: int) -> BrokerMetadata:
    pos = 0

    def take(fmt: str) -> tuple[int, ...]:
        nonlocal pos
        values = struct.unpack_from(fmt, reply, pos)
        pos += struct.calcsize(fmt)
        return tuple(int(v) for v in values)

    def string() -> str | None:
        nonlocal pos
        (length,) = take(">h")
        if length < 0:
            return None
        text = reply[pos : pos + length].decode()
        pos += length
        return text

    (got_id,) = take(">i")
    if got_id != correlation_id:
        raise ValueError(f"correlation id {got_id}, expected {correlation_id}")
    take(">i")  # throttle_time_ms
    (count,) = take(">i")
    brokers = []
    for _ in range(count):
        (node_id,) = take(">i")
        broker_host = string() or ""
        (broker_port,) = take(">i")
        string()  # rack
        brokers.append((node_id, broker_host, broker_port))
    cluster_id = string()
    (controller_id,) = take(">i")
    return BrokerMetadata(cluster_id, controller_id, tuple(brokers))
