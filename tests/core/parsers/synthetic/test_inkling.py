"""Inkling (`inkling` reasoning and tools, typed blocks; vLLM 0.33.0 vllm/parser/inkling.py) on
the real Qwen3 vocabulary with Inkling's block tokens added as special tokens
(tests/support/vocab/synthetic_inkling.py; no Inkling tokenizer is obtainable offline).

The expected values follow vLLM 0.33.0's answers for the same ids (the probe's cases are
pinned in test_vllm_answers.py); these add the prompt's part, the bounds and the switches.
Each case runs whole and streamed in 1-token, 3-token, one-record and random chunks.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from tokenizers import Tokenizer

from tests.core.parsers.shared.harness import expect, parser, request, tool
from tests.support.vocab.synthetic_inkling import inkling_tokenizer
from worker.core.parsers.machine import prose

M, TH, TX = "<|message_model|>", "<|content_thinking|>", "<|content_text|>"
TJ, TT, ES, E = (
    "<|content_invoke_tool_json|>",
    "<|content_invoke_tool_text|>",
    "<|content_model_end_sampling|>",
    "<|end_message|>",
)
TOOLS = [tool("get_weather", city="string", days="integer"), tool("get_current_date")]
W = '{"name": "get_weather", "args": {"city": "Tokyo", "days": 3}}'
WEATHER = ("get_weather", {"city": "Tokyo", "days": 3})
_tokenizer = functools.cache(inkling_tokenizer)


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return _tokenizer()


CASES: list[tuple[str, str, str, dict[str, Any], str | None, str | None, list[Any]]] = [
    # (id, prompt tail, output, request, reasoning, content, calls)
    ("blocks", M, f"{TH}r{E}{M}{TX}a{E}{M}{TJ}{W}{E}", {}, "r", "a", [WEATHER]),
    ("prompt opened thinking", M + TH, f"r{E}{M}{TX}a{E}", {}, "r", "a", []),
    ("prompt opened text", M + TX, f"a{E}{M}{TJ}{W}{E}", {}, None, "a", [WEATHER]),
    ("prompt ended a block", f"{M}{TX}x{E}", f"{M}{TX}a{E}", {}, None, "a", []),
    ("header name dropped", M, f"get_weather{TJ}{W}{E}", {}, None, None, [WEATHER]),
    ("header without kind is content", M, f"junk{E}{M}{TX}a{E}", {}, None, "junka", []),
    ("header at the end is content", M, "junk", {}, None, "junk", []),
    ("end sampling ends a block", M, f"{TH}r{ES}{M}{TX}a{ES}", {}, "r", "a", []),
    (
        "tool text and error are content",
        M,
        f"{TT}x{E}{M}<|content_tool_error|>y{E}",
        {},
        None,
        "xy",
        [],
    ),
    (
        "only args counts",
        M,
        f'{TJ}{{"name": "get_weather", "arguments": {{"city": "X"}}}}{E}',
        {},
        None,
        None,
        [("get_weather", {})],
    ),
    (
        "args before name",
        M,
        f'{TJ}{{"args": {{"city": "X"}}, "name": "get_weather"}}{E}',
        {},
        None,
        None,
        [("get_weather", {"city": "X"})],
    ),
    ("open thinking ended by a header", M, f"{TH}r{M}{TX}a{E}", {}, "r", "a", []),
    (
        "tool_choice none drops the call",
        M,
        f"{TX}Sure.{E}{M}{TJ}{W}{E}",
        {"tool_choice": "none"},
        None,
        "Sure.",
        [],
    ),
    (
        "required reads the blocks",
        M,
        f"{TH}r{E}{M}{TJ}{W}{E}",
        {"tool_choice": "required"},
        "r",
        "",
        [WEATHER],
    ),
    ("whitespace before a call dropped", M, f"{TX}\n{E}{M}{TJ}{W}{E}", {}, None, None, [WEATHER]),
    ("reasoning trailing whitespace stripped", M, f"{TH}r \n{E}{M}{TX} a {E}", {}, "r", " a ", []),
]


@pytest.mark.parametrize(
    ("prompt", "text", "req", "reasoning", "content", "calls"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_inkling_cases(
    tok: Tokenizer,
    prompt: str,
    text: str,
    req: dict[str, Any],
    reasoning: str | None,
    content: str | None,
    calls: list[Any],
) -> None:
    ids = list(tok.encode(prompt, add_special_tokens=False).ids)
    p = parser(tok, "inkling", "inkling", req=request(TOOLS, **req), prompt=ids)
    if req.get("tool_choice") == "required":
        got = p.whole(text)  # a forced choice's whole answer says content ""
        assert (got.reasoning, got.content, len(got.calls)) == (reasoning, content, 1)
        return
    expect(p, text, reasoning, content, calls)


def test_header_text_is_bounded(tok: Tokenizer) -> None:
    """A header is held (it may turn out to be content) only up to FRAME_MAX characters:
    past that it is content at once, so the state stays bounded however long a model
    writes without a block kind, and nothing is lost."""
    prompt = list(tok.encode(M, add_special_tokens=False).ids)
    p = parser(tok, "inkling", "inkling", req=request(TOOLS), prompt=prompt)
    long = "word " * prose.FRAME_MAX
    ids = p.ids(long)
    _, st = p.stream_ids(ids, list(range(1, len(ids))))
    assert len(st.head) <= prose.FRAME_MAX
    expect(p, long + f"{TX}a{E}", None, long + "a", [])


def test_reasoning_parser_alone_shows_call_blocks_as_content(tok: Tokenizer) -> None:
    """Without a tool parser a call block is text (nothing reads it as a call)."""
    prompt = list(tok.encode(M, add_special_tokens=False).ids)
    p = parser(tok, "inkling", None, req=request(), prompt=prompt)
    expect(p, f"{TH}r{E}{M}{TJ}{W}{E}", "r", W, [])
