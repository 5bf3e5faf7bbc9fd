"""The long-tail formats (phi4_mini_json, internlm, jamba, gigachat3, apertus, lfm2, plamo3,
dots, xlam): the rules they add, each checked whole and in every chunking (vLLM's own answers are
in test_vllm_answers.py; these pin what those cases do not reach)."""

from __future__ import annotations

import functools

import pytest
from tokenizers import Tokenizer

from tests.core.parsers.shared.harness import Parser, parser, request
from tests.support.vocab import synthetic_longtail as lt

TOOLS = ["get_weather", "f"]


def _both(p: Parser, text: str) -> list[tuple[str, object]]:
    return [("whole", p.whole(text)), *p.all_streams(text)]


@functools.cache
def _tok(name: str) -> Tokenizer:
    return getattr(lt, f"{name}_tokenizer")()  # type: ignore[no-any-return]


def _p(tools: str, tok_name: str, **req: object) -> Parser:
    return parser(_tok(tok_name), None, tools, req=request(tools=TOOLS, **req))


@pytest.mark.parametrize(
    ("text", "content", "calls"),
    [
        # `functools[` opens the list; its `]` ends it, whatever follows is not content.
        (
            'Sure. functools[{"name": "f", "arguments": {"a": [1, 2]}}] bye',
            "Sure. ",
            [("f", '{"a": [1, 2]}')],
        ),
        # The word alone, or with a space before `[`, is prose.
        ("import functools; functools [1]", "import functools; functools [1]", []),
        # `parameters` is read as the arguments too; two calls in one list.
        (
            'functools[{"name": "f", "parameters": {"x": 1}}, {"name": "get_weather", '
            '"arguments": {}}]',
            None,
            [("f", '{"x": 1}'), ("get_weather", "{}")],
        ),
    ],
)
def test_phi4_mini_json(text: str, content: str | None, calls: list[tuple[str, str]]) -> None:
    p = _p("phi4_mini_json", "phi4_mini")
    for how, got in _both(p, text):
        assert (got.content, got.calls) == (content, calls), how  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("text", "content", "calls"),
    [
        (
            'Let me see.<|action_start|><|plugin|>\n{"name": "f", "parameters": {"x": "y"}}'
            "<|action_end|>",
            "Let me see.",
            [("f", '{"x": "y"}')],
        ),
        # Code for the interpreter is no tool call: the text stays, as vLLM keeps it.
        (
            "<|action_start|><|interpreter|>\nprint(1)<|action_end|>",
            "<|action_start|><|interpreter|>\nprint(1)<|action_end|>",
            [],
        ),
    ],
)
def test_internlm(text: str, content: str | None, calls: list[tuple[str, str]]) -> None:
    p = _p("internlm", "internlm")
    for how, got in _both(p, text):
        assert (got.content, got.calls) == (content, calls), how  # type: ignore[attr-defined]


def test_internlm_markers_spelled_in_ordinary_tokens_are_a_call() -> None:
    """vLLM's InternLM2 parser reads the text: the markers written as ordinary tokens are a
    call there, whole and streamed, and here."""
    p = _p("internlm", "internlm")
    ids: list[int] = []
    for ch in "<|action_start|><|plugin|>":
        ids += p.ids(ch)
    ids += p.ids('{"name": "f", "parameters": {}}')
    whole = p.whole("", ids)
    assert (whole.content, whole.calls) == (None, [("f", "{}")])
    per_chunk, _ = p.stream_ids(ids, list(range(1, len(ids))))
    assert [e for chunk in per_chunk for e in chunk]


