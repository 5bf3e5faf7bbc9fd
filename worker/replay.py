"""`derender-worker replay`: the pipeline over files, with the state store in memory."""

from __future__ import annotations

import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from itertools import islice
from typing import IO

from worker.adapters.files import read_records, write_output
from worker.core.model import Registry
from worker.pipeline import (
    DEFAULT_MAX_RECORD_BYTES,
    Stored,
    batch_request_ids,
    decode_batch,
    process_batch,
)

# Records per batch: the same batching the Kafka loop sees with its default
# max_records, so replay exercises the same code paths.
REPLAY_BATCH = 500
# How often the progress line on stderr is refreshed.
PROGRESS_EVERY_S = 2.0


@dataclass
class ReplaySummary:
    records: int = 0
    outputs: int = 0
    tokens: int = 0
    results: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0


def replay(
    src: IO[bytes],
    dst: IO[bytes],
    registry: Registry,
    states: dict[str, Stored | None] | None = None,
    name: str = "-",
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    progress: IO[str] | None = None,
) -> ReplaySummary:
    """Replay records from `src` to `dst`; `states` is the in-memory store (updated)."""
    store: dict[str, Stored | None] = {} if states is None else states
    summary = ReplaySummary()
    started = last = time.monotonic()
    records = read_records(src, name)
    while batch := list(islice(records, REPLAY_BATCH)):
        decoded = decode_batch(batch, max_record_bytes)
        loaded = {rid: store.get(rid) for rid in batch_request_ids(decoded)}
        result = process_batch(decoded, loaded, registry)
        for rec in result.dead_letters:
            write_output(dst, rec)
        for rec in result.outputs:
            write_output(dst, rec)
        for rid, w in result.writes.items():
            store[rid] = Stored(w.seq, w.blob)
        summary.records += len(batch)
        summary.outputs += len(result.outputs)
        summary.tokens += result.tokens
        summary.results.update(result.results)
        now = time.monotonic()
        if progress is not None and now - last >= PROGRESS_EVERY_S:
            last = now
            rate = summary.records / (now - started)
            print(
                f"replay: {summary.records} records, {summary.outputs} outputs, "
                f"{rate:,.0f} records/s",
                file=progress,
                flush=True,
            )
    summary.seconds = time.monotonic() - started
    return summary


def stderr() -> IO[str]:
    return sys.stderr
