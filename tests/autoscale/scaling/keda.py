"""KEDA's Kafka scaler (the kedalag program): polling a group, and its self-check on a
known group."""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from worker.adapters.local.embedded import create_topics


@dataclass
class Poll:
    at: float
    value: float
    active: bool
    error: str
    replicas: int = 0
    worker_lag: dict[int, float] = field(default_factory=dict)  # slot → derender_group_lag_sum


class Keda:
    """The kedalag program polling the group; each JSON line it prints is one Poll."""

    def __init__(self, binary: Path, meta: dict[str, str], interval_s: float, log: Path) -> None:
        argv = [str(binary), "-type", "kafka", "-interval-ms", str(round(interval_s * 1000))]
        for k, v in meta.items():
            argv += ["-meta", f"{k}={v}"]
        self.log = log
        self._err = open(log.with_suffix(".stderr"), "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self._err)
        self.polls: list[Poll] = []
        self.on_poll: Callable[[Poll], None] | None = None
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with open(self.log, "ab") as raw:
            for line in self.proc.stdout:
                raw.write(line)
                d = json.loads(line)
                p = Poll(time.time(), float(d["value"]), bool(d["active"]), d.get("error", ""))
                if self.on_poll is not None:
                    self.on_poll(p)
                self.polls.append(p)

    def latest(self) -> Poll | None:
        return self.polls[-1] if self.polls else None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._thread.join(10)
        self._err.close()


def keda_once(binary: Path, meta: dict[str, str]) -> dict[str, Any]:
    argv = [str(binary), "-once"]
    for k, v in meta.items():
        argv += ["-meta", f"{k}={v}"]
    out = subprocess.run(argv, capture_output=True, timeout=60, check=True)
    return dict(json.loads(out.stdout.splitlines()[-1]))


async def keda_selfcheck(bootstrap: str, binary: Path) -> list[tuple[str, float, float]]:
    """KEDA's program on a known group: 4 partitions, p0 10 records committed at 4, p1 20
    committed at 20, p2 7 records in an open transaction never committed, p3 5 never
    committed. Returns (case, expected, KEDA's value) for: offsetResetPolicy latest (6 +
    0 + 1 + 1 = 8: a never-committed partition counts 1), earliest (6 + 0 + 7 + 5 = 18:
    the high watermark counts the open transaction), lagThreshold 1 (capped at 4
    partitions × 1), and with allowIdleConsumers (8, no cap)."""
    tag = uuid.uuid4().hex[:6]
    topic, group = f"kedacheck-{tag}", f"kedacheck-{tag}"
    await create_topics(bootstrap, [topic], 4)
    plain = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    txn = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"kedacheck-{tag}")
    await plain.start()
    await txn.start()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False
    )
    await consumer.start()
    try:
        for p, n in ((0, 10), (1, 20), (3, 5)):
            for _ in range(n):
                await plain.send_and_wait(topic, b"x", partition=p)
        await txn.begin_transaction()
        for _ in range(7):
            await txn.send_and_wait(topic, b"x", partition=2)
        consumer.assign([TopicPartition(topic, p) for p in range(4)])
        await consumer.commit({TopicPartition(topic, 0): 4, TopicPartition(topic, 1): 20})
        base = {"bootstrapServers": bootstrap, "consumerGroup": group, "topic": topic}
        cases = [
            ("offsetResetPolicy latest, lagThreshold 100", 8.0,
             {"lagThreshold": "100", "offsetResetPolicy": "latest"}),
            ("offsetResetPolicy earliest, lagThreshold 100", 18.0,
             {"lagThreshold": "100", "offsetResetPolicy": "earliest"}),
            ("offsetResetPolicy latest, lagThreshold 1 (cap)", 4.0,
             {"lagThreshold": "1", "offsetResetPolicy": "latest"}),
            ("lagThreshold 1, allowIdleConsumers true", 8.0,
             {"lagThreshold": "1", "offsetResetPolicy": "latest", "allowIdleConsumers": "true"}),
            # The cap compares in integer division: 18 / 4 = 4 is not above 4 partitions,
            # so 18 passes, and the HPA's ceil(18 / 4) asks for 5 replicas.
            ("offsetResetPolicy earliest, lagThreshold 4 (no cap: 18 / 4 = 4 in int64)", 18.0,
             {"lagThreshold": "4", "offsetResetPolicy": "earliest"}),
        ]  # fmt: skip
        out = []
        for name, want, meta in cases:
            got = await asyncio.to_thread(keda_once, binary, {**base, **meta})
            out.append((name, want, float(got["value"])))
        await txn.abort_transaction()
        return out
    finally:
        await consumer.stop()
        await txn.stop()
        await plain.stop()
