"""A fresh broker warmed before the measured runs: its transaction and group coordinators
loaded, and the paths a run takes (transactions, fetches, a KIP-848 group) run a while.

Cold, the broker stalled for about ten seconds in a third of the runs, a few seconds
after the first worker's 32 transactional producers and the load began together (its
own controller fenced it: bench/results/rebalance-2026-12-07-batch.md); a broker in
service has done all this long before a scale event."""

from __future__ import annotations

import asyncio
import time
import uuid

import confluent_kafka

from worker.adapters.local.embedded import create_topics

TRANSACTIONS = 200
PRODUCERS = 8


def warm(bootstrap: str, partitions: int, timeout_s: float = 120.0) -> float:
    """Run transactions from a few producers into a topic of `partitions`, and read them
    in a KIP-848 group; returns the seconds it took."""
    began = time.monotonic()
    topic, group = f"warm-{uuid.uuid4().hex[:8]}", f"warm-{uuid.uuid4().hex[:8]}"
    asyncio.run(create_topics(bootstrap, [topic], partitions))
    producers = []
    for i in range(PRODUCERS):
        p = confluent_kafka.Producer(
            {"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-{i}"}
        )
        p.init_transactions(timeout_s)
        producers.append(p)
    for n in range(TRANSACTIONS):
        p = producers[n % PRODUCERS]
        p.begin_transaction()
        for part in range(partitions):
            p.produce(topic, b"warm", partition=part)
        p.commit_transaction(timeout_s)
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    want, seen = TRANSACTIONS * partitions, 0
    while seen < want:
        if time.monotonic() - began > timeout_s:
            raise TimeoutError(f"warming the broker: {seen} of {want} records read")
        seen += sum(1 for m in consumer.consume(500, 0.5) if m.error() is None)
    consumer.commit(asynchronous=False)
    consumer.close()
    for p in producers:
        p.flush(5)
    return time.monotonic() - began
