"""Builders shared by the tests: registries around test tokenizers, records, runs."""

from __future__ import annotations

import json
from typing import Any

from tokenizers import Tokenizer

from worker.core.model import Model, Registry
from worker.pipeline import InRecord, OutRecord, Stored, batch_request_ids, decode_batch
from worker.pipeline import process_batch as _process


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
    """Feeds records one batch at a time through the real pipeline with a memory store
    (state goes through msgpack between batches, as it does through Redis)."""

    def __init__(self, reg: Registry) -> None:
        self.reg = reg
        self.store: dict[str, Stored | None] = {}
        self.outputs: list[OutRecord] = []
        self.dead: list[OutRecord] = []

    def feed(self, *records: dict[str, Any] | bytes, key: str | None = None) -> list[OutRecord]:
        ins = [
            InRecord(r if isinstance(r, bytes) else json.dumps(r).encode(), key=key)
            for r in records
        ]
        decoded = decode_batch(ins, 1 << 20)
        loaded = {rid: self.store.get(rid) for rid in batch_request_ids(decoded)}
        result = _process(decoded, loaded, self.reg)
        for rid, w in result.writes.items():
            self.store[rid] = Stored(w.seq, w.blob)
        self.outputs += result.outputs
        self.dead += result.dead_letters
        return result.outputs

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
