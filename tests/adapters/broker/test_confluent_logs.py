"""librdkafka's log lines through `LibrdkafkaLog`: a broker that refuses connections is
reported once per interval at WARNING, naming the broker and the error, by real
librdkafka clients as by lines fed in."""

from __future__ import annotations

import logging
import socket
import time

import confluent_kafka
import pytest

from worker.adapters.broker.confluent.logs import REPEAT_EVERY_S, LibrdkafkaLog

NAME = "derender.test.librdkafka"
REFUSED = "127.0.0.1:9/bootstrap: Connect to ipv4#127.0.0.1:9 failed: Connection refused"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == NAME]


def test_a_repeated_connect_failure_is_logged_once_per_interval_at_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, NAME)
    clock = Clock()
    log = LibrdkafkaLog(logging.getLogger(NAME), clock)
    for i in range(200):  # (every client, every 50 ms, each attempt a different duration)
        clock.now = i * 0.05
        client = f"w#producer-{i % 5}"
        log.log(
            logging.ERROR, "%s [%s] %s", "FAIL", client, f"{REFUSED} (after {i}ms in state CONNECT)"
        )
    assert lines(caplog) == [(logging.WARNING, f"FAIL [w#producer-0] {REFUSED}")]
    clock.now = REPEAT_EVERY_S
    log.log(
        logging.ERROR,
        "%s [%s] %s",
        "FAIL",
        "w#consumer-1",
        f"{REFUSED} (after 0ms in state CONNECT)",
    )
    assert lines(caplog)[-1] == (
        logging.WARNING,
        f"FAIL [w#consumer-1] {REFUSED} (199 more in the last {REPEAT_EVERY_S:.0f}s)",
    )
    # Connected again, then down: a change of state, so the failure is news again.
    closed = "127.0.0.1:9/bootstrap: Disconnected: connection closed by peer"
    log.log(logging.INFO, "%s [%s] %s", "FAIL", "w#consumer-1", f"{closed} (after 9ms in state UP)")
    log.log(logging.ERROR, "%s [%s] %s", "FAIL", "w#consumer-1", REFUSED)
    assert lines(caplog)[-2:] == [
        (logging.INFO, f"FAIL [w#consumer-1] {closed}"),
        (logging.WARNING, f"FAIL [w#consumer-1] {REFUSED}"),
    ]
    # Another broker's failure is its own line; other facilities keep their level.
    other = REFUSED.replace(":9", ":10")
    log.log(logging.ERROR, "%s [%s] %s", "FAIL", "w#consumer-1", other)
    log.log(logging.ERROR, "%s [%s] %s", "TXNERR", "w#producer-2", "fatal")
    assert lines(caplog)[-2:] == [
        (logging.WARNING, f"FAIL [w#consumer-1] {other}"),
        (logging.ERROR, "TXNERR [w#producer-2] fatal"),
    ]


def refusals_logged(logger: object, clients: int, seconds: float) -> int:
    """How many lines real librdkafka producers on a port nobody listens on log."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "logger": logger,
        "reconnect.backoff.ms": 10,
        "reconnect.backoff.max.ms": 20,
    }
    producers = [confluent_kafka.Producer(conf) for _ in range(clients)]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for p in producers:
            p.poll(0.05)
    return len(producers)


def test_real_clients_on_a_closed_port_log_a_handful_of_lines(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, NAME)
    # The oracle: what librdkafka logs of it unlimited (its own suppression included).
    refusals_logged(logging.getLogger(NAME), 5, 3.0)
    raw = lines(caplog)
    caplog.clear()
    refusals_logged(LibrdkafkaLog(logging.getLogger(NAME)), 5, 3.0)
    got = lines(caplog)
    assert len(raw) >= 10 and any(level == logging.ERROR for level, _ in raw), raw
    assert any("Connection refused" in text and "127.0.0.1:" in text for _, text in got), got
    assert all(level <= logging.WARNING for level, _ in got), got
    assert len(got) <= 3, got
