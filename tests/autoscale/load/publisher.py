"""The engine side: publishing the workload, paced or as a burst."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaProducer

from tests.autoscale.config import TICK_S
from tests.autoscale.load.workload import Rec


class Publisher:
    """Publishes on its own thread and event loop: phases of records, paced or at once."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.phase = "start"
        self.marks: list[tuple[float, str]] = []
        self.sent = 0
        self.error: BaseException | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._producer: AIOKafkaProducer | None = None
        self._call(self._start())

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    async def _start(self) -> None:
        self._producer = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap,
            acks="all",
            linger_ms=5,
            max_batch_size=256 * 1024,
        )
        await self._producer.start()

    def mark(self, phase: str) -> None:
        self.phase = phase
        self.marks.append((time.time(), phase))

    def paced(self, recs: list[Rec], rate: float, keep_going: Callable[[], bool]) -> None:
        """`rate` records/s from `recs`; stops when they run out or keep_going() is false."""
        self._call(self._paced(recs, rate, keep_going))

    async def _paced(self, recs: list[Rec], rate: float, keep_going: Callable[[], bool]) -> None:
        assert self._producer is not None
        futures = []
        start = time.perf_counter()
        i = 0
        started: set[str] = set()
        stopped = False
        while i < len(recs):
            if not stopped and not keep_going():
                # No new request from here: the open ones are finished at the same rate.
                stopped = True
                rest = [r for r in recs[i:] if r.rid in started]
                del recs[i:]
                recs.extend(rest)
                continue
            due = min(len(recs), int((time.perf_counter() - start) * rate) + 1)
            while i < due:
                started.add(recs[i].rid)
                futures.append(await self._send(recs[i]))
                i += 1
            await asyncio.sleep(TICK_S)
        await asyncio.gather(*futures)

    def burst(self, recs: list[Rec]) -> float:
        """Every record as fast as the producer takes them; returns the seconds it took."""
        return float(self._call(self._burst(recs)))

    async def _burst(self, recs: list[Rec]) -> float:
        start = time.perf_counter()
        futures = []
        for n, r in enumerate(recs):
            futures.append(await self._send(r))
            if n % 2000 == 1999:
                await asyncio.gather(*futures)
                futures = []
        await asyncio.gather(*futures)
        return time.perf_counter() - start

    async def _send(self, r: Rec) -> Any:
        assert self._producer is not None
        r.sent = time.time()
        self.sent += 1
        return await self._producer.send(self.topic, r.value, key=r.rid.encode())

    def close(self) -> None:
        if self._producer is not None:
            self._call(self._producer.stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
