"""DeepSeek V4.1 (`deepseek_v41`; vLLM 0.33.0 vllm/parser/deepseek_v41.py): V4's grammar
with spaced DSML (`<｜DSML｜ calls>`, `<｜DSML｜ invoke name=…>`, `<｜DSML｜ parameter name=…>`),
on the DeepSeek V4 tokenizer, where those spellings are ordinary tokens. Expected values are
vLLM 0.33.0's answers for the same texts (its render server with `deepseek_v41` parsers),
checked whole and in four chunkings."""

from __future__ import annotations

from typing import Any

import pytest
from tokenizers import Tokenizer

from tests.core.parsers.shared.harness import expect, parser, request, tool

D = "｜DSML｜ "
CALL = (
    f'<{D}invoke name="get_weather">\n<{D}parameter name="location" string="true">杭州'
    f'</{D}parameter>\n<{D}parameter name="days" string="false">5</{D}parameter>\n'
    f"</{D}invoke>\n"
)
ARGS = {"location": "杭州", "days": 5}
TOOLS = [tool("get_weather", location="string", days="integer")]

CASES: list[tuple[str, str, dict[str, Any], str | None, str | None, list[Any]]] = [
    ("call", f"plan</think>Sure.\n\n<{D}calls>\n{CALL}</{D}calls>", {"tools": TOOLS},
     "plan", "Sure.\n\n", [("get_weather", ARGS)]),
    ("call-ends-reasoning", f"plan\n\n<{D}calls>\n{CALL}</{D}calls>", {"tools": TOOLS},
     "plan", None, [("get_weather", ARGS)]),
    ("two-calls-text-after-dropped", f"plan</think><{D}calls>\n{CALL}{CALL}</{D}calls>after",
     {"tools": TOOLS}, "plan", None, [("get_weather", ARGS)] * 2),
    ("missing-flag-is-json", f'plan</think><{D}calls>\n<{D}invoke name="get_weather">\n'
     f'<{D}parameter name="days">7</{D}parameter>\n</{D}invoke>\n</{D}calls>',
     {"tools": TOOLS}, "plan", None, [("get_weather", {"days": 7})]),
    ("tool-choice-none", f"plan</think>Sure.<{D}calls>\n{CALL}</{D}calls>",
     {"tools": TOOLS, "tool_choice": "none"}, "plan", "Sure.", []),
    ("v4-spelling-is-text", "plan</think>x <｜DSML｜tool_calls>\n</｜DSML｜tool_calls>",
     {"tools": TOOLS}, "plan", "x <｜DSML｜tool_calls>\n</｜DSML｜tool_calls>", []),
    ("trailing-reasoning-whitespace", "Thinking hard.  \n</think>Answer.", {},
     "Thinking hard.", "Answer.", []),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_deepseek_v41(deepseek: Tokenizer, case: tuple[Any, ...]) -> None:
    _, text, req, reasoning, content, calls = case
    prompt = list(deepseek.encode("<｜Assistant｜><think>", add_special_tokens=False).ids)
    p = parser(deepseek, "deepseek_v41", "deepseek_v41", req=request(**req), prompt=prompt)
    expect(p, text, reasoning, content, calls)


def test_reasoning_effort_none_starts_in_content(deepseek: Tokenizer) -> None:
    """`reasoning_effort: "none"` (V4 and V4.1 chat mode): the template closes the
    reasoning in the prompt; a think block the model still writes is reasoning."""
    prompt = list(deepseek.encode("<｜Assistant｜></think>", add_special_tokens=False).ids)
    req = request(chat_template_kwargs={"reasoning_effort": "none"})
    for name in ("deepseek_v4", "deepseek_v41"):
        p = parser(deepseek, name, name, req=req, prompt=prompt)
        got = p.whole("Hello <think>x</think>")
        assert (got.reasoning, got.content) == ("x", "Hello "), name
        p = parser(deepseek, name, name, req=req)  # no prompt: the kwargs decide
        assert p.whole("Hello").content == "Hello", name
