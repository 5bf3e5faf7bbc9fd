"""`serve`'s stream_state: the request state the core keeps in Redis under `run`, carried
by the client between streaming calls instead (CONTRACT.md §2, README "serve").

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


_sealed_encoder = msgspec.msgpack.Encoder()
_sealed_decoder = msgspec.msgpack.Decoder(Sealed)


def state_key(secret: str | None) -> bytes:
    """The BLAKE2b key of the envelopes' tags (empty: unkeyed)."""
    return b"" if not secret else hashlib.blake2b(secret.encode()).digest()


def _tag(key: bytes, api: str, request_id: str, seq: int, blob: bytes, tables: bytes) -> bytes:
    h = hashlib.blake2b(digest_size=16, key=key)
    h.update(f"{api}\0{request_id}\0{seq}\0".encode())
    h.update(blob)
    if tables:  # (the state holds their digest too: this binds the carried copy itself)
        h.update(b"\0tables\0")
        h.update(tables)
    return h.digest()


def seal(
    key: bytes, api: str, request_id: str, seq: int, blob: bytes, tables: bytes = b""
) -> bytes:
    """The stream_state's `state` string (ASCII)."""
    tag = _tag(key, api, request_id, seq, blob, tables)
    sealed = Sealed(SEAL_VERSION, seq, tag, blob, tables)
    return binascii.b2a_base64(_sealed_encoder.encode(sealed), newline=False)


class BadState(Exception):
    pass


def unseal(key: bytes, api: str, request_id: str, text: str) -> Stored:
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
        sealed.tag, _tag(key, api, request_id, sealed.seq, sealed.blob, sealed.tables)
    ):
        raise BadState(
            f"invalid stream_state: it does not belong to request {request_id!r} on this "
            "endpoint, or it was altered"
        )
    return Stored(sealed.seq, sealed.blob, sealed.tables or None)
