"""Builders shared by the tests: registries around test tokenizers, records, runs."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

from tokenizers import Tokenizer

from worker.adapters.state.memory_store import MemoryStore
from worker.batch.checkpoint import Checkpoint
from worker.batch.loop import BatchReport, run_batch, run_sync
from worker.core.model import Model, Registry
from worker.ports import Batch, InRecord, OutRecord, Partition, StateWrite, Stored


def registry(tok: Tokenizer, name: str = "m", **kw: Any) -> Registry:
    return Registry({name: Model(name=name, tokenizer=tok, **kw)}, default=name)


def chunk(
    rid: str,
    seq: int,
    ids: list[int] | None,
    finish: str | None = None,
    index: int = 0,
    **top: Any,
) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "request_id": rid,
        "seq": seq,
        "generate_chunk": {
            "choices": [{"index": index, "token_ids": ids, "finish_reason": finish}]
        },
    }
    rec.update(top)
    return rec


def end(rid: str, seq: int) -> dict[str, Any]:
    return {"request_id": rid, "seq": seq, "type": "end"}


class Run:
    """Feeds records one batch at a time through the one loop (`loop.run_batch`) with a
    list source and sink and a `MemoryStore`: CAS, TTLs, epochs and the numbered steps are
    the ones `run` and `replay` go through (state goes through msgpack between batches)."""

    def __init__(
        self, reg: Registry, store: MemoryStore | None = None, control: bool = False
    ) -> None:
        self.reg = reg
        self.control = control  # `--control-topic`: early-stop records among the outputs
        self.store = MemoryStore() if store is None else store
        self.source = ListSource()
        self.checkpoint = Checkpoint(self.source, self.store)
        self.outputs: list[OutRecord] = []
        self.dead: list[OutRecord] = []
        self.results: Counter[str] = Counter()
        self.last: BatchReport | None = None

    def feed(self, *records: dict[str, Any] | bytes, key: str | None = None) -> list[OutRecord]:
        ins = [
            InRecord(r if isinstance(r, bytes) else json.dumps(r).encode(), key=key)
            for r in records
        ]
        return self.feed_records(ins).result.outputs

    def feed_records(self, ins: list[InRecord], max_record_bytes: int = 1 << 20) -> BatchReport:
        batch = self.source.batch(ins)
        sink = ListSink()
        report = run_sync(
            run_batch(
                batch,
                registry=self.reg,
                sink=sink,
                checkpoint=self.checkpoint,
                max_record_bytes=max_record_bytes,
                control=self.control,
            )
        )
        self.outputs += sink.outputs
        self.dead += sink.dead
        self.results.update(report.result.results)
        self.last = report
        return report

    def stored(self, rid: str) -> Stored | None:
        return run_sync(self.store.load_many([rid]))[rid]

    def plant(self, rid: str, seq: int, blob: bytes) -> None:
        """Store a state as if a worker had written it (e.g. one that does not decode)."""
        now = self.stored(rid)
        expected = None if now is None else now.seq
        write = StateWrite(rid, seq, blob, False, expected, self.checkpoint.epochs.get(None, 0))
        assert run_sync(self.store.save_many([write])) == []

    def values(self, kind: str | None = None) -> list[Any]:
        return [
            json.loads(o.value) if o.kind != "done" else "[DONE]"
            for o in self.outputs
            if kind is None or o.kind == kind
        ]

    def text(self, rid: str | None = None, index: int = 0, field: str = "content") -> str:
        parts = []
        for o in self.outputs:
            if o.kind != "chunk" or (rid is not None and o.key != rid):
                continue
            for c in json.loads(o.value)["choices"]:
                if c["index"] != index:
                    continue
                if "delta" in c:
                    parts.append(c["delta"].get(field) or "")
                else:
                    parts.append(c.get("text") or "")
        return "".join(parts)


class ListSource:
    """`Source` of batches the test hands over: one partition, offsets counted."""

    def __init__(self) -> None:
        self.offset = 0
        self.committed: dict[Partition, int] = {}
        self.rewound: list[Batch] = []

    def batch(self, records: list[InRecord]) -> Batch:
        first = self.offset
        self.offset += len(records)
        return Batch(records, {None: first}, {None: max(self.offset - 1, first)})

    async def poll(self) -> Batch | None:
        return None

    def rewind(self, batch: Batch, partitions: list[Partition] | None = None) -> None:
        self.rewound.append(batch)

    async def commit(self, offsets: Mapping[Partition, int]) -> None:
        self.committed.update(offsets)

    def scope(self, partition: Partition) -> str:
        return f"test/{partition}"


class ListSink:
    """`Sink` that keeps what it is sent (acknowledged at once)."""

    def __init__(self) -> None:
        self.outputs: list[OutRecord] = []
        self.dead: list[OutRecord] = []

    async def send(self, outputs: list[OutRecord], dead_letters: list[OutRecord]) -> None:
        self.outputs += outputs
        self.dead += dead_letters


class NoGroupLag:
    """`GroupLag` for a Runner over faked clients: samples nothing until the stop."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    async def export(self, every_s: float, to: Any, stopping: asyncio.Event) -> None:
        await stopping.wait()

    async def close(self) -> None:
        pass
