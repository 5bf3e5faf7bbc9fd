"""librdkafka's own log lines, through Python's logging, without the flood.

While a broker is down every client of the worker (the consumer and each transactional
producer) logs a failed connect at ERROR every few tens of milliseconds: thousands of
lines that say one thing. `LibrdkafkaLog` logs a line the first time it is seen and then
at most once per `REPEAT_EVERY_S`, with how often it came meanwhile; a line is the same
whichever client logged it and however long librdkafka's attempt took. A line at INFO or
below about a broker (a connection that was up closed) is a change of state: the
broker's other lines are logged again at their next occurrence. A broker's connection
failures are logged at WARNING, not ERROR: librdkafka retries them itself, and the
worker reports an outage that lasts (`--outage-limit-s`).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable

# How often a repeated line is logged again (with its count).
REPEAT_EVERY_S = 30.0
# At most this many distinct lines are remembered (the oldest forgotten first).
REMEMBERED = 256
# librdkafka's facility of a connection that failed or closed.
CONNECTION = "FAIL"
# What differs between two reports of the same failure.
_VARYING = re.compile(r" \(after \d+ms in state \w+(, \d+ identical error\(s\) suppressed)?\)")


class LibrdkafkaLog:
    """The `logger` of librdkafka's clients: confluent-kafka calls `log(level, "%s [%s]
    %s", facility, client, message)`, on whichever thread polls the client."""

    def __init__(self, log: logging.Logger, clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = log
        self.clock = clock
        # (facility, subject, line) → (when last logged, times seen since)
        self._seen: dict[tuple[str, str, str], tuple[float, int]] = {}
        self._lock = threading.Lock()

    def log(self, level: int, fmt: str, *args: object) -> None:
        facility, client, message = (str(a) for a in (*args, "", "", "")[:3])
        text = _VARYING.sub("", message)
        subject = text.split(": ", 1)[0]  # (librdkafka's lines about a broker start with it)
        key = (facility, subject, text)
        now = self.clock()
        with self._lock:
            last = self._seen.pop(key, None)
            if last is not None and now - last[0] < REPEAT_EVERY_S:
                self._seen[key] = (last[0], last[1] + 1)
                return
            if level <= logging.INFO:  # (a change of state: its failures are news again)
                for other in [k for k in self._seen if k[:2] == key[:2]]:
                    del self._seen[other]
            self._seen[key] = (now, 0)
            while len(self._seen) > REMEMBERED:
                del self._seen[next(iter(self._seen))]
        if facility == CONNECTION and level > logging.WARNING:
            level = logging.WARNING
        more = f" ({last[1]} more in the last {now - last[0]:.0f}s)" if last and last[1] else ""
        self.logger.log(level, "%s [%s] %s%s", facility, client, text, more)
