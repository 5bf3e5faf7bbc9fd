"""The common record's path (parsers/quick.py) is the engine's answer, record for record.

`Parser.feed` answers plain text in content or reasoning without the engine; everything
it answers must be exactly what `engine.feed` + `to_delta` say, with the same parser
state after it. For every format, random conversations (those of test_properties.py)
are cut at random and fed both ways, the states going through msgpack between records,
with both reasoning field names, `include_reasoning` on and off, and with the format's
tool parser and without it.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.core.parsers.properties.test_properties import _spec, _tokenizer, conversations
from tests.core.parsers.shared.harness import Slot, deepseek_tokenizer, request
from tests.core.parsers.shared.samples import GOLDEN, SETUPS, chat_request, render_deepseek_v4
from tests.support.examples import examples
from worker.core.parsers import (
    REASONING,
    REASONING_CONTENT,
    Parser,
    ParserSpec,
    compile_parser,
    feed,
    open_parser,
    to_delta,
)
from worker.core.parsers.language.state import ParserState
from worker.core.parsers.quick import MISS
from worker.core.text.detokenize import Detokenizer
from worker.wire.outbound import encode

_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(ParserState).decode


def _both_ways(parser: Parser, st0: ParserState, tok: Any, ids: list[int], cuts: list[int]) -> int:
    """Feed `ids` cut at `cuts` to the engine and to `Parser.feed`, each from its own copy
    of `st0`; every record must say and leave the same. Returns how many records the
    quick path answered."""
    detok = Detokenizer(tok, skip_special_tokens=False)
    slot = Slot()
    engine, facade = _decode(_encode(st0)), _decode(_encode(st0))
    bounds = [0, *[c for c in cuts if 0 < c < len(ids)], len(ids)]
    quick = 0
    for n, (lo, hi) in enumerate(itertools.pairwise(bounds)):
        chunk = ids[lo:hi]
        final = n == len(bounds) - 2
        text = detok.step(slot, chunk) + (detok.flush(slot) if final else "")
        engine, facade = _decode(_encode(engine)), _decode(_encode(facade))
        if parser.quick is not None and not final:
            probe = _decode(_encode(facade))
            quick += parser.quick.delta(probe, text, chunk) is not MISS
        fed = feed(parser.spec, engine, text, chunk, final)
        want = to_delta(fed.events, parser.reasoning_field)
        got = parser.feed(facade, text, chunk, final)
        assert (encode(got.delta) if got.delta else None) == (encode(want) if want else None)
        assert got.hidden == fed.hidden
        assert _encode(facade) == _encode(engine), f"record {n}: the states differ"
    return quick


@functools.cache
def _reasoning_only(name: str) -> ParserSpec:
    """The setup's reasoning format without its tool format (no tool parsing at all)."""
    setup = SETUPS[name]
    tok = _tokenizer(setup.tokenizer)
    return compile_parser(setup.reasoning_parser, None, tok, response_template=setup.template)


@pytest.mark.parametrize("name", sorted(SETUPS))
@settings(
    max_examples=examples(5),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_the_quick_path_says_what_the_engine_says(name: str, data: st.DataObject) -> None:
    setup = SETUPS[name]
    tok = _tokenizer(setup.tokenizer)
    conv = data.draw(conversations(setup), label="conversation")
    ids = list(tok.encode(setup.render(conv), add_special_tokens=False).ids)
    prompt = list(tok.encode(setup.prompt_tail, add_special_tokens=False).ids)
    shown = data.draw(st.booleans(), label="include_reasoning")
    field = data.draw(st.sampled_from([REASONING, REASONING_CONTENT]), label="field")
    req = request(**chat_request(setup, conv), include_reasoning=shown)
    spec = _spec(name, setup.tokenizer, tok)
    if setup.reasoning_parser and data.draw(st.booleans(), label="reasoning only"):
        spec = _reasoning_only(name)
    parser = Parser(spec, field, setup.strict)
    st0 = open_parser(parser.spec, req, prompt, "req-1", 0, strict=setup.strict)
    cuts = data.draw(
        st.lists(st.integers(1, max(len(ids) - 1, 1)), max_size=max(len(ids) // 2, 1)).map(
            lambda c: sorted(set(c))
        ),
        label="cuts",
    )
    _both_ways(parser, st0, tok, ids, cuts)


@pytest.mark.parametrize("every", [1, 3])
@pytest.mark.parametrize("tools", ["auto", "no tools", "reasoning only"])
def test_the_quick_path_takes_most_records_of_a_deepseek_stream(every: int, tools: str) -> None:
    """The path is taken (so the property above tests it): DeepSeek V4's reasoning and
    answer, a token or three at a time, go by it but for the records around markers;
    with tools asked for, none, and with no tool parser (each starts its answer under
    other rules)."""
    tok = deepseek_tokenizer()
    setup = SETUPS["deepseek_v4"]
    parser = Parser.compile("deepseek_v4", "deepseek_v4", tok)
    req = request(**chat_request(setup, GOLDEN)) if tools == "auto" else request()
    if tools == "reasoning only":
        parser = Parser(_reasoning_only("deepseek_v4"))
    prompt = list(tok.encode(setup.prompt_tail, add_special_tokens=False).ids)
    st0 = open_parser(parser.spec, req, prompt, "req-1", 0)
    ids = list(tok.encode(render_deepseek_v4(GOLDEN), add_special_tokens=False).ids)
    records = len(range(0, len(ids), every))
    quick = _both_ways(parser, st0, tok, ids, list(range(every, len(ids), every)))
    # GOLDEN's reasoning and sentence are ~30 tokens of its ~150: the calls' markup goes
    # through the engine (their plain text is held by the argument scanners).
    assert quick >= (20 if every == 1 else 6), (quick, records)
