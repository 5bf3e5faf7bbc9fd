"""Pythonic calls (`pythonic`, `llama4_pythonic`): a keyword value that is a plain quoted
string streams as a JSON string as it arrives (its escapes decoded as Python decodes them),
so a long argument costs a record its own length; any other value is converted whole at
its end. Checked against Python itself (`ast.literal_eval`), whole and in 1-token and
random chunks, on the tests' Llama marker tokenizer."""

from __future__ import annotations

import ast
import json
import random
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs
from tokenizers import Tokenizer

from tests.core.parsers.shared.harness import LLAMA_SPECIAL, marker_tokenizer, parser, request, tool
from tests.support.examples import examples

TOOLS = [tool("f", s="string", n="integer")]


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return marker_tokenizer(special=LLAMA_SPECIAL)


ESCAPES = [
    "\\n",
    "\\t",
    "\\\\",
    "\\'",
    '\\"',
    "\\x41",
    "\\u00e9",
    "\\U0001F600",
    "\\101",
    "\\0",
    "\\N{BULLET}",
    "\\q",
]


def literal(rng: random.Random, body: str, quote: str) -> str:
    """`body` as a Python string literal in `quote`, with escapes sprinkled in."""
    out = []
    for ch in body:
        if ch in (quote, "\\", "\n"):
            out.append({"\n": "\\n", "\\": "\\\\"}.get(ch, "\\" + ch))
        else:
            out.append(ch)
        if rng.random() < 0.2:
            out.append(rng.choice(ESCAPES))
    return quote + "".join(out) + quote


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    body=hs.text(hs.sampled_from("ab 東😀'\"\\\n{}[],()=01"), max_size=20),
    seed=hs.integers(0, 2**16),
    quote=hs.sampled_from(["'", '"']),
)
def test_string_values_stream_as_python_reads_them(
    tok: Tokenizer, body: str, seed: int, quote: str
) -> None:
    rng = random.Random(seed)
    lit = literal(rng, body, quote)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # `\q` is deprecated but still means `\q`
        want = {"s": ast.literal_eval(lit), "n": 1}
    text = f"[f(s={lit}, n=1)]" if seed % 2 else f"[f(s = {lit} , n=1)]"
    p = parser(tok, None, "pythonic", req=request(TOOLS))
    whole = p.whole(text)
    assert [(n, json.loads(a)) for n, a in whole.calls] == [("f", want)]
    for got in (p.stream(text, 1), p.stream(text, seed=seed)):
        assert got.calls == whole.calls


@pytest.mark.parametrize(
    ("value", "want"),
    [("''", ""), ("'''x'''", "x"), ("'a' 'b'", "ab"), ("'a' + 'b'", "a"), ("r'\\n'", "\\n")],
    ids=["empty", "triple", "concatenated", "expression", "raw-prefix"],
)
def test_other_string_shapes(tok: Tokenizer, value: str, want: str) -> None:
    p = parser(tok, None, "pythonic", req=request(TOOLS))
    text = f"[f(s={value}, n=1)]"
    for got in (p.whole(text), p.stream(text, 1)):
        assert [(n, json.loads(a)) for n, a in got.calls] == [("f", {"s": want, "n": 1})]


def test_a_long_string_is_not_held(tok: Tokenizer) -> None:
    p = parser(tok, None, "pythonic", req=request(TOOLS))
    text = "[f(s='" + "word " * 2000 + "')]"
    ids = p.ids(text)
    per_chunk, st = p.stream_ids(ids, list(range(1, len(ids))))
    assert sum(1 for c in per_chunk if c) > len(ids) // 2  # arguments flow record by record
    assert st.call is None or len(st.call.held) < 64
