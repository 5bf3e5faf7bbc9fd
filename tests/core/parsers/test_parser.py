"""The `Parser` facade says what the function protocol behind it says; the call kinds of
the parser state round-trip through msgpack; one merge serves deltas and messages."""

from __future__ import annotations

import itertools

import msgspec
import pytest
from tokenizers import Tokenizer

from tests.core.parsers.shared.harness import Slot, request, tool
from worker.core.parsers import (
    Content,
    Parser,
    ParserState,
    Reasoning,
    ToolCallArgs,
    ToolCallStart,
    collect,
    feed,
    finish_reason,
    for_choice,
    open_parser,
    parse_whole,
    to_delta,
    to_message,
)
from worker.core.parsers.language.state import (
    TOOLS_AUTO,
    TOOLS_REQUIRED,
    CallElements,
    CallGemma,
    CallJson,
    CallList,
    CallParams,
    CallPythonic,
    CallVerbatim,
)
from worker.core.text.detokenize import Detokenizer
from worker.wire.outbound import encode

TEXT = (
    "Let me look.</think>Checking.\n\n<｜DSML｜tool_calls>\n"
    '<｜DSML｜invoke name="get_weather">\n'
    '<｜DSML｜parameter name="city" string="true">杭州 "West Lake"</｜DSML｜parameter>\n'
    '<｜DSML｜parameter name="days" string="false">5</｜DSML｜parameter>\n'
    "</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
)
TOOLS = [tool("get_weather", city="string", days="integer")]


def _ids(tok: Tokenizer, text: str) -> list[int]:
    return list(tok.encode(text, add_special_tokens=False).ids)


@pytest.mark.parametrize("include_reasoning", [True, False])
@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
def test_the_facade_streams_as_the_protocol(
    deepseek: Tokenizer, include_reasoning: bool, field: str
) -> None:
    parser = Parser.compile("deepseek_v4", "deepseek_v4", deepseek, reasoning_field=field)
    req = request(TOOLS, include_reasoning=include_reasoning)
    prompt = _ids(deepseek, "<｜Assistant｜><think>")
    template = parser.open(req, prompt, "req-1")
    assert template is not None
    old = for_choice(open_parser(parser.spec, req, prompt, "req-1"), 1)
    new = parser.for_choice(template, 1)
    assert new == old
    ids = _ids(deepseek, TEXT)
    detok = Detokenizer(deepseek, skip_special_tokens=False)
    slot = Slot()
    bounds = [0, *range(1, len(ids), 3), len(ids)]
    for n, (lo, hi) in enumerate(itertools.pairwise(bounds)):
        final = n == len(bounds) - 2
        chunk = ids[lo:hi]
        text = detok.step(slot, chunk) + (detok.flush(slot) if final else "")
        fed = feed(parser.spec, old, text, chunk, final)
        got = parser.feed(new, text, chunk, final)
        want = to_delta(fed.events, field)
        assert (encode(got.delta) if got.delta else None) == (encode(want) if want else None)
        assert got.hidden == fed.hidden
    assert new == old
    assert parser.finish(new, "stop") == finish_reason(old, "stop") == "tool_calls"


def test_the_facade_answers_whole_as_the_protocol(deepseek: Tokenizer) -> None:
    parser = Parser.compile("deepseek_v4", "deepseek_v4", deepseek)
    req = request(TOOLS)
    template = parser.open(req, None, "req-1")
    assert template is not None
    ids = _ids(deepseek, TEXT)
    text = str(deepseek.decode(ids, skip_special_tokens=False))
    whole = parser.whole(template, 2, text, ids, "stop")
    st = for_choice(open_parser(parser.spec, req, None, "req-1"), 2)
    parsed = parse_whole(parser.spec, st, text, ids)
    assert encode(whole.message) == encode(to_message(parsed))
    assert whole.finish_reason == finish_reason(st, "stop") == "tool_calls"
    assert (whole.hidden, whole.reasoning_tokens) == (parsed.hidden, parsed.reasoning_tokens)
    assert template == parser.open(req, None, "req-1")  # the template is not changed


def test_open_says_when_there_is_no_parser_path(deepseek: Tokenizer) -> None:
    assert Parser.compile(None, None, deepseek).open(request(TOOLS), None, "r") is None
    assert Parser.compile("deepseek_v4", None, deepseek).open(None, None, "r") is not None
    # A tool format parses its markup out even when the request has no tools.
    assert Parser.compile(None, "deepseek_v4", deepseek).open(request(), None, "r") is not None


