"""`serve`'s stream_state: the request state the core keeps in Redis under `run`, carried
by the client between streaming calls instead (docs/integrate/serve.md, "Streaming and
`stream_state`").

The envelope binds the state to its API, request id and seq with a 128-bit BLAKE2b tag
(keyed with `--state-key` when set, so replicas behind one load balancer share it): a
state of another request, of the other endpoint, altered, cut or of vLLM's own shape is
refused (`BadState`, a 400), never a wrong answer. base64 of msgpack, tens to a few
hundred bytes, flat in the output's length.
"""

from __future__ import annotations

import binascii
import hashlib
import hmac
from collections import OrderedDict
from typing import NamedTuple

import msgspec

from worker.constants import MAX_SEQ
from worker.ports import Stored

SEAL_VERSION = 1


class Sealed(msgspec.Struct, array_like=True, gc=False):
    v: int
    seq: int
    tag: bytes
    blob: bytes
    # The request's tables (core/tables.py: its stop strings and tools), which the Kafka
    # path stores once beside the state: here the client carries them, as it carries
    # the request's whole output in vLLM's stream_state. Last, with a default, so an
    # envelope from before them still opens (and its tag, over no tables, still holds).
    tables: bytes = b""
    # The choices this stream_state has opened (sent their role), sorted: a call opens
    # only its chunk's choice, so a client carrying one state per choice opens each once.
    # None in an envelope from before it: that stream keeps the opening it began with.
    opened: list[int] | None = None


_sealed_encoder = msgspec.msgpack.Encoder()
_sealed_decoder = msgspec.msgpack.Decoder(Sealed)


def state_key(secret: str | None) -> bytes:
    """The BLAKE2b key of the envelopes' tags (empty: unkeyed)."""
    return b"" if not secret else hashlib.blake2b(secret.encode()).digest()


def _tag(
    key: bytes,
    api: str,
    request_id: str,
    seq: int,
    blob: bytes,
    tables: bytes,
    opened: list[int] | None,
) -> bytes:
    h = hashlib.blake2b(digest_size=16, key=key)
    h.update(f"{api}\0{request_id}\0{seq}\0".encode())
    h.update(blob)
    if tables:  # (the state holds their digest too: this binds the carried copy itself)
        h.update(b"\0tables\0")
        h.update(tables)
    if opened is not None:
        h.update(b"\0opened\0")
        h.update(_sealed_encoder.encode(opened))
    return h.digest()


def seal(
    key: bytes,
    api: str,
    request_id: str,
    seq: int,
    blob: bytes,
    tables: bytes = b"",
    opened: list[int] | None = None,
) -> bytes:
    """The stream_state's `state` string (ASCII)."""
    tag = _tag(key, api, request_id, seq, blob, tables, opened)
    sealed = Sealed(SEAL_VERSION, seq, tag, blob, tables, opened)
    return binascii.b2a_base64(_sealed_encoder.encode(sealed), newline=False)


class BadState(Exception):
    pass


class Carried(NamedTuple):
    """An opened stream_state: the request state, and the choices it has opened (None:
    an envelope from before they were kept)."""

    stored: Stored
    opened: list[int] | None


def unseal(key: bytes, api: str, request_id: str, text: str) -> Carried:
    """The carried state, or BadState saying why it cannot be used for this request."""
    if not text:
        raise BadState(
            "invalid stream_state: it was not returned by this server (no `state`); send "
            "null on a stream's first call and then the stream_state of the previous answer"
        )
    try:
        sealed = _sealed_decoder.decode(binascii.a2b_base64(text, strict_mode=True))
    except (binascii.Error, ValueError, msgspec.DecodeError, msgspec.ValidationError):
        raise BadState("invalid stream_state: it does not decode") from None
    if sealed.v != SEAL_VERSION:
        raise BadState(f"invalid stream_state: version {sealed.v} is not {SEAL_VERSION}")
    if not 0 <= sealed.seq < MAX_SEQ or not hmac.compare_digest(
        sealed.tag,
        _tag(key, api, request_id, sealed.seq, sealed.blob, sealed.tables, sealed.opened),
    ):
        raise BadState(
            f"invalid stream_state: it does not belong to request {request_id!r} on this "
            "endpoint, or it was altered"
        )
    return Carried(Stored(sealed.seq, sealed.blob, sealed.tables or None), sealed.opened)


class Issued:
    """The states this process sealed last, by endpoint and request id: a call that brings
    its stream's latest state back byte for byte skips opening it (base64, msgpack, the
    tag), which could only give what was sealed. Anything else — another replica's state,
    an older one, one altered — is opened and checked by `unseal` as before. At most
    `size` states or `max_bytes` of their text (an agent's tools ride in its state: with
    20 kB of tables, opening one costs ~140 µs), the oldest let go first; a state is taken
    when used (the answer issues the next), so a retried call opens it the long way."""

    def __init__(self, size: int = 4096, max_bytes: int = 32 << 20) -> None:
        self.size, self.max_bytes = size, max_bytes
        self._held: OrderedDict[tuple[str, str], tuple[str, Carried]] = OrderedDict()
        self._bytes = 0
        self.hits = 0

    def __len__(self) -> int:
        return len(self._held)

    def open(self, key: bytes, api: str, request_id: str, text: str) -> Carried:
        """`unseal(key, api, request_id, text)`, without the work for a state issued here."""
        entry = self._held.pop((api, request_id), None)
        if entry is not None:
            self._bytes -= len(entry[0])
            if entry[0] == text:
                self.hits += 1
                s, opened = entry[1]
                return Carried(
                    Stored(s.seq, s.blob, s.tables), None if opened is None else list(opened)
                )
        return unseal(key, api, request_id, text)

    def keep(
        self,
        api: str,
        request_id: str,
        text: str,
        stored: Stored,
        opened: list[int] | None = None,
    ) -> None:
        """`text` is what `seal` made of `stored` and `opened` for this endpoint and request."""
        held = self._held
        old = held.pop((api, request_id), None)
        if old is not None:
            self._bytes -= len(old[0])
        held[(api, request_id)] = (text, Carried(stored, opened))
        self._bytes += len(text)
        # (the newest is kept whatever its size: the bodies bound it)
        while len(held) > 1 and (len(held) > self.size or self._bytes > self.max_bytes):
            _, (t, _) = held.popitem(last=False)
            self._bytes -= len(t)
