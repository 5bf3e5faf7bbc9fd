"""StepFun Step-3 (`step3` reasoning and tools) on the Qwen3 vocabulary with Step-3's
markers (`tests/support/vocab/synthetic_families.py`). vLLM 0.33.0's own answers are in
vllm_answers/step3.jsonl (test_vllm_answers.py); these are the rules behind them, each
checked whole and in every chunking."""

from __future__ import annotations

from typing import Any

import pytest
from tokenizers import Tokenizer

from tests.core.parsers.shared.harness import expect, parser, request, tool
from tests.support.vocab.synthetic_families import step3_tokenizer

TOOLS = [
    tool("get_weather", city="string", days="integer", include_hourly="boolean"),
    tool("get_current_date"),
]
BEGIN, END = "<｜tool_calls_begin｜>", "<｜tool_calls_end｜>"


def call(name: str, **params: str) -> str:
    body = "".join(
        f'<steptml:parameter name="{k}">{v}</steptml:parameter>' for k, v in params.items()
    )
    return (
        f'<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="{name}">{body}'
        "</steptml:invoke><｜tool_call_end｜>"
    )


# (text, request, reasoning, content, calls)
CASES: list[tuple[str, dict[str, Any], str | None, str | None, list[Any]]] = [
    # Everything before the first </think> is reasoning, as written; no </think>: all of it.
    ("<think>I think.</think>Hello.", {}, "<think>I think.", "Hello.", []),
    ("\nR\n</think>\n\nC</think>D", {}, "\nR\n", "\n\nC</think>D", []),
    ("still thinking", {}, "still thinking", None, []),
    ("R</think>C", {"include_reasoning": False}, None, "C", []),
    # Values stripped and typed by the schema; a value that is no integer stays text.
    ("R</think>" + BEGIN + call("get_weather", city=" \nNew York\n ", days="3",
     include_hourly="true") + call("get_current_date") + END, {"tools": TOOLS}, "R", None,
     [("get_weather", {"city": "New York", "days": 3, "include_hourly": True}),
      ("get_current_date", {})]),
    ("R</think>" + BEGIN + call("get_weather", city="P", days="three") + END,
     {"tools": TOOLS}, "R", None, [("get_weather", {"city": "P", "days": "three"})]),
    # Text around the block is content.
    ("R</think>A " + BEGIN + call("get_weather", city="P") + END + " B", {"tools": TOOLS},
     "R", "A  B", [("get_weather", {"city": "P"})]),
    ("R</think>Sure. " + BEGIN + call("get_weather", city="P") + END,
     {"tools": TOOLS, "tool_choice": "none"}, "R", "Sure. ", []),
]  # fmt: skip


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return step3_tokenizer()


@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_step3(tok: Tokenizer, case: tuple[Any, ...]) -> None:
    text, req, reasoning, content, calls = case
    p = parser(tok, "step3", "step3", req=request(**req))
    expect(p, text, reasoning, content, calls)


def test_step3_long_trailing_whitespace_is_sent_past_the_hold() -> None:
    """A value's trailing whitespace is held (it may be stripped) only up to
    params.STRIP_HOLD_MAX characters: past that it is value text, so the state stays
    bounded; whole and streamed agree."""
    tok = step3_tokenizer()
    ws = " " * 300
    text = "R</think>" + BEGIN + call("get_weather", city="P" + ws + "Q") + END
    p = parser(tok, "step3", "step3", req=request(tools=TOOLS))
    expect(p, text, "R", None, [("get_weather", {"city": "P" + ws + "Q"})])
