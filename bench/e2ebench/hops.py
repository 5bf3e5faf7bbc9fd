"""Where a gateway request's time goes, from timestamps nothing on the hot path was changed
for: the Kafka records' own timestamps (CreateTime: an input record's is taken when the
gateway's producer appends it, before any linger; an output's when the worker appends it
to its record batch, before the produce request) and the client's clock (the same
machine's wall clock).

Per request, up to its first token:
  client → published   render, generate's first event, the gateway's publish call;
  published → output   the worker's hold: the producer's linger and produce request,
                       the worker's fetch, decode, state load, core;
  output → client      the worker's produce request and acks, the gateway's fetch,
                       dedupe, the SSE write, the client's read.
Per token (every record that carries one): the worker's hold, and output → client.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from e2ebench.client import Timed
from e2ebench.stack import PARTITIONS
from worker.wire.output import from_record


@dataclass
class Hops:
    """Seconds per hop, over the gateway requests matched with their records."""

    to_published: list[float] = field(default_factory=list)
    worker_first: list[float] = field(default_factory=list)
    to_client_first: list[float] = field(default_factory=list)
    worker_token: list[float] = field(default_factory=list)
    to_client_token: list[float] = field(default_factory=list)
    matched: int = 0


async def _read_all(bootstrap: str, topic: str) -> list[Any]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        out: list[Any] = []
        while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
            got = await consumer.getmany(timeout_ms=1000)
            for recs in got.values():
                out.extend(recs)
        return out
    finally:
        await consumer.stop()


def _has_token(value: bytes) -> bool:
    try:
        event = json.loads(value)
    except ValueError:
        return False
    for c in event.get("choices") or []:
        d = c.get("delta") or {}
        if d.get("content") or d.get("reasoning") or d.get("tool_calls"):
            return True
    return False


def measure(bootstrap: str, names: dict[str, str], timed: list[Timed]) -> Hops:
    """Match the gateway requests in `timed` with their input and output records."""
    inputs = asyncio.run(_read_all(bootstrap, names["input"]))
    outputs = asyncio.run(_read_all(bootstrap, names["output"]))
    published: dict[tuple[str, int], float] = {}
    for r in inputs:
        try:
            seq = int(json.loads(r.value)["seq"])
        except (ValueError, KeyError, TypeError):
            continue
        published[(r.key.decode(), seq)] = r.timestamp / 1000
    # Per request: (seq, output time) of each output carrying a token, in order.
    tokens: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for r in sorted(outputs, key=lambda r: (r.partition, r.offset)):
        out = from_record(r.key, r.value, r.headers, r.partition, r.offset)
        if out is not None and out.kind == "chunk" and _has_token(out.value):
            tokens[out.request_id].append((out.seq, r.timestamp / 1000))
    hops = Hops()
    for t in timed:
        outs = tokens.get(t.request_id)
        if t.error or not outs or not t.token_walls or (t.request_id, 0) not in published:
            continue
        hops.matched += 1
        first_seq, first_out = outs[0]
        hops.to_published.append(published[(t.request_id, 0)] - t.sent_wall)
        if (t.request_id, first_seq) in published:
            hops.worker_first.append(first_out - published[(t.request_id, first_seq)])
        hops.to_client_first.append(t.token_walls[0] - first_out)
        for (seq, at), seen in zip(outs, t.token_walls, strict=False):
            if (t.request_id, seq) in published:
                hops.worker_token.append(at - published[(t.request_id, seq)])
            hops.to_client_token.append(seen - at)
    return hops