@pytest.mark.parametrize(
    ("text", "content", "calls"),
    [
        (
            'Hi <tool_calls>[{"name": "f", "arguments": {"s": "x]"}}]</tool_calls> bye',
            "Hi ",
            [("f", '{"s": "x]"}')],
        ),
        # The closer is found in the text, inside a string too (vLLM's regex ends there
        # as well): the arguments are closed where it stood.
        (
            '<tool_calls>[{"name": "f", "arguments": {"s": "a</tool_calls>b"}}]</tool_calls>',
            None,
            [("f", '{"s": "a"}')],
        ),
        # Cut before the array closed: the call as far as written, its arguments closed.
        ('<tool_calls>[{"name": "f", "arguments": {"s": "ab', None, [("f", '{"s": "ab"}')]),
    ],
)
def test_jamba(text: str, content: str | None, calls: list[tuple[str, str]]) -> None:
    p = _p("jamba", "jamba")
    for how, got in _both(p, text):
        assert (got.content, got.calls) == (content, calls), how  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("text", "content", "calls"),
    [
        # A `<|message_sep|>` that opens no call message is the answer's text, as in vLLM.
        ("First.<|message_sep|>\n\nSecond.", "First.<|message_sep|>\n\nSecond.", []),
        # Two call messages: both calls (vLLM's regex reads the rest as one JSON: none).
        (
            'A<|message_sep|>\n\nfunction call<|role_sep|>\n{"name": "f", "arguments": {}}'
            '<|message_sep|>\n\nfunction call<|role_sep|>\n{"name": "get_weather", '
            '"arguments": {"city": "Oslo"}}',
            "A",
            [("f", "{}"), ("get_weather", '{"city": "Oslo"}')],
        ),
        ('<|function_call|>{"name": "f", "arguments": {"x": [1]}}', None, [("f", '{"x": [1]}')]),
    ],
)
def test_gigachat3(text: str, content: str | None, calls: list[tuple[str, str]]) -> None:
    p = _p("gigachat3", "gigachat3")
    for how, got in _both(p, text):
        assert (got.content, got.calls) == (content, calls), how  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("text", "content", "calls"),
    [
        # The object's key is the name; text after the block is content again.
        (
            'A <|tools_prefix|>[{"f": {"x": 1}}, {"get_weather": {}}]<|tools_suffix|> B',
            "A  B",
            [("f", '{"x": 1}'), ("get_weather", "{}")],
        ),
        # An object without a key is no call; a later key of an object is not read.
        (
            '<|tools_prefix|>[{}, {"f": {"s": "]"}, "g": 2}]<|tools_suffix|>',
            None,
            [("f", '{"s": "]"}')],
        ),
    ],
)
def test_apertus(text: str, content: str | None, calls: list[tuple[str, str]]) -> None:
    p = _p("apertus", "apertus")
    for how, got in _both(p, text):
        assert (got.content, got.calls) == (content, calls), how  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("text", "content", "calls"),
    [
        (
            "A <|tool_call_start|>[f(x=1), get_weather(city='Oslo')]<|tool_call_end|> B",
            "A  B",
            [("f", '{"x": 1}'), ("get_weather", '{"city": "Oslo"}')],
        ),
        # The list stops being Python inside a call: its arguments are closed there.
        ("<|tool_call_start|>[f(s='ab']<|tool_call_end|>", None, [("f", '{"s": "ab"}')]),
        # An orphan end marker after the block is dropped, the text around it kept.
        ("<|tool_call_start|>[f()]<|tool_call_end|>x<|tool_call_end|>y", "xy", [("f", "{}")]),
    ],
)
def test_lfm2(text: str, content: str | None, calls: list[tuple[str, str]]) -> None:
    p = _p("lfm2", "lfm2")
    for how, got in _both(p, text):
        assert (got.content, got.calls) == (content, calls), how  # type: ignore[attr-defined]


_PT = "<|plamo:{}:plamo|>"


def _plamo_call(name: str, args: str) -> str:
    return (
        _PT.format("begin_tool_request") + _PT.format("begin_tool_name") + name
        + _PT.format("end_tool_name") + _PT.format("begin_tool_arguments")
        + "<|plamo:constrain|>json<|plamo:msg|>" + args + _PT.format("end_tool_arguments")
        + _PT.format("end_tool_request")
    )  # fmt: skip


@pytest.mark.parametrize(
    ("kwargs", "text", "want"),
    [
        # A tool block inside the reasoning ends it (vLLM's implicit end).
        (
            {},
            "Plan."
            + _PT.format("begin_tool_requests")
            + _plamo_call("f", '{"a": 1}')
            + _PT.format("end_tool_requests")
            + "Done.",
            ("Plan.", "Done.", [("f", '{"a": 1}')]),
        ),
        # Trailing whitespace of the reasoning is kept (vLLM's config does not strip it).
        ({}, "Plan.\n" + _PT.format("end_think") + "A", ("Plan.\n", "A", [])),
        # Thinking off: no reasoning; the think markers are special tokens, dropped as
        # vLLM drops them (its answer to the recorded case).
        (
            {"chat_template_kwargs": {"enable_thinking": False}},
            _PT.format("begin_think") + "r" + _PT.format("end_think") + "c",
            (None, "rc", []),
        ),
    ],
)
def test_plamo3(kwargs: dict[str, object], text: str, want: tuple[object, ...]) -> None:
    tok = _tok("plamo3")
    prompt = tok.encode("<|plamo:msg|>assistant\n" + _PT.format("begin_think")).ids
    if kwargs:
        prompt = tok.encode("<|plamo:msg|>assistant\n").ids
    p = parser(tok, "plamo3", "plamo3", req=request(tools=TOOLS, **kwargs), prompt=prompt)
    for how, got in _both(p, text):
        assert (got.reasoning, got.content, got.calls) == want, how  # type: ignore[attr-defined]


