"""Builders shared by the logprob, echo and response tests: a byte-per-token tokenizer
(vLLM's Rust test tokenizer), logprob entries and chunks in both shapes, readers of a run's
logprobs and errors, and the registries the logprob tests run on (fixtures)."""

from __future__ import annotations

from typing import Any

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

from tests.support.helpers import Run, chunk, registry
from worker.core.model import Registry


def _gpt2_bytes() -> dict[int, str]:
    """GPT-2's byte → printable character table (what a ByteLevel vocabulary spells)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(printable, chars, strict=True)}


def byte_tokenizer() -> Tokenizer:
    """vLLM's Rust test tokenizer: token id = UTF-8 byte value, `<bos>` = 256 (added with
    special tokens). No merges, so every byte of every character is its own token."""
    table = _gpt2_bytes()
    tok = Tokenizer(models.BPE({table[b]: b for b in range(256)}, []))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<bos>"])
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A", special_tokens=[("<bos>", 256)]
    )
    return tok


@pytest.fixture(scope="module")
def bytes_tok() -> Tokenizer:
    return byte_tokenizer()


def entry(
    tid: int, logprob: float, top: list[tuple[int, float]] | None = None, shape: str = "B"
) -> dict[str, Any]:
    """One generate logprob entry in shape A (placeholder) or B (integer id)."""
    e: dict[str, Any] = (
        {"token": f"token_id:{tid}", "logprob": logprob, "bytes": None}
        if shape == "A"
        else {"token_id": tid, "logprob": logprob, "rank": 1}
    )
    if top is not None:
        e["top_logprobs"] = [entry(c, lp, None, shape) for c, lp in top]
    return e


def entries(ids: list[int], shape: str = "B", cands: list[int] | None = None) -> list[Any]:
    """Entries for `ids`: logprob -0.5 - i/10, candidates = the sampled id, then `cands`."""
    return [
        entry(
            t,
            -0.5 - i / 10,
            [(t, -0.5 - i / 10)] + [(c, -3.0 - k) for k, c in enumerate(cands or [])],
            shape,
        )
        for i, t in enumerate(ids)
    ]


def lp_chunk(
    rid: str,
    seq: int,
    ids: list[int],
    content: list[Any] | None,
    finish: str | None = None,
    index: int = 0,
    **top: Any,
) -> dict[str, Any]:
    rec = chunk(rid, seq, ids, finish, index=index, **top)
    rec["generate_chunk"]["choices"][0]["logprobs"] = {"content": content}
    return rec


def ids_of(tok: Tokenizer, text: str) -> list[int]:
    return list(tok.encode(text, add_special_tokens=False).ids)


def chat_content(run: Run, index: int = 0) -> list[dict[str, Any]]:
    """Every chat logprob entry streamed for one choice, in order."""
    got: list[dict[str, Any]] = []
    for v in run.values("chunk"):
        for c in v["choices"]:
            if c["index"] == index and c["logprobs"] is not None:
                got += c["logprobs"]["content"]
    return got


def completion_lp(run: Run, index: int = 0) -> dict[str, list[Any]]:
    """The streamed completion logprobs of one choice, concatenated."""
    got: dict[str, list[Any]] = {
        "text_offset": [],
        "token_logprobs": [],
        "tokens": [],
        "top_logprobs": [],
    }
    for v in run.values("chunk"):
        for c in v["choices"]:
            if c["index"] == index and c["logprobs"] is not None:
                for k in got:
                    got[k] += c["logprobs"][k]
    return got


def errors(run: Run) -> list[dict[str, Any]]:
    return [v["error"] for v in run.values("error")]


@pytest.fixture
def reg(deepseek: Tokenizer) -> Registry:
    return registry(deepseek, name="deepseek-v4", max_model_len=64, max_logprobs=5)


@pytest.fixture
def breg(bytes_tok: Tokenizer) -> Registry:
    return registry(bytes_tok, name="render-model", max_model_len=128, max_logprobs=20)


CHAT_LP = {"logprobs": True, "top_logprobs": 5}
