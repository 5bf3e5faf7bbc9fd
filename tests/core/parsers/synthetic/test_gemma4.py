"""Gemma 4 (`gemma4` reasoning and tools; vLLM 0.33.0 vllm/parser/gemma4.py) on a real base
vocabulary with Gemma 4's markers added as tokens
(tests/support/vocab/synthetic_tokenizers.py; no Gemma 4 tokenizer is obtainable offline).
vLLM 0.33.0's answers for the same ids are pinned case by case in test_vllm_answers.py;
here: the argument grammar, each case whole and streamed, and a property over random
argument objects (stream == whole == the object, arguments only append, markers never leak).
"""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs
from tokenizers import Tokenizer

from tests.core.parsers.shared.harness import expect, parser, request, tool
from tests.support.examples import examples
from tests.support.vocab.synthetic_tokenizers import functiongemma_tokenizer, gemma4_tokenizer

Q = '<|"|>'
TOOLS = [
    tool("get_weather", city="string", days="integer"),
    tool("set_params", s="string", i="integer", n="number", b="boolean", o="object", a="array"),
]


# One instance for the module: the builder hands out a fresh copy each call.
_tokenizer = functools.cache(gemma4_tokenizer)
_fg_tokenizer = functools.cache(functiongemma_tokenizer)


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return _tokenizer()


def call(name: str, body: str) -> str:
    return f"<|tool_call>call:{name}{body}<tool_call|>"


CASES: list[tuple[str, str, str | None, str | None, list[tuple[str, Any]]]] = [
    (
        "channel",
        "<|channel>thought\nActual reasoning here<channel|>Final answer",
        "Actual reasoning here",
        "Final answer",
        [],
    ),
    ("empty-channel", "<|channel>thought\n<channel|>", None, None, []),
    ("prefix-exact", "<|channel>thousand reasons<channel|>Done", "thousand reasons", "Done", []),
    (
        "around-channel",
        "Before\n<|channel>thought\nR<channel|>\nThis is the rest",
        "R",
        "Before\n\nThis is the rest",
        [],
    ),
    ("cut-at-name", "<|channel>thought", None, None, []),
    ("cut-in-name", "<|channel>thou", "thou", None, []),
    (
        "one-call",
        call("get_weather", "{city:" + Q + "London" + Q + "}"),
        None,
        None,
        [("get_weather", {"city": "London"})],
    ),
    (
        "typed",
        call("get_weather", "{city:" + Q + "London" + Q + ",days:3}"),
        None,
        None,
        [("get_weather", {"city": "London", "days": 3})],
    ),
    (
        "nested",
        call(
            "complex_function",
            "{nested:{inner:"
            + Q
            + "value"
            + Q
            + "},list:["
            + Q
            + "a"
            + Q
            + ","
            + Q
            + "b"
            + Q
            + "]}",
        ),
        None,
        None,
        [("complex_function", {"nested": {"inner": "value"}, "list": ["a", "b"]})],
    ),
    # No schema: bare values are strings (vLLM types only by the request's schema).
    (
        "untyped",
        call("set_status", "{is_active:true,count:42,score:3.14}"),
        None,
        None,
        [("set_status", {"is_active": "true", "count": "42", "score": "3.14"})],
    ),
    (
        "schema-typed",
        call(
            "set_params",
            "{s:" + Q + "42" + Q + ",i:42,n:3.5,b:true,o:{k:[1,2]},"
            "a:[" + Q + "x" + Q + ",1],u:null}",
        ),
        None,
        None,
        [
            (
                "set_params",
                {
                    "s": "42",
                    "i": 42,
                    "n": 3.5,
                    "b": True,
                    "o": {"k": ["1", "2"]},
                    "a": ["x", "1"],
                    "u": "null",
                },
            )
        ],
    ),
    (
        "typed-strings",
        call(
            "set_params",
            "{i:"
            + Q
            + "abc"
            + Q
            + ",n:"
            + Q
            + "1e3"
            + Q
            + ",b:"
            + Q
            + "True"
            + Q
            + ",s:true,zz:7}",
        ),
        None,
        None,
        [("set_params", {"i": "abc", "n": 1000, "b": True, "s": "true", "zz": "7"})],
    ),
    ("trailing-dot", call("set_params", "{n:108.}"), None, None, [("set_params", {"n": 108})]),
    (
        "quoted-key",
        call("set_params", "{o:{" + Q + "3" + Q + ":" + Q + "new text" + Q + "}}"),
        None,
        None,
        [("set_params", {"o": {"3": "new text"}})],
    ),
    (
        "parens",
        "<|tool_call>call:get_weather(city:" + Q + "Rome" + Q + ")<tool_call|>",
        None,
        None,
        [("get_weather", {"city": "Rome"})],
    ),
    (
        "bare-colon",
        "<|tool_call>:get_weather{city:" + Q + "Rome" + Q + "}<tool_call|>",
        None,
        None,
        [("get_weather", {"city": "Rome"})],
    ),
    (
        "names",
        call("get-weather", "{}") + call("weather.get", "{}"),
        None,
        None,
        [("get-weather", {}), ("weather.get", {})],
    ),
    (
        "string-with-syntax",
        call("get_weather", "{city:" + Q + "a{b},c:d\n" + Q + "}"),
        None,
        None,
        [("get_weather", {"city": "a{b},c:d\n"})],
    ),
    (
        "cut-in-string",
        "<|tool_call>call:get_weather{city:" + Q + "Lon",
        None,
        None,
        [("get_weather", {"city": "Lon"})],
    ),
    ("cut-in-bare", "<|tool_call>call:set_params{i:4", None, None, [("set_params", {"i": 4})]),
    (
        "turn-ends-call",
        "<|tool_call>call:get_weather{city:" + Q + "Rome" + Q + "}<turn|>",
        None,
        None,
        [("get_weather", {"city": "Rome"})],
    ),
    (
        "call-in-reasoning",
        "<|channel>thought\nNeed weather.<|tool_call>call:get_weather{days:3}<tool_call|>",
        "Need weather.",
        None,
        [("get_weather", {"days": 3})],
    ),
    ("quote-in-content", "say " + Q + "hi" + Q, None, "say " + Q + "hi" + Q, []),
    ("specials-dropped", "A<|turn>B<bos>C<|tool>D", None, "ABCD", []),
]


