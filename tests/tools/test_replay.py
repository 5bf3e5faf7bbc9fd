"""`replay` is the one loop over files with a `MemoryStore`: its CAS, TTLs and epochs are
Redis's rules, so a replay sees what a worker would."""

from __future__ import annotations

import io
import json
from pathlib import Path

from tests.support.helpers import chunk, end
from worker.adapters.state.memory_store import MemoryStore
from worker.config import load_registry
from worker.tools.replay import replay

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _lines(*records: dict[str, object]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def _replay(data: bytes, store: MemoryStore, batch_size: int = 500) -> list[dict[str, object]]:
    out = io.BytesIO()
    replay(io.BytesIO(data), out, load_registry(None), store, batch_size=batch_size)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_state_that_expires_between_replays_is_gone_as_in_redis() -> None:
    clock = Clock()
    store = MemoryStore(ttl_s=60, done_ttl_s=10, now=clock)
    _replay(_lines(chunk("r", 0, [100])), store)
    clock.t += 59  # within the TTL: the request goes on
    kept = _replay(_lines(chunk("r", 1, [101])), store)
    assert not any(o["headers"]["derender-kind"] == "error" for o in kept)
    assert store.ttl_left_s("r") == 60  # the write refreshed its TTL
    clock.t += 61  # idle past the TTL: its state expired, as Redis would expire it
    late = _replay(_lines(chunk("r", 2, [102])), store)
    (err,) = late
    assert err["headers"]["derender-kind"] == "error"
    assert "seq" in err["value"]["error"]["message"]


def test_golden_inputs_give_the_same_bytes_in_any_batch_size() -> None:
    data = (GOLDEN / "chat_stream.in.jsonl").read_bytes() + (
        GOLDEN / "n2_abort.in.jsonl"
    ).read_bytes()
    runs = [_replay(data, MemoryStore(), batch_size=n) for n in (1, 3, 500)]
    assert runs[0] == runs[1] == runs[2] and runs[0]


def test_a_finished_request_is_a_duplicate_until_its_tombstone_expires() -> None:
    clock = Clock()
    store = MemoryStore(ttl_s=60, done_ttl_s=10, now=clock)
    records = _lines(chunk("r", 0, [100], "stop"), end("r", 1))
    first = _replay(records, store)
    assert first[-1]["value"] == "[DONE]"
    assert _replay(records, store) == []  # a redelivery: both records are duplicates
    clock.t += 11  # the tombstone is gone: the same records are a new request again
    assert _replay(records, store) == first
