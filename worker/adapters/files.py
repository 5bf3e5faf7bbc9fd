"""JSONL files for `replay`: a `Source` of input lines, a `Sink` of output lines.

Input line: a ChunkRecord, or a Kafka-shaped envelope `{"key", "value", "timestamp",
"headers"}` (value: the record object, or its JSON text as a string; headers, optional:
`{str: str}` as in output lines, of which the trace headers are carried onto the outputs,
as `run` carries a Kafka record's). Output line:
`{"key": str, "headers": {str: str}, "value": <JSON, or the string "[DONE]">}`, plus
`"partition": N` for an output whose request names a reply partition; the value bytes
are exactly what `run` publishes. Records that would go to the dead-letter
topic become lines with `derender-kind: dlq` and the verbatim input as a string.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from itertools import islice
from typing import IO, Any

import msgspec

from worker.constants import CONTROL, DLQ, DONE_KIND, H_KIND
from worker.observe.propagation import TRACE_HEADERS, carried
from worker.ports import Batch, InRecord, OutRecord, Partition


class ReplayLine(msgspec.Struct, omit_defaults=True):
    key: str | None
    headers: dict[str, str]
    value: msgspec.Raw | str
    # The request's reply partition of the output topic; left out when it names none.
    partition: int | None = None


class _Envelope(msgspec.Struct):
    value: Any = None
    key: str | None = None
    timestamp: int | None = None
    request_id: Any = None
    headers: dict[str, str] | None = None


_line_encoder = msgspec.json.Encoder()
_envelope_decoder = msgspec.json.Decoder(_Envelope)
_value_encoder = msgspec.json.Encoder()


def read_records(
    stream: IO[bytes], name: str, carry: frozenset[str] = TRACE_HEADERS
) -> Iterator[InRecord]:
    for lineno, raw in enumerate(stream, start=1):
        line = raw.strip()
        if not line:
            continue
        source = f"{name}:{lineno}"
        try:
            env = _envelope_decoder.decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError):
            yield InRecord(line, origin=source, partition=name)  # not JSON: dead-lettered
            continue
        if env.request_id is None and env.value is not None:
            value = env.value
            blob = value.encode() if isinstance(value, str) else _value_encoder.encode(value)
            headers = None
            if env.headers:
                headers = carried(((k, v.encode()) for k, v in env.headers.items()), carry)
            yield InRecord(
                blob,
                key=env.key,
                timestamp_ms=env.timestamp,
                origin=source,
                partition=name,
                headers=headers,
            )
        else:
            yield InRecord(line, origin=source, partition=name)


def write_output(stream: IO[bytes], rec: OutRecord) -> None:
    headers = {k: v.decode() for k, v in rec.headers}
    value: msgspec.Raw | str
    if rec.kind == DONE_KIND:
        value = rec.value.decode()
    elif rec.kind == DLQ:
        headers[H_KIND] = DLQ
        value = rec.value.decode("utf-8", errors="replace")
    else:
        value = msgspec.Raw(rec.value)
    # (Dead letters and control records go to their own topics, by key.)
    partition = rec.partition if rec.kind not in (DLQ, CONTROL) else None
    line = ReplayLine(rec.key or None, headers, value, partition)
    stream.write(_line_encoder.encode(line))
    stream.write(b"\n")


class FileSource:
    """`Source` over a JSONL stream, `batch_size` records a poll: one partition (the
    file's name), whose offsets are the records' positions in it."""

    def __init__(
        self,
        stream: IO[bytes],
        name: str,
        batch_size: int,
        carry: frozenset[str] = TRACE_HEADERS,
    ) -> None:
        self.name = name
        self.batch_size = batch_size
        self._records = read_records(stream, name, carry)
        self._offset = 0
        self._again: list[InRecord] = []  # a rewound batch, delivered before the rest
        self.committed: int | None = None  # the next offset to read, once committed

    async def poll(self) -> Batch | None:
        records = self._again or list(islice(self._records, self.batch_size))
        self._again = []
        if not records:
            return None
        first = self._offset
        self._offset += len(records)
        return Batch(records, {self.name: first}, {self.name: self._offset - 1})

    def rewind(self, batch: Batch, partitions: list[Partition] | None = None) -> None:
        self._again = batch.records
        self._offset = batch.first[self.name]

    async def commit(self, offsets: Mapping[Partition, int]) -> None:
        self.committed = offsets[self.name]

    def scope(self, partition: Partition) -> str:
        return f"replay/{partition}"


class FileSink:
    """`Sink` writing output lines to a stream (dead letters first, as lines of kind
    `dlq`); a write is its own acknowledgement."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream

    async def send(self, outputs: list[OutRecord], dead_letters: list[OutRecord]) -> None:
        for rec in dead_letters:
            write_output(self.stream, rec)
        for rec in outputs:
            write_output(self.stream, rec)