@pytest.mark.parametrize(
    ("text", "reasoning", "content", "calls"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_gemma4_cases(
    tok: Tokenizer,
    text: str,
    reasoning: str | None,
    content: str | None,
    calls: list[tuple[str, Any]],
) -> None:
    p = parser(tok, "gemma4", "gemma4", req=request(TOOLS))
    expect(p, text, reasoning, content, calls)


def test_quote_written_as_text_is_a_quote(tok: Tokenizer) -> None:
    # vLLM finds `<|"|>` on text: spelled with ordinary tokens it still delimits a string.
    p = parser(tok, "gemma4", "gemma4", req=request(TOOLS))
    ids = p.ids("<|tool_call>call:get_weather{city:")
    ids += [i for piece in ("<|", '"', "|>", "Rome", "<|", '"', "|>") for i in p.ids(piece)]
    ids += p.ids("}<tool_call|>")
    assert p.whole("", ids).calls == [("get_weather", '{"city": "Rome"}')]


def test_prompt_inside_a_channel_starts_in_reasoning(tok: Tokenizer) -> None:
    prompt = list(tok.encode("<|turn>model\n<|channel>thought\nI ").ids)
    p = parser(tok, "gemma4", "gemma4", req=request(TOOLS), prompt=prompt)
    expect(p, "still thinking<channel|>Answer", "still thinking", "Answer", [])


# -- property: random argument objects ---------------------------------------------------

TEXT = hs.text(hs.sampled_from('ab z{}[],:\n"\\é東😀<'), max_size=10)
KEYS = hs.sampled_from(["k", "key_1", "x2", "zz", "city"])
NESTED = hs.recursive(
    TEXT,
    lambda inner: hs.lists(inner, max_size=3) | hs.dictionaries(KEYS, inner, max_size=3),
    max_leaves=6,
)


def gemma_value(v: Any, quoted: bool) -> str:
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}:{gemma_value(x, quoted)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ",".join(gemma_value(x, quoted) for x in v) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    return Q + v + Q


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    s=TEXT,
    i=hs.integers(-(10**6), 10**6),
    b=hs.booleans(),
    o=hs.dictionaries(KEYS, NESTED, max_size=3),
    a=hs.lists(NESTED, max_size=3),
    seed=hs.integers(0, 2**16),
    lead=TEXT,
)
def test_random_arguments(
    s: str, i: int, b: bool, o: dict[str, Any], a: list[Any], seed: int, lead: str
) -> None:
    p = parser(_tokenizer(), "gemma4", "gemma4", req=request(TOOLS))
    args = {"s": s, "i": i, "b": b, "o": o, "a": a}
    body = "{" + ",".join(f"{k}:{gemma_value(v, True)}" for k, v in args.items()) + "}"
    text = lead.replace("<", "") + call("set_params", body)
    whole = p.whole(text)
    for got in (whole, p.stream(text, seed=seed), p.stream(text, 1)):
        assert [n for n, _ in got.calls] == ["set_params"]
        assert json.loads(got.calls[0][1]) == args
        assert got.calls == whole.calls
        assert "<|tool_call>" not in (got.content or "") and Q not in (got.content or "")


# -- FunctionGemma (`functiongemma` tools): the same syntax, `<escape>` strings -----------

E = "<escape>"
FG_CASES: list[tuple[str, str, str | None, list[tuple[str, Any]]]] = [
    ("no-call", "Hello, how can I help?", "Hello, how can I help?", []),
    (
        "one-call",
        f"<start_function_call>call:get_weather{{city:{E}London{E}}}<end_function_call>",
        None,
        [("get_weather", {"city": "London"})],
    ),
    # Values are JSON when they parse, whatever the schema says; bare values are not read.
    (
        "json-values",
        f"<start_function_call>call:set_params{{i:{E}42{E},b:{E}true{E},"
        f'o:{E}{{"k": 1}}{E},s:{E}hello{E},t:{E}42{E}}}<end_function_call>',
        None,
        [("set_params", {"i": 42, "b": True, "o": {"k": 1}, "s": "hello", "t": 42})],
    ),
    (
        "bare-values",
        "<start_function_call>call:set_params{i:42,b:true}<end_function_call>",
        None,
        [("set_params", {})],
    ),
    (
        "braces-in-value",
        f"<start_function_call>call:get_weather{{city:{E}a}}b{E}}}<end_function_call>",
        None,
        [("get_weather", {"city": "a}b"})],
    ),
    (
        "two-calls",
        f"<start_function_call>call:get_weather{{city:{E}A{E}}}<end_function_call>"
        "<start_function_call>call:get_current_date{}<end_function_call>",
        None,
        [("get_weather", {"city": "A"}), ("get_current_date", {})],
    ),
]


@pytest.mark.parametrize(
    ("text", "content", "calls"), [c[1:] for c in FG_CASES], ids=[c[0] for c in FG_CASES]
)
def test_functiongemma_cases(text: str, content: str | None, calls: list[Any]) -> None:
    p = parser(_fg_tokenizer(), None, "functiongemma", req=request(TOOLS))
    expect(p, text, None, content, calls)
