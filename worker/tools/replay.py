"""`derender-worker replay`: the one loop over files, with the state store in memory.

The same `loop.run_batch` as `run`, with a `FileSource`, a `FileSink` and a
`MemoryStore` (its compare-and-set, TTLs and owner epochs): a replay exercises the whole
protocol, and publishes the bytes `run` would.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import IO

from worker.adapters.files import FileSink, FileSource
from worker.adapters.state.memory_store import MemoryStore
from worker.batch.checkpoint import Checkpoint
from worker.batch.loop import run_batch, run_sync
from worker.constants import DEFAULT_MAX_RECORD_BYTES
from worker.core.model import Registry
from worker.observe.propagation import TRACE_HEADERS

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
    store: MemoryStore | None = None,
    name: str = "-",
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    progress: IO[str] | None = None,
    batch_size: int = REPLAY_BATCH,
    control: bool = False,
    carry: frozenset[str] = TRACE_HEADERS,
) -> ReplaySummary:
    """Replay records from `src` to `dst`; `store` keeps the states (a fresh one if None).
    `control`: write the control records too (kind `control`), as `run --control-topic`
    publishes them. `carry`: the input headers the outputs carry, as `run`'s
    `--pass-headers` (the W3C trace headers by default)."""
    store = MemoryStore() if store is None else store
    source = FileSource(src, name, batch_size, carry)
    sink = FileSink(dst)
    checkpoint = Checkpoint(source, store)
    summary = ReplaySummary()
    started = last = time.monotonic()
    # The memory store and the file sink never wait, so no event loop is needed.
    while (batch := run_sync(source.poll())) is not None:
        report = run_sync(
            run_batch(
                batch,
                registry=registry,
                sink=sink,
                checkpoint=checkpoint,
                max_record_bytes=max_record_bytes,
                control=control,
            )
        )
        result = report.result
        summary.records += report.records
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
