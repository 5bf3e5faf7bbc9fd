"""Tencent Hunyuan A13B (`hunyuan_a13b` reasoning and tools) on the real Qwen 2.5
vocabulary (A13B's markers are text). vLLM 0.33.0's own answers are in
vllm_answers/hunyuan_a13b.jsonl (test_vllm_answers.py); these are the rules behind them,
each checked whole and in every chunking."""

from __future__ import annotations

from typing import Any

import pytest
from tokenizers import Tokenizer

from tests.core.parsers.shared.harness import expect, parser, request, tool
from tests.support.vocab.synthetic_families import olmo3_tokenizer

TOOLS = [tool("get_weather", city="string"), tool("get_current_date")]
CALLS = '<tool_calls>[{"name": "get_weather", "arguments": {"city": "Paris"}}]</tool_calls>'
PARIS = ("get_weather", {"city": "Paris"})

# (text, request, reasoning, content, calls)
CASES: list[tuple[str, dict[str, Any], str | None, str | None, list[Any]]] = [
    ("<think>\nR\n</think>\n<answer>\nC\n</answer>", {}, "R", "C", []),
    ("<think>\na\n\nb\n</think>\n<answer>\nc\n\nd\n</answer>\nafter", {}, "a\n\nb", "c\n\nd",
     []),
    ("C\n</answer>", {}, None, "C", []),
    ("Hello there.", {}, None, "Hello there.", []),
    # Only the first block is reasoning.
    ("<think>\nR\n</think>\n<answer>\nC <think>\nS\n</think>\n<answer>\n\n</answer>", {},
     "R", "C <think>\nS\n</think>\n<answer>\n", []),
    ("<think>\nR\n</think>\n<answer>\nC\n</answer>", {"include_reasoning": False}, None, "C",
     []),
    # Calls: text before them is content.
    ("<think>\nR\n</think>\n<answer>\n" + CALLS + "\n</answer>", {"tools": TOOLS}, "R", None,
     [PARIS]),
    ("<think>\nR\n</think>\n<answer>\nChecking. " + CALLS + "\n</answer>", {"tools": TOOLS},
     "R", "Checking. ", [PARIS]),
    (CALLS, {"tools": TOOLS}, None, None, [PARIS]),
    ("<think>\nR\n</think>\n<answer>\nSure. " + CALLS + "\n</answer>",
     {"tools": TOOLS, "tool_choice": "none"}, "R", "Sure. ", []),
]  # fmt: skip


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return olmo3_tokenizer()


@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_hunyuan_a13b(tok: Tokenizer, case: tuple[Any, ...]) -> None:
    text, req, reasoning, content, calls = case
    p = parser(tok, "hunyuan_a13b", "hunyuan_a13b", req=request(**req))
    expect(p, text, reasoning, content, calls)
