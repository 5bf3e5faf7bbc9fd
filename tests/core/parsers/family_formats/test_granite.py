"""IBM Granite 3.x (`granite` reasoning and tools, `granite-20b-fc`) on the Qwen3 vocabulary
with Granite's markers (`tests/support/vocab/synthetic_families.py`). vLLM 0.33.0's own answers for
these parsers are in vllm_answers/granite*.jsonl (test_vllm_answers.py); these are the rules behind
them, each checked whole and in every chunking."""

from __future__ import annotations

from typing import Any

import pytest
from tokenizers import Tokenizer

from tests.core.parsers.shared.harness import expect, parser, request, tool
from tests.support.vocab.synthetic_families import granite_tokenizer

TOOLS = [tool("get_weather", city="string", days="integer"), tool("get_current_date")]
WEATHER = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
PARIS = ("get_weather", {"city": "Paris"})
DATE = ("get_current_date", {})

# (reasoning parser, tool parser, text, request, reasoning, content, calls)
CASES: list[tuple[str | None, str, str, dict[str, Any], str | None, str | None, list[Any]]] = [
    # The phrases split the answer; both spellings, nothing stripped.
    ("granite", "granite", "Here is my thought process:\nA.\nHere is my response:\nB.", {},
     "\nA.\n", "\nB.", []),
    ("granite", "granite", "Here's my thought process: a Here's my response: b", {}, " a ",
     " b", []),
    # Only the first block is reasoning: later phrases are the answer's text.
    ("granite", "granite", "Here is my thought process: a Here is my response: b Here is my "
     "thought process: c", {}, " a ", " b Here is my thought process: c", []),
    # A response phrase with no thought before it is text.
    ("granite", "granite", "Here is my response: Hi", {}, None, "Here is my response: Hi", []),
    # A thought the model never answered stays reasoning (as vLLM streams it).
    ("granite", "granite", "Here is my thought process: hmm", {}, " hmm", None, []),
    ("granite", "granite", "Here is my thought process: a Here is my response: b", {
        "include_reasoning": False}, None, " b", []),
    # Calls: 3.0's token and 3.1's text marker; several per list; a second list.
    ("granite", "granite", "<|tool_call|>[" + WEATHER + "]", {"tools": TOOLS}, None, None,
     [PARIS]),
    ("granite", "granite", "<tool_call>[" + WEATHER + ', {"name": "get_current_date", '
     '"arguments": {}}]', {"tools": TOOLS}, None, None, [PARIS, DATE]),
    ("granite", "granite", "<|tool_call|>[" + WEATHER + "]<|tool_call|>[" + WEATHER + "]",
     {"tools": TOOLS}, None, None, [PARIS, PARIS]),
    # What follows the list is not content; what precedes it is.
    ("granite", "granite", "Checking. <|tool_call|>[" + WEATHER + "] done", {"tools": TOOLS},
     None, "Checking. ", [PARIS]),
    ("granite", "granite", "Here is my thought process: t Here is my response: <|tool_call|>["
     + WEATHER + "]", {"tools": TOOLS}, " t ", None, [PARIS]),
    # No list after the marker: the text is given back (without the special token).
    ("granite", "granite", "<|tool_call|>{invalid}", {"tools": TOOLS}, None, "{invalid}", []),
    # tool_choice none: the list is parsed and dropped.
    ("granite", "granite", "Sure. <|tool_call|>[" + WEATHER + "]", {"tools": TOOLS,
     "tool_choice": "none"}, None, "Sure. ", []),
    # granite-20b-functioncalling: one object per marker, the text after it ignored.
    (None, "granite-20b-fc", "<function_call> " + WEATHER + " ok\n<function_call> "
     '{"name": "get_current_date", "arguments": {}}', {"tools": TOOLS}, None, None,
     [PARIS, DATE]),
    (None, "granite-20b-fc", "Sure. <function_call>" + WEATHER, {"tools": TOOLS}, None,
     "Sure. ", [PARIS]),
    (None, "granite-20b-fc", "a <function_ b", {"tools": TOOLS}, None, "a <function_ b", []),
]  # fmt: skip


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return granite_tokenizer()


@pytest.mark.parametrize("case", CASES, ids=[f"{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_granite(tok: Tokenizer, case: tuple[Any, ...]) -> None:
    reasoning_parser, tool_parser, text, req, reasoning, content, calls = case
    p = parser(tok, reasoning_parser, tool_parser, req=request(**req))
    expect(p, text, reasoning, content, calls)


def test_granite_cut_call_closes_its_arguments(tok: Tokenizer) -> None:
    """A list cut inside a value (`length`): the call goes out with its arguments closed
    where the output stopped, streamed and whole (vLLM's whole response sends the text as
    far as written, which is no JSON: differences.md unclosed-value)."""
    text = '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Par'
    p = parser(tok, "granite", "granite", req=request(tools=TOOLS))
    expect(p, text, None, None, [("get_weather", {"city": "Par"})])
