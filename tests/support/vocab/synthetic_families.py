"""Synthetic tokenizers for IBM Granite 3.x, OLMo 3, StepFun Step-3, Tencent Hunyuan and
Baidu ERNIE 4.5: none of their tokenizers is obtainable offline (no PyPI package ships
one), so each is a real base vocabulary with the family's markers added, built as
`tests/support/vocab/synthetic_tokenizers.py` builds its own (`_extend`: new, consecutive ids after
the base's; ordinary text encodes as the base model does).

| builder | base | markers (in id order) | special |
|---|---|---|---|
| `granite_tokenizer` | `qwen-3` | Granite 3.x role tokens and `<\\|tool_call\\|>` | all |
| `olmo3_tokenizer` | `qwen-2.5` | none: OLMo 3's markers are text | – |
| `step3_tokenizer` | `qwen-3` | Step-3's turn and tool-call tokens | all |
| `hy_tokenizer` | `qwen-2.5` | HY3 / HY4's think and tool-call tokens (no suffix) | all |
| `hy_suffix_tokenizer` | `qwen-2.5` | the same tokens with a checkpoint suffix | all |
| `ernie45_tokenizer` | `qwen-3` | sentence tokens, `<response>`, `</response>` | the first two |
"""

from __future__ import annotations

import functools

from tokenizers import Tokenizer

from tests.support.vocab.offline_tokenizers import offline_tokenizer
from tests.support.vocab.synthetic_tokenizers import _copy, _extend

# IBM Granite 3.0-3.2 (vLLM's `granite` reasoning and tool parsers, `granite-20b-fc`):
# turns are `<|start_of_role|>ROLE<|end_of_role|>…<|end_of_text|>`; Granite 3.0 opens its
# call list with the special token `<|tool_call|>`. Granite 3.1's `<tool_call>`, the
# reasoning phrases ("Here is my thought process:") and granite-20b-functioncalling's
# `<function_call>` are text (the Qwen3 base has `<tool_call>` as an added token: vLLM's
# granite parser matches it on text all the same).
GRANITE_MARKERS: tuple[str, ...] = (
    "<|start_of_role|>",
    "<|end_of_role|>",
    "<|end_of_text|>",
    "<|tool_call|>",
)


@functools.cache
def _granite() -> Tokenizer:
    return _extend(offline_tokenizer("qwen-3"), GRANITE_MARKERS)


def granite_tokenizer() -> Tokenizer:
    """Qwen3 vocabulary + `GRANITE_MARKERS` as special tokens, ids 151669-151672
    (`<|end_of_text|>` 151671, `<|tool_call|>` 151672)."""
    return _copy(_granite())


def olmo3_tokenizer() -> Tokenizer:
    """OLMo 3 writes `<think>`, `</think>` and `<function_calls>` with ordinary tokens and
    has ChatML's `<|im_start|>` / `<|im_end|>` / `<|endoftext|>`: the real Qwen 2.5
    vocabulary as shipped (it has those three and no think or call tokens), EOS
    `<|im_end|>` 151645."""
    return _copy(offline_tokenizer("qwen-2.5"))


# StepFun Step-3 (vLLM's `step3` parsers): turns `<|BOT|>ROLE\n…<|EOT|>`; the tool-call
# block's five full-width markers are special tokens (vLLM turns `skip_special_tokens`
# off for them); `</think>` must be one token (vLLM's parser looks its id up): the Qwen3
# base has it (151668, added, not special). `<steptml:…>` tags are text.
STEP3_MARKERS: tuple[str, ...] = (
    "<|BOT|>",
    "<|EOT|>",
    "<｜tool_calls_begin｜>",
    "<｜tool_calls_end｜>",
    "<｜tool_call_begin｜>",
    "<｜tool_call_end｜>",
    "<｜tool_sep｜>",
)


@functools.cache
def _step3() -> Tokenizer:
    return _extend(offline_tokenizer("qwen-3"), STEP3_MARKERS)


def step3_tokenizer() -> Tokenizer:
    """Qwen3 vocabulary + `STEP3_MARKERS` as special tokens, ids 151669-151675 (`<|EOT|>`
    151670)."""
    return _copy(_step3())


# Baidu ERNIE 4.5 (vLLM's `ernie45` parsers): `<|begin_of_sentence|>` opens a
# conversation and `<|end_of_sentence|>` ends a turn (special); the answer may be wrapped
# in `<response>` … `</response>`, tokens vLLM looks up by id (added, not special, as the
# Qwen3 base's `<think>` / `</think>` / `<tool_call>` / `</tool_call>` it reuses).
ERNIE45_SPECIAL: tuple[str, ...] = ("<|begin_of_sentence|>", "<|end_of_sentence|>")
ERNIE45_ADDED: tuple[str, ...] = ("<response>", "</response>")


@functools.cache
def _ernie45() -> Tokenizer:
    base = _extend(offline_tokenizer("qwen-3"), ERNIE45_SPECIAL)
    return _extend(base, ERNIE45_ADDED, special=False)


def ernie45_tokenizer() -> Tokenizer:
    """Qwen3 vocabulary + `ERNIE45_SPECIAL` (special, `<|end_of_sentence|>` 151670) and
    `ERNIE45_ADDED` (`<response>` 151671, `</response>` 151672)."""
    return _copy(_ernie45())


# Tencent HY3 / HY4 (vLLM's `hy_v3`, `hy_v4` parsers): think and tool-call tokens, special.
# Real checkpoints may append a suffix (`<tool_call:6124c78e>`); these have none. The Qwen
# 2.5 base already has `<tool_call>` / `</tool_call>` (added, not special): they are used
# as they are.
HY_MARKERS: tuple[str, ...] = (
    "<think>",
    "</think>",
    "<tool_calls>",
    "</tool_calls>",
    "<tool_sep>",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
)


@functools.cache
def _hy() -> Tokenizer:
    return _extend(offline_tokenizer("qwen-2.5"), HY_MARKERS)


def hy_tokenizer() -> Tokenizer:
    """Qwen 2.5 vocabulary (`<tool_call>` 151657, `</tool_call>` 151658, `<|im_end|>`
    151645) + `HY_MARKERS` as special tokens, ids 151665-151673."""
    return _copy(_hy())


# A checkpoint whose HY tags carry a suffix (its tokenizer_config.json says `token_suffix`);
# `<tool_call>` too, so none is the Qwen 2.5 base's.
HY_SUFFIX = ":6124c78e"
HY_SUFFIX_MARKERS: tuple[str, ...] = tuple(
    m[:-1] + HY_SUFFIX + ">" for m in (*HY_MARKERS, "<tool_call>", "</tool_call>")
)


@functools.cache
def _hy_suffix() -> Tokenizer:
    return _extend(offline_tokenizer("qwen-2.5"), HY_SUFFIX_MARKERS)


def hy_suffix_tokenizer() -> Tokenizer:
    """Qwen 2.5 vocabulary + `HY_SUFFIX_MARKERS` as special tokens, ids 151665-151675."""
    return _copy(_hy_suffix())
