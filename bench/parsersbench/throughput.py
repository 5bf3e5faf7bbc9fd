"""Part B: tokens/s of the per-record core path, plain and with the parser on."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import msgspec
from tokenizers import Tokenizer

from parsersbench.formats import Stream
from parsersbench.profile import choice_decoder, msgpack_encoder, state_decoder
from worker.core import derender
from worker.core.model import Model, Registry
from worker.core.parsers import (
    feed,
    to_delta,
)
from worker.core.state import ChoiceState, RequestState, decode_state, encode_state
from worker.core.text.detokenize import Detokenizer
from worker.wire import outbound as out
from worker.wire.inbound import ChunkRecord

# -- B. throughput of the per-record path ---------------------------------------------------


def chunks_of(ids: list[int], size: int) -> list[list[int]]:
    return [ids[i : i + size] for i in range(0, len(ids), size)]


def plain_path(tok: Tokenizer, chunks: list[list[int]]) -> Callable[[], object]:
    detok = Detokenizer(tok, skip_special_tokens=True)

    def run() -> None:
        blob = msgpack_encoder.encode(ChoiceState(index=0))
        for chunk in chunks:
            cs = choice_decoder.decode(blob)
            text = detok.step(cs, chunk)
            if text:
                out.encode(out.Delta(content=text))
            blob = msgpack_encoder.encode(cs)

    return run


def parser_path(tok: Tokenizer, s: Stream, chunks: list[list[int]]) -> Callable[[], object]:
    detok = Detokenizer(tok, skip_special_tokens=False)

    def run() -> None:
        blobs = (msgpack_encoder.encode(ChoiceState(index=0)), msgpack_encoder.encode(s.open()))
        for n, chunk in enumerate(chunks):
            cs = choice_decoder.decode(blobs[0])
            st = state_decoder.decode(blobs[1])
            text = detok.step(cs, chunk)
            fed = feed(s.spec, st, text, chunk, final=n == len(chunks) - 1)
            delta = to_delta(fed.events)
            if delta is not None:
                out.encode(delta)
            blobs = (msgpack_encoder.encode(cs), msgpack_encoder.encode(st))

    return run


def parser_only(s: Stream, chunks: list[list[int]], texts: list[str]) -> Callable[[], object]:
    """The parser's own share: state round trip, feed, delta (texts precomputed)."""

    def run() -> None:
        blob = msgpack_encoder.encode(s.open())
        for n, (chunk, text) in enumerate(zip(chunks, texts, strict=True)):
            st = state_decoder.decode(blob)
            fed = feed(s.spec, st, text, chunk, final=n == len(chunks) - 1)
            delta = to_delta(fed.events)
            if delta is not None:
                out.encode(delta)
            blob = msgpack_encoder.encode(st)

    return run


def chunk_texts(tok: Tokenizer, chunks: list[list[int]]) -> list[str]:
    detok = Detokenizer(tok, skip_special_tokens=False)
    slot = ChoiceState(index=0)
    texts = [detok.step(slot, c) for c in chunks]
    texts[-1] += detok.flush(slot)
    return texts


def core_step_path(tok: Tokenizer, chunks: list[list[int]]) -> Callable[[], object]:
    reg = Registry({"m": Model(name="m", tokenizer=tok)}, default="m")
    records = [
        msgspec.convert(
            {
                "request_id": "r",
                "seq": n,
                "generate_chunk": {"choices": [{"index": 0, "token_ids": chunk}]},
            },
            ChunkRecord,
        )
        for n, chunk in enumerate(chunks)
    ]

    def run() -> None:
        blob: bytes | None = None
        for rec in records:
            state: RequestState | None = decode_state(blob) if blob is not None else None
            result = derender.step(state, rec, reg, timestamp_ms=0)
            assert result.state is not None
            blob = encode_state(result.state)

    return run


@dataclass
class RateRow:
    what: str
    chunk: int
    tokens: int
    best_s: float
    median_s: float

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.best_s