def test_strict_tool_calling_is_the_parsers(deepseek: Tokenizer) -> None:
    """On, tool_choice "required" is parsed in the model's own format; off, it is the
    constrained JSON call list."""
    req = request(TOOLS, tool_choice="required")
    strict = Parser.compile(None, "deepseek_v4", deepseek).open(req, None, "r")
    lax = Parser.compile(None, "deepseek_v4", deepseek, strict=False).open(req, None, "r")
    assert strict is not None and lax is not None
    assert (strict.mode, lax.mode) == (TOOLS_AUTO, TOOLS_REQUIRED)


# -- the call kinds in the state ---------------------------------------------------------

KINDS = [
    CallJson(index=0, name="f", head="functions.f:0", phase=1, depth=2, quote=True),
    CallJson(head="0", defer_id="0", deferred='{"a": 1'),
    CallParams(index=1, name="f", key="city", flag="true", value=1, held="\n", lead=True),
    CallList(phase=5, key='"arguments"', value=2, depth=1, args_seen=True, raw="{", count=3),
    CallList(required=True, fallback=True, raw="  ["),
    CallPythonic(phase=9, key="s", value=1, quote="'", escape="\\x4", fallback=True),
    CallVerbatim(index=0, name="f"),
    CallGemma(phase=2, stack="{o[", key="n", key_waits=True, held="1e", string=2),
    CallElements(part=1, held="]<]mini", key="city", body="<a>", sent="x\n", opened=True),
]


@pytest.mark.parametrize("call", KINDS, ids=lambda c: type(c).__name__)
def test_every_call_kind_round_trips(call: object) -> None:
    st = ParserState(state=4, mode=1, call=call)  # type: ignore[arg-type]
    blob = msgspec.msgpack.encode(st)
    back = msgspec.msgpack.decode(blob, type=ParserState)
    assert back == st and type(back.call) is type(call)
    # The tag leads the call's array; it is never one of layout 1's kinds (0-6).
    assert msgspec.msgpack.decode(blob)[8][0] >= 16


def test_a_layout_1_call_does_not_decode() -> None:
    """A state stored before the call kinds (a 17-field `Call` led by its kind) is
    reported as corrupt rather than read as some other kind."""
    old_call = [2, "", 0, False, "", 4, 1, '"', False, "", 2, 1, "", "", "get_weather"]
    blob = msgspec.msgpack.encode([4, 1, 0, "", [], True, "", 1, old_call])
    with pytest.raises(msgspec.ValidationError):
        msgspec.msgpack.decode(blob, type=ParserState)
    assert msgspec.msgpack.decode(msgspec.msgpack.encode([4, 1, 0, "", [], True, "", 1, None]),
                                  type=ParserState).call is None  # fmt: skip


# -- one merge --------------------------------------------------------------------------


def test_deltas_and_messages_merge_events_alike() -> None:
    events = [
        Reasoning("a"),
        Content("b"),
        ToolCallArgs(1, '{"x"'),
        ToolCallStart(0, "id-0", "f"),
        Reasoning("c"),
        ToolCallArgs(0, "{}"),
        ToolCallStart(1, "id-1", "g"),
        ToolCallArgs(1, ": 1}"),
        Content("d"),
        ToolCallArgs(2, "{}"),  # no header: a delta carries it, a message has no call
    ]
    delta = to_delta(events)
    assert delta is not None
    assert (delta.reasoning, delta.content) == ("ac", "bd")
    assert delta.tool_calls is not msgspec.UNSET
    shown = [(t.index, t.id, t.function.arguments) for t in delta.tool_calls]
    assert shown == [(1, "id-1", '{"x": 1}'), (0, "id-0", "{}"), (2, msgspec.UNSET, "{}")]
    parsed = collect(events, hide_reasoning=False, content_default=None, empty=None)
    assert (parsed.reasoning, parsed.content) == ("ac", "bd")
    assert [(c.id, c.function.name, c.function.arguments) for c in parsed.tool_calls] == [
        ("id-0", "f", "{}"),
        ("id-1", "g", '{"x": 1}'),
    ]
