"""The engine's end of the control topic: which requests the worker asked to stop.

`ControlReader` follows every partition of the control topic from its end (no consumer
group: every engine-side process sees every record, and only records from now on matter)
and keeps the latest `ControlRecord` per request id. `Publisher(control_topic=…)` uses it
to hold back the chunks of a stopped request; an engine adapter would call its own abort
path instead (docs/integrate/control.md)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from types import TracebackType
from typing import Any

import msgspec
from aiokafka import AIOKafkaConsumer

from worker.wire.control import ControlRecord

log = logging.getLogger("derender.control")

# Request ids remembered (oldest forgotten first): a stopped request's chunks stop soon
# after its control record, so this only needs to outlast the requests in flight.
REMEMBER = 100_000
POLL_MS = 100
CLOSE_TIMEOUT_S = 5.0
START_TIMEOUT_S = 30.0

_decode = msgspec.json.Decoder(ControlRecord).decode


class ControlReader:
    def __init__(self, bootstrap_servers: str, topic: str, **client: Any) -> None:
        self.topic = topic
        # No group: every partition, from its end (aiokafka assigns them all itself).
        self._consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap_servers,
            group_id=None,
            auto_offset_reset="latest",
            enable_auto_commit=False,
            **client,
        )
        self.stopped: OrderedDict[str, ControlRecord] = OrderedDict()
        self.received = 0
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> ControlReader:
        await self._consumer.start()
        try:
            async with asyncio.timeout(START_TIMEOUT_S):
                while not self._consumer.assignment():  # (the topic's metadata, then all)
                    if self.topic not in await self._consumer.topics():
                        raise ValueError(f"control topic {self.topic!r} does not exist")
                    await asyncio.sleep(0.05)
                # Resolve "latest" now: a record written from here on is seen.
                for tp in self._consumer.assignment():
                    await self._consumer.position(tp)
        except BaseException:
            await self._consumer.stop()
            raise
        self._task = asyncio.create_task(self._follow())
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._consumer.stop(), CLOSE_TIMEOUT_S)

    def get(self, request_id: str) -> ControlRecord | None:
        return self.stopped.get(request_id)

    async def _follow(self) -> None:
        while True:
            batches = await self._consumer.getmany(timeout_ms=POLL_MS)
            for records in batches.values():
                for r in records:
                    try:
                        rec = _decode(r.value)
                    except (msgspec.DecodeError, TypeError) as exc:
                        log.warning("a control record that does not decode, ignored: %s", exc)
                        continue
                    self.received += 1
                    self.stopped[rec.request_id] = rec
                    self.stopped.move_to_end(rec.request_id)
                    if len(self.stopped) > REMEMBER:
                        self.stopped.popitem(last=False)
