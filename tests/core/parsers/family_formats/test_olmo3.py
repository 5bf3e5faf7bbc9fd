"""OLMo 3 (`olmo3` reasoning and tools) on the real Qwen 2.5 vocabulary, where, as in OLMo
3's, `<think>` and `<function_calls>` are ordinary tokens. vLLM 0.33.0's own answers are in
vllm_answers/olmo3.jsonl (test_vllm_answers.py); these are the rules behind them, each
checked whole and in every chunking."""

from __future__ import annotations

from typing import Any

import pytest
from tokenizers import Tokenizer

from tests.core.parsers.shared.harness import expect, parser, request, tool
from tests.support.vocab.synthetic_families import olmo3_tokenizer

TOOLS = [tool("get_weather", city="string", days="integer"), tool("get_current_date")]
CALL = "<function_calls>get_weather(city='Paris')</function_calls>"
PARIS = ("get_weather", {"city": "Paris"})

# (text, request, reasoning, content, calls)
CASES: list[tuple[str, dict[str, Any], str | None, str | None, list[Any]]] = [
    # The template may open <think>: reasoning until the first </think>, nothing stripped.
    ("I think.</think>Hello.", {}, "I think.", "Hello.", []),
    ("<think>\nR\n</think>\n\nC\n", {}, "\nR\n", "\n\nC\n", []),
    # Only the first </think> counts: later tags are the answer's text.
    ("<think>R</think>C<think>S</think>D", {}, "R", "C<think>S</think>D", []),
    ("<think></think>C", {}, None, "C", []),
    ("<think>R</think>C", {"include_reasoning": False}, None, "C", []),
    # Calls: one per line or comma-separated; JSON's true / null are values too.
    ("R</think>" + CALL, {"tools": TOOLS}, "R", None, [PARIS]),
    ("R</think><function_calls>get_weather(city=\"A\", days=3)\nget_current_date()"
     "</function_calls>", {"tools": TOOLS}, "R", None,
     [("get_weather", {"city": "A", "days": 3}), ("get_current_date", {})]),
    ("R</think><function_calls>get_weather(city='A', include_hourly=true, days=null), "
     "get_weather(city='B', include_hourly=False)</function_calls>", {"tools": TOOLS}, "R",
     None, [("get_weather", {"city": "A", "include_hourly": True, "days": None}),
            ("get_weather", {"city": "B", "include_hourly": False})]),
    # A block ends the reasoning it opens in (a call without thinking).
    (CALL, {"tools": TOOLS}, None, None, [PARIS]),
    # tool_choice none: the block is parsed and dropped.
    ("R</think>Sure. " + CALL, {"tools": TOOLS, "tool_choice": "none"}, "R", "Sure. ", []),
    # A call line without the block is text.
    ("R</think>get_weather(city='Paris')", {"tools": TOOLS}, "R",
     "get_weather(city='Paris')", []),
]  # fmt: skip


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return olmo3_tokenizer()


@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_olmo3(tok: Tokenizer, case: tuple[Any, ...]) -> None:
    text, req, reasoning, content, calls = case
    p = parser(tok, "olmo3", "olmo3", req=request(**req))
    expect(p, text, reasoning, content, calls)


def test_olmo3_cut_block_makes_its_calls(tok: Tokenizer) -> None:
    """A block cut inside a value (`length`): the call goes out with the value as far as
    written, streamed and whole (vLLM returns the raw markup as content: differences.md
    unclosed-value)."""
    p = parser(tok, "olmo3", "olmo3", req=request(tools=TOOLS))
    expect(p, "R</think><function_calls>get_weather(city='Par", "R", None,
           [("get_weather", {"city": "Par"})])  # fmt: skip
