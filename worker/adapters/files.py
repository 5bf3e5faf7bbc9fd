"""JSONL files for `replay`: input lines in, output lines out, state in memory.

Input line: a ChunkRecord, or a Kafka-shaped envelope `{"key", "value", "timestamp"}`
(value: the record object, or its JSON text as a string). Output line:
`{"key": str, "headers": {str: str}, "value": <JSON, or the string "[DONE]">}`; the
value bytes are exactly what `run` publishes. Records that would go to the dead-letter
topic become lines with `derender-kind: dlq` and the verbatim input as a string.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any

import msgspec

from worker.pipeline import H_KIND, InRecord, OutRecord, Stored


class ReplayLine(msgspec.Struct):
    key: str | None
    headers: dict[str, str]
    value: msgspec.Raw | str


class _Envelope(msgspec.Struct):
    value: Any = None
    key: str | None = None
    timestamp: int | None = None
    request_id: Any = None


_line_encoder = msgspec.json.Encoder()
_envelope_decoder = msgspec.json.Decoder(_Envelope)
_value_encoder = msgspec.json.Encoder()


def read_records(stream: IO[bytes], name: str) -> Iterator[InRecord]:
    for lineno, raw in enumerate(stream, start=1):
        line = raw.strip()
        if not line:
            continue
        source = f"{name}:{lineno}"
        try:
            env = _envelope_decoder.decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError):
            yield InRecord(line, origin=source)  # not JSON: dead-lettered downstream
            continue
        if env.request_id is None and env.value is not None:
            value = env.value
            blob = value.encode() if isinstance(value, str) else _value_encoder.encode(value)
            yield InRecord(blob, key=env.key, timestamp_ms=env.timestamp, origin=source)
        else:
            yield InRecord(line, origin=source)


def write_output(stream: IO[bytes], rec: OutRecord) -> None:
    headers = {k: v.decode() for k, v in rec.headers}
    value: msgspec.Raw | str
    if rec.kind == "done":
        value = rec.value.decode()
    elif rec.kind == "dlq":
        headers[H_KIND] = "dlq"
        value = rec.value.decode("utf-8", errors="replace")
    else:
        value = msgspec.Raw(rec.value)
    stream.write(_line_encoder.encode(ReplayLine(rec.key or None, headers, value)))
    stream.write(b"\n")


class StateFile(msgspec.Struct):
    """`replay --state`: the in-memory store saved between runs (split replays)."""

    states: dict[str, tuple[int, bytes]]


def load_state_file(path: str) -> dict[str, Stored | None]:
    try:
        with open(path, "rb") as f:
            data = msgspec.msgpack.decode(f.read(), type=StateFile)
    except FileNotFoundError:
        return {}
    return {k: Stored(seq, blob) for k, (seq, blob) in data.states.items()}


def save_state_file(path: str, states: dict[str, Stored | None]) -> None:
    data = StateFile({k: (s.seq, s.blob) for k, s in states.items() if s is not None})
    with open(path, "wb") as f:
        f.write(msgspec.msgpack.encode(data))
