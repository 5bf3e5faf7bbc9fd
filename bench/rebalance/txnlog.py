"""Where a repeated output came from, read off the broker's own files: a partition's
record batches (offsets, producer id and epoch, transaction markers) and the transaction
coordinator's log (each state a transaction went through, with its partitions).

    python bench/rebalance/txnlog.py batches DATA_DIR/out-14/0...0.log
    python bench/rebalance/txnlog.py states DATA_DIR/__transaction_state-0/0...0.log --pid 8

Kafka's own DumpLogSegments is not among the jars the local broker resolves, and the
two formats needed here are small: the record batch (v2) header, and the transaction log
value (versions 0 and 1) read by the coordinator. A batch whose records an abort should
have hidden, followed by the same producer's next transaction with no ABORT marker
between, is a marker the coordinator never wrote (docs/design/exactly-once.md).
"""

from __future__ import annotations

import argparse
import datetime
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

_HEADER = struct.Struct(">qiibihiqqqhii")  # a record batch's header, magic 2
_STATES = {
    0: "Empty",
    1: "Ongoing",
    2: "PrepareCommit",
    3: "PrepareAbort",
    4: "CompleteCommit",
    5: "CompleteAbort",
    6: "Dead",
    7: "PrepareEpochFence",
}


class RecordBatch(NamedTuple):
    first: int
    last: int
    leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    count: int
    transactional: bool
    control: str | None  # "COMMIT" or "ABORT" for a transaction marker
    first_timestamp_ms: int
    max_timestamp_ms: int
    body: bytes  # the records


def _uvarint(buf: bytes, at: int) -> tuple[int, int]:
    """An unsigned varint at `at`: its value and where the next field starts."""
    value, shift = 0, 0
    while True:
        byte = buf[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def _varint(buf: bytes, at: int) -> tuple[int, int]:
    """A zigzag varint (record fields)."""
    value, at = _uvarint(buf, at)
    return (value >> 1) ^ -(value & 1), at


def batches(segment: bytes) -> Iterator[RecordBatch]:
    at = 0
    while at + _HEADER.size <= len(segment):
        (base, length, leader_epoch, _magic, _crc, attrs, last_delta, first_ts, max_ts, pid,
         epoch, seq, count) = _HEADER.unpack_from(segment, at)  # fmt: skip
        if length <= 0:
            return
        body = segment[at + _HEADER.size : at + 12 + length]
        control = None
        if attrs & 0x20:  # a control batch: its one record's key says which marker
            key_at = _record_key_at(body)
            control = "COMMIT" if struct.unpack_from(">hh", body, key_at)[1] == 1 else "ABORT"
        yield RecordBatch(
            base, base + last_delta, leader_epoch, pid, epoch, seq, count,
            bool(attrs & 0x10), control, first_ts, max_ts, body,
        )  # fmt: skip
        at += 12 + length


def _record_key_at(body: bytes) -> int:
    _, at = _varint(body, 0)  # length
    at += 1  # attributes
    _, at = _varint(body, at)  # timestamp delta
    _, at = _varint(body, at)  # offset delta
    _, at = _varint(body, at)  # key length
    return at


def records(batch: RecordBatch) -> Iterator[tuple[int, int, bytes | None, bytes | None]]:
    """(offset, timestamp ms, key, value) of each record of `batch`."""
    body, at = batch.body, 0
    for _ in range(batch.count):
        length, at = _varint(body, at)
        end = at + length
        at += 1
        ts_delta, at = _varint(body, at)
        offset_delta, at = _varint(body, at)
        key_len, at = _varint(body, at)
        key = body[at : at + key_len] if key_len >= 0 else None
        at += max(key_len, 0)
        value_len, at = _varint(body, at)
        value = body[at : at + value_len] if value_len >= 0 else None
        yield batch.first + offset_delta, batch.first_timestamp_ms + ts_delta, key, value
        at = end


class TxnState(NamedTuple):
    producer_id: int
    producer_epoch: int
    state: str
    partitions: list[tuple[str, tuple[int, ...]]]


def txn_state(value: bytes) -> TxnState:
    """A transaction log value (version 0, or the flexible version 1)."""
    version = struct.unpack_from(">h", value)[0]
    pid, epoch, _timeout, status = struct.unpack_from(">qhib", value, 2)
    at = 17
    parts: list[tuple[str, tuple[int, ...]]] = []
    if version == 0:
        (n,) = struct.unpack_from(">i", value, at)
        at += 4
        for _ in range(max(n, 0)):
            (name_len,) = struct.unpack_from(">h", value, at)
            topic = value[at + 2 : at + 2 + name_len].decode()
            at += 2 + name_len
            (m,) = struct.unpack_from(">i", value, at)
            parts.append((topic, struct.unpack_from(f">{m}i", value, at + 4)))
            at += 4 + 4 * m
    else:
        n, at = _uvarint(value, at)
        for _ in range(max(n - 1, 0)):
            name_len, at = _uvarint(value, at)
            topic = value[at : at + name_len - 1].decode()
            at += name_len - 1
            m, at = _uvarint(value, at)
            parts.append((topic, struct.unpack_from(f">{m - 1}i", value, at)))
            at += 4 * (m - 1)
            _, at = _uvarint(value, at)  # (tagged fields)
    return TxnState(pid, epoch, _STATES.get(status, str(status)), parts)


def _ts(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%H:%M:%S.%f")[:-3]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("what", choices=("batches", "states"))
    ap.add_argument("segment", type=Path, help="a partition's .log segment file")
    ap.add_argument("--pid", type=int, default=None, help="only this producer id")
    args = ap.parse_args(argv)
    segment = args.segment.read_bytes()
    for b in batches(segment):
        if args.what == "batches":
            if args.pid is None or b.producer_id == args.pid:
                marker = f" {b.control} marker" if b.control else ""
                print(
                    f"{b.first}-{b.last} leader epoch {b.leader_epoch} pid {b.producer_id} "
                    f"epoch {b.producer_epoch} seq {b.base_sequence} n {b.count}"
                    f"{' txn' if b.transactional else ''}{marker} at {_ts(b.max_timestamp_ms)}"
                )
            continue
        for offset, ts, _key, value in records(b):
            if value is None:
                continue
            s = txn_state(value)
            if args.pid is None or s.producer_id == args.pid:
                where = ", ".join(f"{t}{list(p)}" for t, p in s.partitions)
                print(f"{offset} {_ts(ts)} pid {s.producer_id} epoch {s.producer_epoch} "
                      f"{s.state} [{where}]")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
