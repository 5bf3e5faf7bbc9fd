"""Row 4: the whole core per record (JSON in → `decode_batch` + `process_batch` →
JSON out + state blob), `derender.step` alone, and interleaved batches."""

from __future__ import annotations

import json
from typing import Any

from tokenizers import Tokenizer

from corebench.profile import CREATED, MODEL
from corebench.workload import chunked
from worker.batch.pipeline import batch_request_ids, decode_batch, process_batch
from worker.constants import DEFAULT_MAX_RECORD_BYTES
from worker.core import derender
from worker.core.model import Model, Registry
from worker.core.state import decode_state, encode_state
from worker.ports import InRecord, Stored

# -- 4) the whole core ------------------------------------------------------------------


def registry(tok: Tokenizer) -> Registry:
    return Registry({MODEL: Model(name=MODEL, tokenizer=tok)}, default=MODEL)


PROMPT = (
    "You are a helpful assistant.\n\nUser: Write a long answer mixing prose, Python code "
    "and a few lines of Chinese and Japanese, with an emoji here and there.\n\nAssistant:"
)


def request_records(
    tok: Tokenizer,
    rid: str,
    ids: list[int],
    chunk_size: int,
    chat_request: dict[str, Any],
    finished: bool = True,
) -> list[bytes]:
    """The JSON values a publisher would produce for one streamed chat request: seq 0
    carries the request and the first ids; with `finished`, the last chunk has
    `finish_reason: "length"` and an `end` record follows."""
    chunks = chunked(ids, chunk_size)
    values: list[bytes] = []
    for seq, chunk in enumerate(chunks):
        last = seq == len(chunks) - 1
        rec: dict[str, Any] = {
            "request_id": rid,
            "seq": seq,
            "generate_chunk": {
                "request_id": rid,
                "choices": [
                    {
                        "index": 0,
                        "token_ids": chunk,
                        "finish_reason": "length" if last and finished else None,
                        "logprobs": None,
                    }
                ],
                "usage": None,
            },
        }
        if seq == 0:
            prompt_ids = tok.encode(PROMPT, add_special_tokens=False).ids
            rec.update(
                api="chat",
                model=MODEL,
                created=CREATED,
                prompt_token_ids=prompt_ids,
                chat_request={
                    "model": MODEL,
                    "messages": [{"role": "user", "content": PROMPT}],
                    "stream": True,
                    **chat_request,
                },
            )
        values.append(json.dumps(rec, ensure_ascii=False).encode())
    if finished:
        end = {"request_id": rid, "seq": len(chunks), "type": "end"}
        values.append(json.dumps(end).encode())
    return values


def pipeline_one_request(
    reg: Registry, rid: str, values: list[bytes], keep: bool = True
) -> tuple[list[bytes], list[int]]:
    """One record per batch, the state kept only as the stored blob between records.

    Returns the output values (when `keep`) and the state size after each record.
    """
    stored: Stored | None = None
    outputs: list[bytes] = []
    sizes: list[int] = []
    for value in values:
        decoded = decode_batch([InRecord(value, key=rid)], DEFAULT_MAX_RECORD_BYTES)
        result = process_batch(decoded, {rid: stored}, reg)
        w = result.writes.get(rid)
        if w is not None:
            stored = Stored(w.seq, w.blob)
            sizes.append(len(w.blob))
        if keep:
            outputs.extend(o.value for o in result.outputs)
    return outputs, sizes


def step_one_request(reg: Registry, records: list[Any], keep: bool = True) -> list[bytes]:
    """`derender.step` alone on already-decoded records, state through msgpack."""
    blob: bytes | None = None
    outputs: list[bytes] = []
    for rec in records:
        state = decode_state(blob) if blob is not None else None
        st = derender.step(state, rec, reg)
        assert st.state is not None
        blob = encode_state(st.state)
        if keep:
            outputs.extend(o.value for o in st.outputs)
    return outputs


def interleave(streams: list[list[bytes]]) -> list[tuple[str, bytes]]:
    """Round robin over the requests, each keeping its own order (as on one partition)."""
    out: list[tuple[str, bytes]] = []
    cursors = [0] * len(streams)
    live = list(range(len(streams)))
    while live:
        still = []
        for i in live:
            out.append((f"req-{i}", streams[i][cursors[i]]))
            cursors[i] += 1
            if cursors[i] < len(streams[i]):
                still.append(i)
        live = still
    return out


def pipeline_batches(
    reg: Registry, records: list[tuple[str, bytes]], batch_records: int, keep: bool = True
) -> tuple[list[tuple[str, bytes]], dict[str, Stored]]:
    """The shell's loop without I/O: decode a batch, load its states from the dict, step,
    save. Timed runs pass `keep=False`: a worker drops its outputs once produced, and
    piling up 100k output tuples here would only add garbage-collector work."""
    store: dict[str, Stored] = {}
    outputs: list[tuple[str, bytes]] = []
    for start in range(0, len(records), batch_records):
        batch = [InRecord(v, key=k) for k, v in records[start : start + batch_records]]
        decoded = decode_batch(batch, DEFAULT_MAX_RECORD_BYTES)
        loaded = {rid: store.get(rid) for rid in batch_request_ids(decoded)}
        result = process_batch(decoded, loaded, reg)
        for rid, w in result.writes.items():
            store[rid] = Stored(w.seq, w.blob)
        if keep:
            outputs.extend((o.key, o.value) for o in result.outputs)
    return outputs, store


def content_of(values: list[bytes]) -> str:
    parts = []
    for v in values:
        if v == b"[DONE]":
            continue
        for c in json.loads(v)["choices"]:
            parts.append(c["delta"].get("content") or "")
    return "".join(parts)
