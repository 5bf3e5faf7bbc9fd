"""Every supported format by the name a model's registry entry gives it
(`reasoning_parser`, `tool_parser`; docs/reference/parsers.md): the one place to see which names
exist and which of them are aliases.

A format is a small configuration of the one engine (grammar.py says what one holds);
the configurations are in reasoning_formats.py, json_formats.py and markup_formats.py.
Markers are literal strings; `spec.compile_parser` finds which of them are single added
tokens of the model's tokenizer and matches those by token id, the rest on text.
Formats follow vLLM 0.33.0's parsers (each family's tables name its vLLM file).
"""

from __future__ import annotations

from worker.core.parsers.families.block_formats import BLOCK_REASONING_FORMATS, BLOCK_TOOL_FORMATS
from worker.core.parsers.families.cohere_formats import (
    REASONING_FORMATS as COHERE_REASONING_FORMATS,
)
from worker.core.parsers.families.cohere_formats import TOOL_FORMATS as COHERE_TOOL_FORMATS
from worker.core.parsers.families.family_formats import (
    FAMILY_REASONING_FORMATS,
    FAMILY_TOOL_FORMATS,
)
from worker.core.parsers.families.frames import HARMONY
from worker.core.parsers.families.json_formats import (
    DEEPSEEK_V3,
    DEEPSEEK_V31,
    HERMES,
    KIMI_K2,
    LLAMA3_JSON,
    MISTRAL_PRE_V11,
    MISTRAL_V11,
    PYTHONIC,
    hermes,
)
from worker.core.parsers.families.longtail_formats import (
    LONGTAIL_REASONING_FORMATS,
    LONGTAIL_TOOL_FORMATS,
)
from worker.core.parsers.families.markup_formats import (
    FUNCTIONGEMMA,
    GEMMA4,
    GLM45,
    KIMI_K3,
    MINIMAX_M2,
    MINIMAX_M3,
    POOLSIDE_V1,
    dsml,
    qwen3_xml,
)
from worker.core.parsers.families.minicpm_formats import (
    MINICPM_REASONING_FORMATS,
    MINICPM_TOOL_FORMATS,
)
from worker.core.parsers.families.reasoning_formats import REASONING_FORMATS
from worker.core.parsers.families.response_template import PLACEHOLDER_REASONING, PLACEHOLDER_TOOLS
from worker.core.parsers.language.grammar import FORCED_JSON, FORCED_NATIVE, ToolFormat
from worker.core.parsers.language.markers import DSML_V4_VARIANTS
from worker.core.parsers.language.state import CallVerbatim

_QWEN3_CODER = qwen3_xml("qwen3_coder")

TOOL_FORMATS: dict[str, ToolFormat] = {
    "deepseek_v4": dsml("deepseek_v4", "tool_calls", variants=DSML_V4_VARIANTS),
    "deepseek_v41": dsml("deepseek_v41", "calls", space=" "),
    "deepseek_v32": dsml("deepseek_v32", "function_calls"),
    "deepseek_v31": DEEPSEEK_V31,
    "deepseek_v3": DEEPSEEK_V3,
    "qwen3_coder": _QWEN3_CODER,
    "qwen3_xml": qwen3_xml("qwen3_xml"),
    # The Qwen3-grammar relatives (vllm/parser/seed_oss.py, step3p5.py, mimo.py, …).
    "seed_oss": qwen3_xml("seed_oss", "<seed:tool_call>", "</seed:tool_call>"),
    "step3p5": _QWEN3_CODER,
    "step5": qwen3_xml("step5", keep_whitespace=True),
    "mimo": qwen3_xml("mimo", value_newlines=False),
    "hermes": HERMES,
    "qwen3_json": HERMES,  # vLLM: the same class
    "longcat": hermes("longcat", "<longcat_tool_call>", "</longcat_tool_call>"),
    # Granite 4.0: hermes' tags, the text around calls kept; no structural tag in vLLM.
    "granite4": hermes("granite4", text_after=True, forced=FORCED_JSON),
    "kimi_k2": KIMI_K2,
    "kimi_k3": KIMI_K3,
    # The tokenizer decides between the two layouts (`tool_format`).
    "mistral": MISTRAL_V11,
    "llama3_json": LLAMA3_JSON,
    "llama4_json": LLAMA3_JSON,
    "pythonic": PYTHONIC,
    "llama4_pythonic": PYTHONIC,
    "glm45": GLM45,
    "glm47": GLM45,
    "ling3": GLM45,
    "poolside_v1": POOLSIDE_V1,
    "minimax_m2": MINIMAX_M2,
    "minimax_m3": MINIMAX_M3,
    "gemma4": GEMMA4,
    "functiongemma": FUNCTIONGEMMA,
    # vllm/parser/harmony.py: a call is a message addressed to `functions.NAME`; its body is
    # the arguments as written. "required" and named choices are constrained to the same
    # messages.
    "openai": ToolFormat(
        "openai", HARMONY.table(), CallVerbatim, forced=FORCED_NATIVE, frames=HARMONY
    ),
}

# Typed blocks: Inkling, K2 Horizon (block_formats.py).
TOOL_FORMATS.update(BLOCK_TOOL_FORMATS)
REASONING_FORMATS.update(BLOCK_REASONING_FORMATS)
# Granite 3.x, OLMo 3, Step-3, Hunyuan,
# ERNIE 4.5 (family_formats.py).
TOOL_FORMATS.update(FAMILY_TOOL_FORMATS)
REASONING_FORMATS.update(FAMILY_REASONING_FORMATS)

# Cohere Command A (cohere_formats.py).
TOOL_FORMATS.update(COHERE_TOOL_FORMATS)
REASONING_FORMATS.update(COHERE_REASONING_FORMATS)
# The long tail (longtail_formats.py).
TOOL_FORMATS.update(LONGTAIL_TOOL_FORMATS)
REASONING_FORMATS.update(LONGTAIL_REASONING_FORMATS)
# `hf` / `beam` are built from the model's response template
# (response_template.py); these entries only make the names known.
TOOL_FORMATS.update(PLACEHOLDER_TOOLS)
REASONING_FORMATS.update(PLACEHOLDER_REASONING)
# MiniCPM-V's reasoning, MiniCPM5's tools (minicpm_formats.py).
TOOL_FORMATS.update(MINICPM_TOOL_FORMATS)
REASONING_FORMATS.update(MINICPM_REASONING_FORMATS)


def tool_format(name: str, added_tokens: set[str]) -> ToolFormat:
    """The format for a registry name; mistral's layout depends on the tokenizer (v11+
    tokenizers have an `[ARGS]` token)."""
    fmt = TOOL_FORMATS[name]
    if fmt is MISTRAL_V11 and "[ARGS]" not in added_tokens:
        return MISTRAL_PRE_V11
    return fmt


__all__ = ["REASONING_FORMATS", "TOOL_FORMATS", "tool_format"]
