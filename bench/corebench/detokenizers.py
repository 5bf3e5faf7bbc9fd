"""Rows 1 and 3: the floor (one `DecodeStream`) and our `Detokenizer`, with and
without its state's msgpack round trip."""

from __future__ import annotations

from tokenizers import Tokenizer
from tokenizers.decoders import DecodeStream

from corebench.profile import CREATED, MODEL, SKIP_SPECIAL
from worker.core.state import ChoiceState, RequestState, decode_state, encode_state
from worker.core.text.detokenize import Detokenizer

# -- 1) the floor: one DecodeStream -----------------------------------------------------


def decodestream_per_id(tok: Tokenizer, chunks: list[list[int]]) -> list[str]:
    ds = DecodeStream(skip_special_tokens=SKIP_SPECIAL)
    step = ds.step
    out: list[str] = []
    for chunk in chunks:
        parts = []
        for token_id in chunk:
            text = step(tok, token_id)
            if text is not None:
                parts.append(text)
        out.append("".join(parts))
    return out


def decodestream_one_id(tok: Tokenizer, chunks: list[list[int]]) -> list[str]:
    """1-token chunks: the tightest loop, `step(tok, id)` once per chunk."""
    ds = DecodeStream(skip_special_tokens=SKIP_SPECIAL)
    step = ds.step
    out: list[str] = []
    for chunk in chunks:
        text = step(tok, chunk[0])
        out.append(text if text is not None else "")
    return out


def decodestream_list(tok: Tokenizer, chunks: list[list[int]]) -> list[str]:
    """`step(tok, [ids])` once per chunk (tokenizers ≥ 0.22 accepts a list)."""
    ds = DecodeStream(skip_special_tokens=SKIP_SPECIAL)
    step = ds.step
    out: list[str] = []
    for chunk in chunks:
        text = step(tok, chunk)
        out.append(text if text is not None else "")
    return out


# -- 3) our Detokenizer -----------------------------------------------------------------


def fresh_request_state() -> RequestState:
    return RequestState(seq=0, model=MODEL, created=CREATED, choices=[ChoiceState(index=0)])


def ours_msgpack(detok: Detokenizer, chunks: list[list[int]]) -> list[str]:
    blob = encode_state(fresh_request_state())
    out: list[str] = []
    for chunk in chunks:
        state = decode_state(blob)
        out.append(detok.step(state.choices[0], chunk))
        state.seq += 1
        blob = encode_state(state)
    state = decode_state(blob)
    out.append(detok.flush(state.choices[0]))
    return out


def ours_object(detok: Detokenizer, chunks: list[list[int]]) -> list[str]:
    cs = ChoiceState(index=0)
    out = [detok.step(cs, chunk) for chunk in chunks]
    out.append(detok.flush(cs))
    return out
