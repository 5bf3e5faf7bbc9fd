"""Outputs a model should not write: a rendered conversation with token ids deleted,
repeated, reversed or replaced by any id of the vocabulary, per format.

No format may fail the request on them (an exception fails it), every streamed event is
well formed (`merge` checks the indices), and the stream — one token a record and three —
says what the whole response says. The cases the first sweeps found (/tmp fuzzing of
12,000 mutations; 16 mismatches in 9 formats, three causes) are pinned below it.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from tests.core.parsers.properties.test_properties import _spec, _tokenizer
from tests.core.parsers.shared.harness import Parser, Result, merge, request
from tests.core.parsers.shared.samples import SETUPS, Call, Conversation, chat_request
from tests.support.examples import examples


def _parser(name: str) -> tuple[Parser, list[int]]:
    setup = SETUPS[name]
    tok = _tokenizer(setup.tokenizer)
    conv = Conversation(reasoning="Think.", content="hi", calls=(Call("f", {"a": 1, "b": "x"}),))
    if not setup.reasoning:
        conv = Conversation(content="hi", calls=conv.calls)
    req = request(**chat_request(setup, conv))
    p = Parser(_spec(name, setup.tokenizer, tok), tok, req, None, setup.strict)
    return p, p.ids(setup.render(conv))


def _mutate(ids: list[int], vocab: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    out = list(ids)
    for _ in range(rng.randint(1, 6)):
        i = rng.randrange(len(out) + 1)
        op = rng.random()
        if op < 0.3 and out:
            del out[min(i, len(out) - 1)]
        elif op < 0.6:
            out.insert(i, rng.choice(ids))
        elif op < 0.8:
            out.insert(i, rng.randrange(vocab))
        else:
            j = rng.randrange(len(out) + 1)
            out[i:j] = out[i:j][::-1]
    return out


def _norm(r: Result) -> tuple[object, ...]:
    return (r.reasoning or None, r.content or None, r.calls)


@pytest.mark.parametrize("name", sorted(SETUPS))
# Derandomized: the same 40 mutations per format on every run (a sweep of 12,000 more
# found the cases pinned below; CI should not be where the next one turns up).
@settings(
    max_examples=examples(40),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(seed=hs.integers(0, 2**32))
def test_mutated_outputs(name: str, seed: int) -> None:
    p, ids = _parser(name)
    ids = _mutate(ids, p.tok.get_vocab_size(), seed)
    whole = p.whole("", ids)
    for every in (1, 3):
        per_chunk, _ = p.stream_ids(ids, list(range(every, len(ids), every)))
        got = merge([e for chunk in per_chunk for e in chunk])
        assert _norm(got) == _norm(whole), (every, p.decode(ids))


def test_text_before_a_marker_id_in_a_value_is_kept() -> None:
    """`<param` then the `<tool_call>` token inside a qwen3_coder value: a whole response
    dropped the `<param` (the rule for an output that ends inside markup fired at the
    marker), a stream kept it."""
    p, _ = _parser("qwen3_coder")
    text = "<tool_call>\n<function=f>\n<parameter=b>\nx <param<tool_call>y\n</parameter>\n"
    text += "</function>\n</tool_call>"
    for how, got in [("whole", p.whole(text)), *p.all_streams(text)]:
        assert got.calls == [("f", '{"b": "x <param<tool_call>y"}')], how


def test_whitespace_before_a_named_call_is_in_its_arguments_in_any_chunking() -> None:
    """tool_choice named, `</think>` then `\\n\\n` as its own token: the arguments keep
    it (as vLLM's do) also when it arrives in a record of its own (it was dropped)."""
    p, _ = _parser("named")
    text = 'R</think>\n\n{"city": "Tokyo"}'
    for how, got in [("whole", p.whole(text)), *p.all_streams(text)]:
        assert got.calls == [("get_weather", '\n\n{"city": "Tokyo"}')], how


@pytest.mark.parametrize(
    ("name", "text", "content"),
    [
        ("llama3_json", ' {"name": broken', ' {"name": broken'),
        ("pythonic", " [(a=1( b='x')]", " [(a=1( b='x')]"),
        ("required", "</think> [{oops", " [{oops"),
    ],
)
def test_whitespace_before_a_call_list_that_is_none_stays_content(
    name: str, text: str, content: str
) -> None:
    """A sniffed call list that turns out to be none gives its text back as content, the
    whitespace before it too — it was lost (pythonic, required) or moved after the text
    (llama3_json) when it came in the same record."""
    p, _ = _parser(name)
    for how, got in [("whole", p.whole(text)), *p.all_streams(text)]:
        assert (got.content, got.calls) == (content, []), how
