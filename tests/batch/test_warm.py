"""Warm states (worker/batch/warm.py): a state saved by this process and loaded back as
the same bytes is reused, never a changed or a different one, and the outputs and state
writes are byte for byte those of decoding every state."""

from __future__ import annotations

import json
from typing import Any

from tests.support.helpers import ListSink, ListSource, chunk, end
from worker.adapters.state.memory_store import MemoryStore
from worker.batch.checkpoint import Checkpoint
from worker.batch.loop import run_batch, run_sync
from worker.batch.warm import WarmStates
from worker.config import load_registry
from worker.core.state import CorruptState, RequestState, decode_state, encode_state
from worker.ports import InRecord

REGISTRY = load_registry(None)  # DeepSeek V4: its reasoning and tool parsers on
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


def _records() -> list[bytes]:
    """Three requests interleaved: parsers with tools and a stop string, n = 2, usage."""
    tok = REGISTRY.models[REGISTRY.default].tokenizer
    ids = tok.encode(
        "let me think</think>The answer is forty two. STOP and more", add_special_tokens=False
    ).ids
    opening: list[dict[str, Any]] = [
        {"chat_request": {"tools": TOOLS, "stop": ["STOP"]}},
        {"chat_request": {"n": 2, "stream_options": {"include_usage": True}}},
        {
            "chat_request": {
                "stream_options": {"include_usage": True, "continuous_usage_stats": True}
            }
        },
    ]
    out: list[bytes] = []
    seqs = [0, 0, 0]
    for i, t in enumerate(ids):
        for r in range(3):
            indices = [0, 1] if r == 1 else [0]
            for index in indices:
                top = opening[r] if seqs[r] == 0 else {}
                finish = "stop" if i == len(ids) - 1 else None
                out.append(json.dumps(chunk(f"r{r}", seqs[r], [t], finish, index, **top)).encode())
                seqs[r] += 1
    out += [json.dumps(end(f"r{r}", seqs[r])).encode() for r in range(3)]
    return out


def _run(values: list[bytes], warm: WarmStates, batch: int) -> tuple[list[Any], list[Any]]:
    source, sink, store = ListSource(), ListSink(), MemoryStore()
    checkpoint = Checkpoint(source, store)
    writes = []
    for i in range(0, len(values), batch):
        b = source.batch([InRecord(v) for v in values[i : i + batch]])
        report = run_sync(
            run_batch(
                b,
                registry=REGISTRY,
                sink=sink,
                checkpoint=checkpoint,
                max_record_bytes=1 << 20,
                warm=warm,
            )
        )
        writes.append(report.writes)
    return [(o.key, o.value, o.headers, o.kind) for o in sink.outputs], writes


def test_warm_states_change_no_byte() -> None:
    values = _records()
    for batch in (1, 2, 5):
        warm, cold = WarmStates(), WarmStates(size=0)
        got = _run(values, warm, batch)
        assert warm.hits > len(values) // 2  # (nearly every load after the first)
        assert got == _run(values, cold, batch)
        assert cold.hits == 0


def test_reused_only_for_the_same_bytes_and_only_once() -> None:
    warm = WarmStates()
    state = RequestState(seq=3, model="m")
    blob = encode_state(state)
    warm.keep("r", blob, state)
    assert warm.take("r", bytes(blob)) is state  # equal bytes (a store's copy): the object
    taken = warm.take("r", blob)  # handed out once: the core changes it in place
    assert taken is not state and taken == decode_state(blob)
    warm.keep("r", blob, state)
    other = encode_state(RequestState(seq=4, model="m"))
    again = warm.take("r", other)  # the store holds something else: decoded
    assert isinstance(again, RequestState) and again.seq == 4
    assert warm.take("r", blob) is not state  # and the old one is gone
    assert isinstance(warm.take("r", b"\xc1"), CorruptState)


def test_bounded() -> None:
    warm = WarmStates(size=2)
    for i in range(3):
        s = RequestState(seq=i)
        warm.keep(f"r{i}", encode_state(s), s)
    assert len(warm) == 2
    assert warm.take("r0", encode_state(RequestState(seq=0))) is not None
    assert warm.hits == 0  # the oldest was let go
