"""Baidu ERNIE 4.5 (`ernie45` reasoning and tools) on the Qwen3 vocabulary with ERNIE's
`<response>` tokens (`tests/support/vocab/synthetic_families.py`). vLLM 0.33.0's own answers are in
vllm_answers/ernie45.jsonl (test_vllm_answers.py); these are the rules behind them, each
checked whole and in every chunking."""

from __future__ import annotations

from typing import Any

import pytest
from tokenizers import Tokenizer

from tests.core.parsers.shared.harness import expect, parser, request, tool
from tests.support.vocab.synthetic_families import ernie45_tokenizer

TOOLS = [tool("get_weather", city="string"), tool("get_current_date")]
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
PARIS = ("get_weather", {"city": "Paris"})

# (text, request, reasoning, content, calls)
CASES: list[tuple[str, dict[str, Any], str | None, str | None, list[Any]]] = [
    # Reasoning until the first </think>, as written; the answer as written after it…
    ("abc\n</think>\n\ndef", {}, "abc\n", "\n\ndef", []),
    ("<think>R</think>C</think>D", {}, "R", "C</think>D", []),
    ("still thinking", {}, "still thinking", None, []),
    # … or what its <response> wrapper holds.
    ("abc\n</think>\n\n<response>\ndef\n</response>\n", {}, "abc\n", "\ndef\n", []),
    ("R</think>\n<response>\nC\n</response>\n", {"include_reasoning": False}, None, "\nC\n",
     []),
    # Calls: text before them is content, after them not; inside the wrapper too.
    ("R\n</think>\n\n\n" + CALL, {"tools": TOOLS}, "R\n", None, [PARIS]),
    ("R</think>Checking." + CALL + "Done.", {"tools": TOOLS}, "R", "Checking.", [PARIS]),
    ("R</think>\n<response>\n" + CALL + "</response>\n", {"tools": TOOLS}, "R", None,
     [PARIS]),
    ("R</think>Sure. " + CALL, {"tools": TOOLS, "tool_choice": "none"}, "R", "Sure. ", []),
    # A call inside the reasoning is reasoning text.
    ("R" + CALL + "</think>C", {"tools": TOOLS}, "R" + CALL, "C", []),
]  # fmt: skip


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return ernie45_tokenizer()


@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_ernie45(tok: Tokenizer, case: tuple[Any, ...]) -> None:
    text, req, reasoning, content, calls = case
    p = parser(tok, "ernie45", "ernie45", req=request(**req))
    expect(p, text, reasoning, content, calls)
