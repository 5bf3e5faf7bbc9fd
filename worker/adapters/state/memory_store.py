"""The state store in memory, for `replay` and tests: the Redis store's contract and rules.

Same compare-and-set as `redis_layout.CAS_SCRIPT` (seq, then owner epoch), same TTLs (a
tombstone keeps the short one), same key names, the same idempotent re-apply of an
identical write, and the same two versions under exactly-once (`redis_layout.CAS_SCRIPT`).
Time comes from an injectable clock so tests can expire states without sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec

from worker.constants import DEFAULT_DONE_TTL_S, DEFAULT_TTL_S, KEY_PREFIX, epoch_key, state_key
from worker.ports import StateStore, StateWrite, Stored


@dataclass(slots=True)
class _Entry:
    seq: int
    epoch: int
    blob: bytes
    expires_at: float
    # Exactly-once: the last input offset of the batch that wrote it (-1: unversioned) and
    # the state before it (None: there was none).
    upto: int = -1
    prev: tuple[int, bytes] | None = None
    # The request's tables (core/tables.py): set by the write that opens the request.
    tables: bytes = b""

    def base(self, first_offset: int) -> tuple[int, bytes] | None:
        """The state a batch starting at `first_offset` builds on: this one, unless the
        batch that wrote it reached that offset (so it is being read again: its
        transaction never committed)."""
        if 0 <= first_offset <= self.upto:
            return self.prev
        return (self.seq, self.blob)


class MemoryStore:
    def __init__(
        self,
        ttl_s: float = DEFAULT_TTL_S,
        done_ttl_s: float = DEFAULT_DONE_TTL_S,
        key_prefix: str = KEY_PREFIX,
        *,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl_s <= 0 or done_ttl_s <= 0:
            raise ValueError(f"TTLs must be positive, got {ttl_s} s and {done_ttl_s} s")
        self.ttl_s = ttl_s
        self.done_ttl_s = done_ttl_s
        self.key_prefix = key_prefix
        self._now = now
        self._entries: dict[str, _Entry] = {}
        self._epochs: dict[str, int] = {}
        # Calls that would be a network round trip on Redis (kept equal to RedisStore's).
        self.round_trips = 0

    def key(self, request_id: str) -> str:
        return state_key(self.key_prefix, request_id)

    def epoch_key(self, scope: str) -> str:
        return epoch_key(self.key_prefix, scope)

    def _live(self, key: str, now: float) -> _Entry | None:
        entry = self._entries.get(key)
        if entry is not None and entry.expires_at <= now:
            del self._entries[key]
            return None
        return entry

    def ttl_left_s(self, request_id: str) -> float | None:
        """Seconds until the request's state expires (None: there is none), like PTTL."""
        entry = self._live(self.key(request_id), self._now())
        return None if entry is None else entry.expires_at - self._now()

    async def load_many(
        self,
        request_ids: list[str],
        first_offsets: list[int] | None = None,
        tables_for: AbstractSet[str] = frozenset(),
    ) -> dict[str, Stored | None]:
        if not request_ids:
            return {}
        self.round_trips += 1
        now = self._now()
        firsts = first_offsets or [-1] * len(request_ids)
        out: dict[str, Stored | None] = {}
        for rid, first in zip(request_ids, firsts, strict=True):
            entry = self._live(self.key(rid), now)
            base = None if entry is None else entry.base(first)
            if base is None:
                out[rid] = None
            else:
                assert entry is not None
                tables = entry.tables if entry.tables and rid in tables_for else None
                out[rid] = Stored(base[0], base[1], tables)
        return out

    async def save_many(self, writes: list[StateWrite]) -> list[str]:
        if not writes:
            return []
        self.round_trips += 1
        now = self._now()
        refused: list[str] = []
        for w in writes:
            key = self.key(w.request_id)
            cur = self._live(key, now)
            prev: tuple[int, bytes] | None = None
            tables = w.tables
            if cur is not None:
                tables = tables or cur.tables
                if cur.epoch > w.epoch:
                    refused.append(w.request_id)
                    continue
                same = (cur.seq, cur.epoch, cur.blob, cur.upto) == (
                    w.seq,
                    w.epoch,
                    w.blob,
                    w.last_offset,
                )
                if same:  # (a retry after a lost reply: already applied)
                    prev = cur.prev
                else:
                    base = cur.base(w.first_offset) if w.versioned else (cur.seq, cur.blob)
                    if (None if base is None else base[0]) != w.expected_seq:
                        refused.append(w.request_id)
                        continue
                    if not w.versioned:
                        prev = None
                    elif 0 <= w.since <= cur.upto:
                        # Written by this transaction (or by one that never committed):
                        # the state before the transaction stays the one to go back to.
                        prev = cur.prev
                    else:
                        prev = base
            elif w.expected_seq is not None:
                refused.append(w.request_id)
                continue
            ttl_s = self.done_ttl_s if w.done else self.ttl_s
            self._entries[key] = _Entry(
                w.seq, w.epoch, bytes(w.blob), now + ttl_s, w.last_offset, prev, bytes(tables)
            )
        return refused

    async def claim_epoch(self, scope: str) -> int:
        self.round_trips += 1
        key = self.epoch_key(scope)
        epoch = self._epochs.get(key, 0) + 1
        self._epochs[key] = epoch
        return epoch

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    # `replay --state`: the live states saved between runs (a replay split in parts).
    # Owner epochs are not kept: each run claims its own, above the stored ones' 0.

    def dump(self) -> bytes:
        now = self._now()
        states, tables = {}, {}
        for key, e in self._entries.items():
            if e.expires_at > now:
                rid = key[len(self.key_prefix) + 1 : -1]
                states[rid] = (e.seq, e.blob)
                if e.tables:
                    tables[rid] = e.tables
        return msgspec.msgpack.encode(StateFile(states, tables))

    def load(self, data: bytes) -> None:
        """Adds the states of a `dump` (each with a fresh TTL)."""
        expires_at = self._now() + self.ttl_s
        saved = msgspec.msgpack.decode(data, type=StateFile)
        for rid, (seq, blob) in saved.states.items():
            self._entries[self.key(rid)] = _Entry(
                seq, 0, blob, expires_at, tables=saved.tables.get(rid, b"")
            )


class StateFile(msgspec.Struct):
    """The file `replay --state` reads and writes: request_id → (seq, state blob), and
    request_id → its tables blob (core/tables.py) for the requests that have any."""

    states: dict[str, tuple[int, bytes]]
    tables: dict[str, bytes] = {}


if TYPE_CHECKING:

    def _satisfies_the_protocol(store: MemoryStore) -> StateStore:
        return store
