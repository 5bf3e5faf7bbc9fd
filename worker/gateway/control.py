"""The gateway's end of the control topic (`--control-topic`): the worker says a request's
answer is over (a stop string fired, the request failed) while its engine still generates.

Every replica follows every partition of the control topic from its end, like the engine
side's `ControlReader` (a control record is small and comes once per early-stopped
request). A record whose key is not a request this replica is generating is dropped on
the key alone, before decoding; the others go to the exchange that generates the request,
which stops its engine request and still sends the `end` (docs/integrate/control.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import msgspec

from worker.tools.control_reader import POLL_MS, ControlReader
from worker.wire.control import ControlRecord

log = logging.getLogger("derender.gateway")

_decode = msgspec.json.Decoder(ControlRecord).decode

Halt = Callable[[ControlRecord], None]


class GatewayControl(ControlReader):
    """`watch(request_id, halt)` while a request is generated; `halt(record)` is called (on
    the event loop, at most once) when its control record arrives."""

    def __init__(self, bootstrap_servers: str, topic: str, **client: Any) -> None:
        super().__init__(bootstrap_servers, topic, **client)
        self._generating: dict[bytes, Halt] = {}
        self.ignored = 0  # records for requests this replica is not generating

    def watch(self, request_id: str, halt: Halt) -> None:
        self._generating[request_id.encode()] = halt

    def unwatch(self, request_id: str) -> None:
        self._generating.pop(request_id.encode(), None)

    async def _follow(self) -> None:
        while True:
            batches = await self._consumer.getmany(timeout_ms=POLL_MS)
            for records in batches.values():
                for r in records:
                    halt = self._generating.pop(r.key, None) if r.key else None
                    if halt is None:
                        self.ignored += 1
                        continue
                    try:
                        rec = _decode(r.value)
                    except (msgspec.DecodeError, TypeError) as exc:
                        log.warning("a control record that does not decode, ignored: %s", exc)
                        continue
                    self.received += 1
                    halt(rec)
