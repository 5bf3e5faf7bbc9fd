"""Kimi K3 (`kimi_k3` reasoning and tools, XTML; vLLM 0.33.0 vllm/parser/kimi_k3.py) on a real base
vocabulary with K3's `<|open|>`, `<|close|>`, `<|sep|>` added as special tokens
(tests/support/vocab/synthetic_tokenizers.py; no K3 tokenizer is obtainable offline). Channel and
tag names are text, so every marker is several tokens, matched on text as vLLM matches them.

Expected values are vLLM 0.33.0's answers for the same ids (all probe cases are pinned in
test_vllm_answers.py); each case here runs whole and streamed in 1-token, 3-token,
one-record and random chunks.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from tokenizers import Tokenizer

from tests.core.parsers.shared.harness import expect, parser, request, tool
from tests.support.vocab.synthetic_tokenizers import kimi_k3_tokenizer

OP, C, S = "<|open|>", "<|close|>", "<|sep|>"
TOOLS = [tool("get_weather", city="string", days="integer"), tool("calc", x="number")]
OFF = {"chat_template_kwargs": {"thinking": False}}
_tokenizer = functools.cache(kimi_k3_tokenizer)


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return _tokenizer()


def ch(name: str, body: str) -> str:
    return f"{OP}{name}{S}{body}{C}{name}{S}"


def arg(key: str, value: str, type_: str | None = "string") -> str:
    attrs = f'key="{key}"' + (f' type="{type_}"' if type_ else "")
    return f"{OP}argument {attrs}{S}{value}{C}argument{S}"


def call(name: str, *args: str) -> str:
    return f'{OP}call tool="{name}" index="1"{S}' + "".join(args) + f"{C}call{S}"


END = f"{C}message{S}"
CASES: list[tuple[str, str, dict[str, Any], str | None, str | None, list[Any]]] = [
    (
        "reasoning-response",
        f"step{C}think{S}" + ch("response", "answer") + END,
        {},
        "step",
        "answer",
        [],
    ),
    (
        "explicit-open",
        ch("think", "step") + ch("response", "answer") + END,
        {},
        "step",
        "answer",
        [],
    ),
    ("cut-in-reasoning", "unfinished reasoning", {}, "unfinished reasoning", None, []),
    ("thinking-off", "answer" + f"{C}response{S}" + END, OFF, None, "answer", []),
    (
        "effort-none",
        "answer" + f"{C}response{S}" + END,
        {"reasoning_effort": "none"},
        None,
        "answer",
        [],
    ),
    ("whitespace-kept", f"Hm.  \n{C}think{S}" + ch("response", "Hi"), {}, "Hm.  \n", "Hi", []),
    ("no-response-wrapper", f"Hm.{C}think{S}Hello" + END, {}, "Hm.", "Hello", []),
    (
        "after-message-dropped",
        f"s{C}think{S}" + ch("response", "a") + END + "tail",
        {},
        "s",
        "a",
        [],
    ),
    ("response-only", ch("response", "direct answer") + END, {}, None, "direct answer", []),
    (
        "typed-call",
        f"step{C}think{S}"
        + ch("response", "answer")
        + ch(
            "tools",
            call(
                "calc", arg("x", "1", "number"), arg("flag", "true", "boolean"), arg("text", "raw")
            ),
        ),
        {},
        "step",
        "answer",
        [("calc", {"x": 1, "flag": True, "text": "raw"})],
    ),
    (
        "attributes-unescaped",
        f"s{C}think{S}"
        + ch(
            "tools",
            f'{OP}call tool="a&amp;b&quot;c"{S}' + arg("k&amp;q", "v") + f"{C}call{S}",
        ),
        {},
        "s",
        None,
        [('a&b"c', {"k&q": "v"})],
    ),
    (
        "raw-string",
        f"s{C}think{S}"
        + ch(
            "tools", call("get_weather", arg("city", " spaced \n"), arg("days", "abc", "integer"))
        ),
        {},
        "s",
        None,
        [("get_weather", {"city": " spaced \n", "days": "abc"})],
    ),
    (
        "untyped-argument",
        f"s{C}think{S}" + ch("tools", call("calc", arg("x", "5", None))),
        {},
        "s",
        None,
        [("calc", {"x": "5"})],
    ),
    (
        "no-tool-attribute",
        f"s{C}think{S}" + ch("tools", f'{OP}call index="1"{S}{C}call{S}'),
        {},
        "s",
        None,
        [],
    ),
    (
        "two-calls",
        f"s{C}think{S}"
        + ch("response", "On it.")
        + ch("tools", call("get_weather", arg("city", "A")) + call("calc")),
        {},
        "s",
        "On it.",
        [("get_weather", {"city": "A"}), ("calc", {})],
    ),
    (
        "tools-unclosed",
        f"s{C}think{S}" + f"{OP}tools{S}" + call("calc"),
        {},
        "s",
        None,
        [("calc", {})],
    ),
    (
        "tool-choice-none",
        f"s{C}think{S}"
        + ch("response", "Sure.")
        + ch("tools", call("get_weather", arg("city", "Tokyo"))),
        {"tool_choice": "none"},
        "s",
        "Sure.",
        [],
    ),
]


@pytest.mark.parametrize(
    ("text", "req", "reasoning", "content", "calls"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_kimi_k3_cases(
    tok: Tokenizer,
    text: str,
    req: dict[str, Any],
    reasoning: str | None,
    content: str | None,
    calls: list[Any],
) -> None:
    p = parser(tok, "kimi_k3", "kimi_k3", req=request(TOOLS, **req))
    expect(p, text, reasoning, content, calls)


def test_markers_written_as_ordinary_tokens(tok: Tokenizer) -> None:
    p = parser(tok, "kimi_k3", "kimi_k3", req=request(TOOLS))
    pieces = (
        "<|",
        "open",
        "|>",
        "think",
        "<|",
        "sep",
        "|>",
        "a",
        "<|",
        "close",
        "|>",
        "think",
        "<|",
        "sep",
        "|>",
        "b",
    )
    ids = [i for piece in pieces for i in p.ids(piece)]
    got = p.whole("", ids)
    assert (got.reasoning, got.content) == ("a", "b")
