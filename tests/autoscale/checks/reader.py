"""The read_committed reader of the output topic."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer

from worker.constants import DONE, H_PART, H_REQUEST_ID, H_SEQ


@dataclass(slots=True)
class Out:
    at: float
    rid: str
    seq: str
    part: str
    value: bytes
    partition: int
    offset: int


class Reader:
    """read_committed consumer of a topic from its start, on its own thread."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.outs: list[Out] = []
        self.dones: set[str] = set()
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        if not self._ready.wait(60):
            raise SystemExit(f"the reader of {topic} did not start")

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as e:  # reported by the checks
            self.error = e
            self._ready.set()

    async def _main(self) -> None:
        consumer = AIOKafkaConsumer(
            self.topic,
            bootstrap_servers=self.bootstrap,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            group_id=None,
            isolation_level="read_committed",
            fetch_max_wait_ms=5,
            max_partition_fetch_bytes=4 * 1024 * 1024,
        )
        await consumer.start()
        try:
            self._ready.set()
            while not self._stop.is_set():
                batch = await consumer.getmany(timeout_ms=100, max_records=5000)
                now = time.time()
                for tp, msgs in batch.items():
                    for m in msgs:
                        h = {k: v.decode() for k, v in m.headers}
                        o = Out(
                            now,
                            h.get(H_REQUEST_ID, ""),
                            h.get(H_SEQ, ""),
                            h.get(H_PART, ""),
                            m.value or b"",
                            tp.partition,
                            m.offset,
                        )
                        self.outs.append(o)
                        if o.value == DONE:
                            self.dones.add(o.rid)
        finally:
            await consumer.stop()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(30)
