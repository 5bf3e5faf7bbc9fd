"""GLM-4.5 … 5.x (`glm45`, `glm47`; vLLM 0.33.0 vllm/parser/glm47_moe.py) on the real GLM-4.7
tokenizer, where every marker is one added token.

Expected values are vLLM 0.33.0's answers for the same texts (its render server with
`--reasoning-parser glm45 --tool-call-parser glm45`, and the cases of its
tests/tool_parsers/test_glm4_moe_tool_parser.py and test_glm47_moe_tool_parser.py).
Each case runs whole and streamed in 1-token, 3-token, one-record and random chunks.
Where vLLM's whole and streamed answers disagree, `deviation` says which one we give.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from tokenizers import Tokenizer

from tests.core.parsers.shared.harness import Parser, expect, parser, request, tool
from tests.support.vocab.offline_tokenizers import offline_tokenizer

TOOLS = [
    tool("get_weather", city="string", days="integer", hourly="boolean"),
    tool("get_current_date"),
]
THINKING = "<|assistant|><think>"  # the end of a rendered GLM prompt, thinking on
NOT_THINKING = "<|assistant|></think>"


@dataclass(frozen=True)
class Case:
    id: str
    text: str
    reasoning: str | None
    content: str | None
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    req: dict[str, Any] = field(default_factory=lambda: {"tools": TOOLS})
    prompt: str = THINKING
    deviation: str = ""


WEATHER = (
    "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>  Beijing  </arg_value>\n"
    "<arg_key>days</arg_key>\n<arg_value>5</arg_value>\n<arg_key>hourly</arg_key>\n"
    "<arg_value>true</arg_value>\n</tool_call>"
)
CITY = "<tool_call>get_weather<arg_key>city</arg_key><arg_value>{}</arg_value></tool_call>"
DATE = "<tool_call>get_current_date</tool_call>"

CASES = [
    Case("plain", "Let me think.\n\n</think>Hello 你好 😀", "Let me think.", "Hello 你好 😀",
         req={}),
    Case("thinking-off", "Hello <think>x</think> there", None, "Hello <think>x</think> there",
         req={"chat_template_kwargs": {"enable_thinking": False}}, prompt=NOT_THINKING),
    Case("zero-arg", "Hm.</think>" + DATE, "Hm.", None, (("get_current_date", {}),)),
    Case("zero-arg-newline", "Hm.</think><tool_call>get_current_date\n</tool_call>", "Hm.",
         None, (("get_current_date", {}),)),
    Case("typed-verbatim", "Hm.</think>Checking." + WEATHER, "Hm.", "Checking.",
         (("get_weather", {"city": "  Beijing  ", "days": 5, "hourly": True}),)),
    Case("two", "Hm.</think>" + CITY.format("Beijing") + "\n" + CITY.format("Shanghai"),
         "Hm.", None,
         (("get_weather", {"city": "Beijing"}), ("get_weather", {"city": "Shanghai"}))),
    Case("unknown-name-dropped",
         "Hm.</think><tool_call>img_gen<arg_key>p</arg_key><arg_value>cat</arg_value></tool_call>"
         + DATE, "Hm.", None, (("get_current_date", {}),),
         deviation="vLLM's stream also sends an empty call for the dropped name"),
    Case("call-ends-reasoning", "Need weather." + CITY.format("Paris"), "Need weather.", None,
         (("get_weather", {"city": "Paris"}),)),
    Case("whitespace-before", "Hm.</think>  \n  " + DATE, "Hm.", None,
         (("get_current_date", {}),)),
    Case("text-between-calls", "Hm.</think>A." + DATE + "\n\nB then." + DATE, "Hm.",
         "A.\n\nB then.", (("get_current_date", {}),) * 2,
         deviation="vLLM's whole response drops the text between calls; its stream keeps it"),
    Case("unclosed-value",
         "Hm.</think><tool_call>get_weather<arg_key>city</arg_key><arg_value>Beijing", "Hm.",
         None, (("get_weather", {"city": "Beijing"}),),
         deviation='vLLM: whole drops the value ({}), stream sends invalid JSON {"city": "Beijing'),
    Case("value-with-tags", "Hm.</think>" + CITY.format("a <b> c"), "Hm.", None,
         (("get_weather", {"city": "a <b> c"}),)),
    Case("tool-choice-none", "Hm.</think>Sure." + DATE, "Hm.", "Sure.",
         req={"tools": TOOLS, "tool_choice": "none"}),
    Case("no-tools", "Hm.</think>Sure." + DATE, "Hm.", "Sure.", req={}),
    Case("marker-then-prose", "Hm.</think>write <tool_call> here", "Hm.", "write "),
    Case("integer-not-a-number",
         "Hm.</think><tool_call>get_weather<arg_key>days</arg_key><arg_value>five</arg_value>"
         "</tool_call>", "Hm.", None, (("get_weather", {"days": "five"}),)),
    Case("undeclared-parameter-is-a-string",
         "Hm.</think><tool_call>get_weather<arg_key>extra</arg_key><arg_value>42</arg_value>"
         "</tool_call>", "Hm.", None, (("get_weather", {"extra": "42"}),)),
    # vLLM's tests/tool_parsers/test_glm4_moe_tool_parser.py
    Case("vllm-content-before",
         "</think>I'll help you check the weather. <tool_call>get_weather\n"
         "    <arg_key>city</arg_key>\n    <arg_value>Seattle</arg_value>\n    </tool_call>",
         None, "I'll help you check the weather. ", (("get_weather", {"city": "Seattle"}),)),
    Case("vllm-thinking-tags", "<think>I want to get the weather.</think>\n\nI will help.\n"
         "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n"
         "</tool_call>", "I want to get the weather.", "\n\nI will help.\n",
         (("get_weather", {"city": "Beijing"}),), prompt="<|assistant|>"),
]  # fmt: skip


@pytest.fixture(scope="module")
def glm() -> Tokenizer:
    return offline_tokenizer("glm-4.7-flash")


def _parser(tok: Tokenizer, case: Case, name: str) -> Parser:
    prompt = list(tok.encode(case.prompt, add_special_tokens=False).ids)
    return parser(tok, name, name, req=request(**case.req), prompt=prompt)


def test_markers_are_single_tokens(glm: Tokenizer) -> None:
    markers = ("<think>", "</think>", "<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>",
               "<arg_value>", "</arg_value>")  # fmt: skip
    assert all(len(glm.encode(m, add_special_tokens=False).ids) == 1 for m in markers)


@pytest.mark.parametrize("name", ["glm45", "glm47"])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_glm(glm: Tokenizer, case: Case, name: str) -> None:
    p = _parser(glm, case, name)
    expect(p, case.text, case.reasoning, case.content, case.calls)


def test_markers_on_text_alone(glm: Tokenizer) -> None:
    """Without token ids (text deltas of a few characters) every marker is found on text."""
    case = next(c for c in CASES if c.id == "typed-verbatim")
    p = _parser(glm, case, "glm47")
    for n in (1, 5, 7):
        got = p.stream_chars(case.text, n)
        assert (got.reasoning, got.content) == (case.reasoning, case.content), n
        assert [(c, json.loads(a)) for c, a in got.calls] == list(case.calls), n


def test_values_that_miss_their_type_fall_back_to_json(glm: Tokenizer) -> None:
    """vLLM 0.33 coerces by the schema and, when that fails, takes the value as JSON if
    it parses (found by `make parity`): `2.5` for an integer, `[1]` for a boolean."""
    schema = tool("book", nights="integer", breakfast="boolean", limit="integer", city="string")
    text = (
        "Hm.</think><tool_call>book<arg_key>nights</arg_key><arg_value>2.5</arg_value>"
        "<arg_key>breakfast</arg_key><arg_value>[1]</arg_value><arg_key>limit</arg_key>"
        "<arg_value>true</arg_value><arg_key>city</arg_key><arg_value>7</arg_value></tool_call>"
    )
    prompt = list(glm.encode(THINKING, add_special_tokens=False).ids)
    p = parser(glm, "glm47", "glm47", req=request(tools=[schema]), prompt=prompt)
    want = {"nights": 2.5, "breakfast": [1], "limit": True, "city": "7"}
    for how, got in [("whole", p.whole(text)), *p.all_streams(text)]:
        assert [(n, json.loads(a)) for n, a in got.calls] == [("book", want)], how


def test_forced_choices_never_take_the_json_path(glm: Tokenizer) -> None:
    """vLLM's GLM parser parses its own format for "required" and named choices even
    with strict tool calling off: bare JSON is then content (found by `make parity`)."""
    text = '[{"name": "get_weather", "parameters": {"city": "Rome"}}]'
    prompt = list(glm.encode(NOT_THINKING, add_special_tokens=False).ids)
    req = request(tools=TOOLS, tool_choice="required")
    p = parser(glm, "glm47", "glm47", req=req, prompt=prompt, strict=False)
    got = p.whole(text)
    assert (got.content, got.calls) == (text, [])
