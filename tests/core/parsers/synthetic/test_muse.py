"""Meta Muse (`muse`, its alias `musespark1x`, `muse_glimmer`; vLLM 0.33.0 muse_*_parser.py)
on the real Qwen3 vocabulary with Muse's framing tokens added as special tokens
(tests/support/vocab/synthetic_muse.py; no Muse tokenizer is obtainable offline).

The expected values follow vLLM 0.33.0's answers for the same ids (the probe's cases are
pinned in test_vllm_answers.py); these add the bounds and the name rules. Each case runs
whole and streamed in 1-token, 3-token, one-record and random chunks.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from tokenizers import Tokenizer

from tests.core.parsers.shared.harness import expect, parser, request, tool
from tests.support.vocab.synthetic_muse import muse_tokenizer
from worker.core.parsers import REASONING_FORMATS, TOOL_FORMATS
from worker.core.parsers.machine import prose

S, EOM, EOT = "<|start|>assistant", "<|eom|>", "<|eot|>"
TOOLS = [tool("get_weather", city="string", days="integer"), tool("get_current_date")]
PROMPT = "<|start|>user<|message|>hi<|eot|><|start|>assistant"
_tokenizer = functools.cache(muse_tokenizer)


def invoke(name: str, **params: str) -> str:
    body = "".join(f'<atem:parameter name="{k}">{v}</atem:parameter>' for k, v in params.items())
    call = f'<atem:invoke name="{name}">{body}</atem:invoke>'
    return f"<atem:function_calls>{call}</atem:function_calls>"


def msg(to: str | None, body: str, end: str = EOM) -> str:
    return S + (f" to={to}" if to else "") + "<|message|>" + body + end


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return _tokenizer()


CASES: list[tuple[str, str, str, str | None, str | None, list[Any]]] = [
    # (id, parser, output after the prompt's `<|start|>assistant`, reasoning, content, calls)
    (
        "spark: self, commentary, call, user",
        "muse",
        " to=self<|message|>r<|eom|>"
        + msg("commentary", "c ")
        + msg("get_weather", invoke("get_weather", city="123", days="2"))
        + msg("user", "done", EOT),
        "r",
        "c done",
        [("get_weather", {"city": "123", "days": 2})],
    ),
    (
        "spark: doubled name",
        "muse",
        " to=get_weather.get_weather<|message|>"
        + invoke("get_weather.get_weather", city="A")
        + EOM,
        None,
        None,
        [("get_weather", {"city": "A"})],
    ),
    (
        "spark: developer dropped, bare header is reasoning",
        "muse",
        " to=developer<|message|>x<|eom|>" + msg(None, "r") + msg("user", "a", EOT),
        "r",
        "a",
        [],
    ),
    (
        "glimmer: reasoning joined, commentary is a channel",
        "muse_glimmer",
        " to=self<|message|>a<|eom|>"
        + msg("self", "b")
        + msg("commentary", "x")
        + msg("user", "c"),
        "a\nb",
        "c",
        [],
    ),
    ("no messages: content", "muse", "plain text", None, "plain text", []),
    (
        "text between messages dropped",
        "muse",
        " to=self<|message|>r<|eom|>junk" + msg("user", "a", EOT) + " tail",
        "r",
        "a",
        [],
    ),
    (
        "header at the end dropped",
        "muse",
        " to=self<|message|>r<|eom|><|start|>assistant to=get_wea",
        "r",
        None,
        [],
    ),
]


@pytest.mark.parametrize(
    ("name", "text", "reasoning", "content", "calls"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_muse_cases(
    tok: Tokenizer,
    name: str,
    text: str,
    reasoning: str | None,
    content: str | None,
    calls: list[Any],
) -> None:
    prompt = list(tok.encode(PROMPT, add_special_tokens=False).ids)
    p = parser(tok, name, name, req=request(TOOLS), prompt=prompt)
    expect(p, text, reasoning, content, calls)


def test_musespark1x_is_muse() -> None:
    assert REASONING_FORMATS["musespark1x"] is REASONING_FORMATS["muse"]
    assert TOOL_FORMATS["musespark1x"] is TOOL_FORMATS["muse"]


def test_text_between_messages_is_bounded(tok: Tokenizer) -> None:
    """Text after a message waits for a header's `to=NAME`: only its last FRAME_MAX
    characters are held, whatever a model writes there."""
    prompt = list(tok.encode(PROMPT, add_special_tokens=False).ids)
    p = parser(tok, "muse", "muse", req=request(TOOLS), prompt=prompt)
    junk = "word " * prose.FRAME_MAX
    ids = p.ids(" to=self<|message|>r<|eom|>" + junk)
    _, st = p.stream_ids(ids, list(range(1, len(ids))))
    assert len(st.head) <= prose.FRAME_MAX
    expect(p, " to=self<|message|>r<|eom|>" + junk + msg("user", "a", EOT), "r", "a", [])


def test_tool_choice_none_drops_the_call_and_keeps_the_answer(tok: Tokenizer) -> None:
    prompt = list(tok.encode(PROMPT, add_special_tokens=False).ids)
    p = parser(tok, "muse", "muse", req=request(TOOLS, tool_choice="none"), prompt=prompt)
    text = msg("get_weather", invoke("get_weather", city="A")) + msg("user", "a", EOT)
    expect(p, text.removeprefix(S), None, "a", [])