def test_dots_values_are_stripped_and_typed() -> None:
    """dots: values lose their surrounding whitespace and take the schema's type (vLLM's
    dots parser); a call to a function the request does not offer is dropped."""
    tok = _tok("dots")
    tools = [
        {
            "type": "function",
            "function": {
                "name": "g",
                "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}},
            },
        },
        "f",
    ]
    p = parser(tok, None, "dots", req=request(tools=tools))
    text = (
        '<dots_function_call>\n<invoke name="g">\n<parameter name="n"> 7 </parameter>\n'
        '</invoke>\n<invoke name="nope">\n</invoke>\n<invoke name="f">\n'
        '<parameter name="s">\n two words \n</parameter>\n</invoke>\n</dots_function_call>'
    )
    for how, got in _both(p, text):
        assert got.calls == [("g", '{"n": 7}'), ("f", '{"s": "two words"}')], how  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("text", "content", "calls"),
    [
        # An answer that opens with `[` is the call array; `parameters` is read too.
        (
            ' [{"name": "f", "arguments": {"a": [1]}}, {"name": "get_weather", "parameters": {}}]',
            None,
            [("f", '{"a": [1]}'), ("get_weather", "{}")],
        ),
        # An array that is no call list is the answer's text.
        ("[1, 2] is a list.", "[1, 2] is a list.", []),
        # A whole answer that is an empty array is an empty call list, no text: vLLM's
        # preprocess_model_output gives (None, "[]") (found by test_properties' draw).
        ("[]", None, []),
        # The blocks vLLM also looks for: `<tool_call>`, a json fence, `[TOOL_CALLS]`.
        ('So <tool_call>[{"name": "f", "arguments": {}}]</tool_call>', "So ", [("f", "{}")]),
        ('So ```json\n[{"name": "f", "arguments": {}}]\n```', "So ", [("f", "{}")]),
        ('[TOOL_CALLS][{"name": "f", "arguments": {}}]', None, [("f", "{}")]),
        # Right after `</think>` (a think block is content: xlam has no reasoning parser).
        ('<think>r</think>[{"name": "f", "arguments": {}}]', "<think>r", [("f", "{}")]),
    ],
)
def test_xlam(text: str, content: str | None, calls: list[tuple[str, str]]) -> None:
    p = _p("xlam", "xlam")
    for how, got in _both(p, text):
        assert (got.content, got.calls) == (content, calls), how  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("tools", "tok", "text"),
    [
        ("phi4_mini_json", "phi4_mini", 'A functools[{"name": "f", "arguments": {}}]'),
        ("internlm", "internlm", 'A <|action_start|><|plugin|>{"name": "f"}<|action_end|>'),
        ("jamba", "jamba", 'A <tool_calls>[{"name": "f", "arguments": {}}]</tool_calls>'),
        ("gigachat3", "gigachat3", 'A <|function_call|>{"name": "f", "arguments": {}}'),
        ("apertus", "apertus", 'A <|tools_prefix|>[{"f": {}}]<|tools_suffix|>'),
        ("lfm2", "lfm2", "A <|tool_call_start|>[f()]<|tool_call_end|>"),
        ("dots", "dots", 'A <dots_function_call><invoke name="f"></invoke></dots_function_call>'),
        ("xlam", "xlam", 'A <tool_call>[{"name": "f", "arguments": {}}]</tool_call>'),
    ],
)
def test_tool_choice_none_drops_the_block(tools: str, tok: str, text: str) -> None:
    """tool_choice none: the block is read and dropped, its markup never in content."""
    p = _p(tools, tok, tool_choice="none")
    for how, got in _both(p, text):
        assert (got.content, got.calls) == ("A ", []), how  # type: ignore[attr-defined]
