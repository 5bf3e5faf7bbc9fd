"""Cohere Command A (`cohere_command3`, `cohere_command4`): our table entries against
`cohere_melody` 0.15.3, the library vLLM 0.33.0's parsers of those names hand the whole
output to (vLLM's own answers are in vllm_answers/cohere_command*.jsonl).

melody is the second oracle: for each text its `process_full_text` (what vLLM's whole
response returns) must be what we answer, whole and streamed in every chunking the
harness has; a seeded sweep of random texts over every marker, citation and call does
the same. Where we answer otherwise on purpose, the case says what and why
(docs/reference/differences.md).
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from cohere_melody import PyFilter, PyFilterOptions

from tests.core.parsers.shared.harness import Result, parser, request, tool
from tests.support.vocab.synthetic_cohere import cohere_tokenizer

TOK = cohere_tokenizer()
PRESETS = {"cohere_command3": "cmd3", "cohere_command4": "cmd4"}
TOOLS = [tool("get_weather", city="string", days="integer"), tool("f", a="integer"), tool("g")]

ST, ET = "<|START_THINKING|>", "<|END_THINKING|>"
SR, ER = "<|START_RESPONSE|>", "<|END_RESPONSE|>"
SA, EA = "<|START_ACTION|>", "<|END_ACTION|>"
W = '{"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Paris", "days": 3}}'
FG = (
    '[\n    {"tool_call_id": "0", "tool_name": "f", "parameters": {"a": 1}},\n'
    '    {"tool_call_id": "1", "tool_name": "g", "parameters": {"b": "x"}}\n]'
)

Answer = tuple[str | None, str | None, list[tuple[str, Any]]]


def _args(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def melody(name: str, text: str) -> Answer:
    """What vLLM's whole response says: melody's result, calls whose name was read."""
    f = PyFilter(getattr(PyFilterOptions(), PRESETS[name])())
    r = f.process_full_text(text)
    calls = [(c.name, _args(c.arguments)) for c in r.tool_calls]
    return r.reasoning, r.content, calls


def ours(name: str, text: str, tools: bool = True, **req: Any) -> list[tuple[str, Answer]]:
    p = parser(TOK, name, name, request(TOOLS if tools else None, **req))
    got: list[tuple[str, Result]] = [("whole", p.whole(text)), *p.all_streams(text)]
    return [(how, (r.reasoning, r.content, [(n, _args(a)) for n, a in r.calls])) for how, r in got]


def check(name: str, text: str, want: Answer | None = None) -> None:
    want = melody(name, text) if want is None else want
    for how, got in ours(name, text):
        assert got == want, (how, name, text)


SAME = [
    "Hello world",
    "  Hello  ",
    f"{ST} think a bit  {ET}  {SR}  Answer  {ER} tail",
    f"{SR}The <co>sky is blue</co: 0:[1,2]> today.{ER}",
    f"{ST}Doc <co>says</co: 0:[0]> rain.{ET}{SR}Rain.{ER}",
    "a<co> b </co: 0:[1]> c",
    "a <co>b</co: 0:[1] c",  # a closing tag never closed: the rest is in it
    "x <co>y</co: 0:[1]>",
    "x <co>",  # an opener never closed
    f"{ST}plan{ET}{SA}[\n    {W}\n]{EA}",
    f"{ST}plan{ET}{SA}{FG}{EA}",
    f"x {ET} y",
    f"{ST}{ET}  Answer",  # the left trim waits for the first text, here the answer's
    f"{ST}x  \n{ET}  Answer  \n",
    f"a {SR}b",
    f"{ER}zz{SR} y",
    f"Sure.{SA}[{W}]{EA} after",
    f"{SA}[{W}]{EA}{SR}done{ER}",
    f"{SA}[{W}]{EA}{SA}{FG}{EA}",  # a second block goes on counting
    SA + '[{"tool_call_id": "0", "tool_name": "f", "parameters": {"a": {"b": [1, "}"]}}}]' + EA,
    f"{ST}a{ET}{SR}b{ER}{ST}c{ET}{SR}d{ER}",
    f"{ST}思考。{ET}{SR}杭州 ☀️ é{ER}",
    "",
]


@pytest.mark.parametrize("name", sorted(PRESETS))
@pytest.mark.parametrize("text", SAME)
def test_as_melody(name: str, text: str) -> None:
    check(name, text)


def test_cmd4_starts_in_reasoning_and_knows_the_text_markers() -> None:
    text = "Thinking.<|END_THINKING|><|START_TEXT|>Answer.<|END_TEXT|> dropped"
    check("cohere_command4", text)
    assert melody("cohere_command4", text) == ("Thinking.", "Answer.", [])


# Where we answer otherwise: the text, and what we say instead of melody (`why`).
OTHERWISE: list[tuple[str, str, Answer, str]] = [
    (
        "cohere_command3",
        f'{SA}[{{"tool_call_id": "0", "tool_name": "g", "parameters": {{}}}}]{EA}',
        (None, None, [("g", {})]),
        "melody sends no argument text for an empty object: vLLM's arguments are '' (no JSON)",
    ),
    (
        "cohere_command3",
        f'{SA}[{{"tool_call_id": "0", "tool_name": "get_weather", "parameters": {{"city": "Tok',
        (None, None, [("get_weather", {"city": "Tok"})]),
        "cut arguments are closed where the output stopped (vLLM: the cut text)",
    ),
    (
        "cohere_command3",
        f'{SA}[{{"tool_call_id": "0", "tool_name": "get_wea',
        (None, None, []),
        "a name cut short is no call (vLLM: a call named '')",
    ),
    (
        "cohere_command3",
        "a </co: 0:[1]> b",
        (None, "a  b", []),
        "a citation's closing tag is markup even when no <co> opened it (vLLM: text)",
    ),
    (
        "cohere_command3",
        "a <co><co>b</co: 0:[1]> c",
        (None, "a b c", []),
        "every <co> is markup, a second one too (melody keeps it as text)",
    ),
    (
        "cohere_command3",
        f'{SA}[{{"tool_name": "f", "parameters": {{"a": 1}}}}]{EA}',
        (None, None, [("f", {"a": 1})]),
        "a call without its tool_call_id is a call (melody waits for the id first)",
    ),
]


@pytest.mark.parametrize(("name", "text", "want", "why"), OTHERWISE)
def test_where_we_differ(name: str, text: str, want: Answer, why: str) -> None:
    assert melody(name, text) != want, f"melody agrees now: {why}"
    check(name, text, want)


PIECES = [
    "Hello",
    " ",
    "  ",
    "\n",
    "world",
    ST,
    ET,
    SR,
    ER,
    "<co>x</co: 0:[1]>",
    "<co> y </co: 1:[0,2]>",
    "x",
    ". ",
    "<b>",
    f"{SA}[{W}]{EA}",
    f"{SA}{FG}{EA}",
]


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_random_texts_as_melody(name: str) -> None:
    """Seeded: 120 texts of up to 8 pieces each, every marker among them, every one
    answered as melody answers it, whole and in every chunking."""
    rng = random.Random(26)
    pieces = PIECES + (["<|START_TEXT|>", "<|END_TEXT|>"] if name == "cohere_command4" else [])
    for _ in range(120):
        check(name, "".join(rng.choice(pieces) for _ in range(rng.randint(1, 8))))


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_tool_choice_none_and_no_tools_drop_the_calls(name: str) -> None:
    text = f"{ST}Plan.{ET}{SA}[{W}]{EA}"
    want: Answer = ("Plan.", None, [])
    for how, got in ours(name, text, tool_choice="none"):
        assert got == want, how
    for how, got in ours(name, text, tools=False):
        assert got == want, how


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_forced_choices_read_the_action_block(name: str) -> None:
    """vLLM constrains required / named choices to the action block (a structural tag):
    that is what is parsed, as in auto."""
    text = f"{SA}[{W}]{EA}"
    named = {"type": "function", "function": {"name": "get_weather"}}
    for choice in ("required", named):
        p = parser(TOK, name, name, request(TOOLS, tool_choice=choice))
        assert p.whole(text).calls == [("get_weather", '{"city": "Paris", "days": 3}')]


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_include_reasoning_false_hides_reasoning_not_the_trim(name: str) -> None:
    """Hidden reasoning still ends the left trim (melody read it), as vLLM's answer."""
    text = f"{ST}  Secret.{ET}  {SR}  Hi.{ER}"
    for how, got in ours(name, text, include_reasoning=False):
        assert got == (None, "  Hi.", []), how


def test_trailing_whitespace_waits_then_goes_with_more_text() -> None:
    """Streamed: a segment's trailing whitespace is held (bounded), sent when text
    follows, dropped at a marker or the end."""
    p = parser(TOK, "cohere_command3", "cohere_command3", request(TOOLS))
    got = p.stream_deltas(["Hello ", " ", "world", "  ", ER, " gone"])
    assert got.content == "Hello  world"
