"""K2 Horizon (`k2_horizon` reasoning and tools; vLLM 0.33.0 k2_horizon_*_parser.py) on the real
Qwen3 vocabulary with K2 Horizon's `<ifm|…>` markers added
(tests/support/vocab/synthetic_k2_horizon.py; no K2 Horizon tokenizer is obtainable offline).

The expected values follow vLLM 0.33.0's answers for the same ids (the probe's cases are
pinned in test_vllm_answers.py); these add the prompt's part and the switches. Each case
runs whole and streamed in 1-token, 3-token, one-record and random chunks.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from tokenizers import Tokenizer

from tests.core.parsers.shared.harness import expect, parser, request, tool
from tests.support.vocab.synthetic_k2_horizon import k2_horizon_tokenizer

TS, TE = "<ifm|think>", "</ifm|think>"
GS, GE = "<ifm|tool_calls>", "</ifm|tool_calls>"
TOOLS = [
    tool("get_weather", city="string", days="integer"),
    tool("set", s="string", o="object", b="boolean"),
]


def arg(key: str, value: str, type_: str | None = None) -> str:
    typed = f"<ifm|arg_type>{type_}</ifm|arg_type>" if type_ else ""
    return f"<ifm|arg_key>{key}</ifm|arg_key>{typed}<ifm|arg_value>{value}</ifm|arg_value>"


def call(name: str, *args: str) -> str:
    return f"<ifm|tool_call>{name}" + "".join(args) + "</ifm|tool_call>"


W = call("get_weather", arg("city", "Tokyo"), arg("days", " 3 "))
WEATHER = ("get_weather", {"city": "Tokyo", "days": 3})
OPENED = "<|im_start|>assistant\n" + TS
_tokenizer = functools.cache(k2_horizon_tokenizer)


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return _tokenizer()


CASES: list[tuple[str, str, str, dict[str, Any], str | None, str | None, list[Any]]] = [
    # (id, prompt tail, output, request, reasoning, content, calls)
    ("reasoning then answer", OPENED, f"r {TE} a ", {}, "r ", " a ", []),
    ("group ends reasoning", OPENED, f"r{GS}{W}{GE}", {}, "r", None, [WEATHER]),
    ("text after the group", OPENED, f"r{TE}A{GS}{W}{GE} B", {}, "r", "A B", [WEATHER]),
    ("prompt closed thinking", f"{TS}x{TE}", f"a{GS}{W}{GE}", {}, None, "a", [WEATHER]),
    (
        "medium effort markers",
        "<|im_start|>assistant\n<ifm|think_fast>",
        "r</ifm|think_fast>a",
        {"chat_template_kwargs": {"reasoning_effort": "medium"}},
        "r",
        "a",
        [],
    ),
    (
        "values typed by the schema",
        OPENED,
        f"r{TE}{GS}" + call("set", arg("s", " x "), arg("o", '{"k": 1}'), arg("b", "true")) + GE,
        {},
        "r",
        None,
        [("set", {"s": " x ", "o": {"k": 1}, "b": True})],
    ),
    (
        "xml_typed type tags",
        OPENED,
        f"r{TE}{GS}" + call("get_weather", arg("city", "A", "string"), arg("days", "2", "integer")),
        {"chat_template_kwargs": {"tool_call_format": "xml_typed"}},
        "r",
        None,
        [("get_weather", {"city": "A", "days": 2})],
    ),
    (
        "unknown tool: no call",
        OPENED,
        f"r{TE}{GS}{call('launch', arg('x', '1'))}{GE}",
        {},
        "r",
        None,
        [],
    ),
    (
        "json format",
        OPENED,
        f"r{TE}{GS}<ifm|tool_call>"
        + '{"name": "get_weather", "arguments": {"city": "A", "days": 2}}'
        + f"</ifm|tool_call>{GE} ok",
        {"chat_template_kwargs": {"tool_call_format": "json"}},
        "r",
        " ok",
        [("get_weather", {"city": "A", "days": 2})],
    ),
    (
        "tool_choice none",
        OPENED,
        f"r{TE}Sure.{GS}{W}{GE}",
        {"tool_choice": "none"},
        "r",
        "Sure.",
        [],
    ),
    ("stray markers after the answer", OPENED, f"r{TE}a{TE}b{GE}", {}, "r", f"a{TE}b{GE}", []),
]


@pytest.mark.parametrize(
    ("prompt", "text", "req", "reasoning", "content", "calls"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_k2_horizon_cases(
    tok: Tokenizer,
    prompt: str,
    text: str,
    req: dict[str, Any],
    reasoning: str | None,
    content: str | None,
    calls: list[Any],
) -> None:
    ids = list(tok.encode(prompt, add_special_tokens=False).ids)
    p = parser(tok, "k2_horizon", "k2_horizon", req=request(TOOLS, **req), prompt=ids)
    expect(p, text, reasoning, content, calls)


def test_reasoning_parser_alone_shows_the_group_as_content(tok: Tokenizer) -> None:
    """vLLM's K2 Horizon reasoning parser ends reasoning at a group; with no tool parser
    the group's markup is content (its markers are added tokens, not special ones)."""
    ids = list(tok.encode(OPENED, add_special_tokens=False).ids)
    p = parser(tok, "k2_horizon", None, req=request(), prompt=ids)
    expect(p, f"r{GS}{W}{GE}", "r", f"{GS}{W}{GE}", [])
