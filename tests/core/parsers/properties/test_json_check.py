"""The JSON prefix check on streamed arguments (json_check.py), and through a call list.

Oracles: `json.loads` (whatever goes out parses once closed, whatever valid JSON comes in
goes out byte for byte) and the straightforward reading (the text fed whole in one piece).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from tests.core.parsers.shared.harness import marker_tokenizer, parser, request
from tests.support.examples import examples
from worker.core.parsers.arguments import json_check
from worker.core.parsers.language.state import JsonCheck

_json = hs.recursive(
    hs.none()
    | hs.booleans()
    | hs.integers(-(10**12), 10**12)
    | hs.floats(allow_nan=False, allow_infinity=False)
    | hs.text(max_size=12),
    lambda inner: (
        hs.lists(inner, max_size=4) | hs.dictionaries(hs.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
_objects = hs.dictionaries(hs.text(max_size=6), _json, max_size=5)


def _run(text: str, cuts: list[int], *, finish: bool = True) -> str:
    check = JsonCheck()
    out, last = [], 0
    for cut in [*sorted(set(cuts)), len(text)]:
        out.append(json_check.feed(check, text[last:cut]))
        last = cut
    if finish:
        out.append(json_check.finish(check))
    return "".join(out)


def _cuts(text: str) -> hs.SearchStrategy[list[int]]:
    return hs.lists(hs.integers(0, len(text)), max_size=8)


@settings(max_examples=examples(300), deadline=None)
@given(hs.data(), _objects, hs.sampled_from([None, 2, "  "]), hs.booleans())
def test_valid_json_goes_out_as_written(data, value, indent, ascii_only):
    """A whole, valid value: every byte goes out, in any chunking, and nothing is added."""
    text = json.dumps(value, indent=indent, ensure_ascii=ascii_only)
    assert _run(text, data.draw(_cuts(text))) == text


@settings(max_examples=examples(400), deadline=None)
@given(hs.data(), _objects)
def test_a_cut_value_is_closed(data, value):
    """Cut anywhere: what goes out is a prefix of the text plus closers, and it parses."""
    text = json.dumps(value, ensure_ascii=False)
    cut = data.draw(hs.integers(1, len(text)))
    out = _run(text[:cut], data.draw(_cuts(text[:cut])))
    json.loads(out)
    kept = out.rstrip('"}]')
    assert text.startswith(kept), (text, out)
    assert _run(text[:cut], []) == out  # chunking changes nothing


@settings(max_examples=examples(400), deadline=None)
@given(hs.data(), _objects, hs.sampled_from(list("x}],:\"'\\{[0.e-tn\x01 ")))
def test_a_broken_value_is_closed_where_it_broke(data, value, junk):
    """A character that is not JSON where it stands: the text before it, closed, parses;
    nothing after it goes out."""
    text = json.dumps(value, ensure_ascii=False)
    at = data.draw(hs.integers(1, len(text)))
    broken = text[:at] + junk + text[at:]
    try:
        json.loads(broken)
        valid = True
    except ValueError:
        valid = False
    out = _run(broken, data.draw(_cuts(broken)))
    json.loads(out)
    if valid:
        assert out == broken
    assert _run(broken, []) == out


@pytest.mark.parametrize(
    ("text", "out"),
    [
        ("{invalid json}", "{}"),
        ('{"city": "Tok', '{"city": "Tok"}'),
        ('{"a": 1, "b', '{"a": 1}'),
        ('{"a": 1, "b": tr', '{"a": 1}'),
        ('{"a": 12', '{"a": 12}'),
        ('{"a": 1.', '{"a": 1}'),
        ('{"a": -', "{}"),
        ('{"a": [1, 2', '{"a": [1, 2]}'),
        ('{"a": [1, 2,', '{"a": [1, 2]}'),
        ('{"a": "x\\u00', '{"a": "x"}'),
        ('{"a": "x\\', '{"a": "x"}'),
        ('{"a": "x\\q"}', '{"a": "x"}'),
        ('{"a": 01}', '{"a": 0}'),
        ('{"a": 1,}', '{"a": 1}'),
        ('{"a" 1}', "{}"),
        ('{"a": {"b": null}', '{"a": {"b": null}}'),
        ('{"a": {"b": nul', '{"a": {}}'),
        ("{'a': 1}", "{}"),
        ('{"a": "line\nbreak"}', '{"a": "line"}'),  # a raw control character
        ('{"a": 1]', '{"a": 1}'),
        ("[]", "[]"),
        ("{}", "{}"),
        ("", ""),
    ],
)
def test_cases(text, out):
    assert _run(text, []) == out
    assert _run(text, list(range(len(text)))) == out  # one character at a time


def test_after_a_break_nothing_goes_out():
    check = JsonCheck()
    assert json_check.feed(check, '{"a": 1, x') == '{"a": 1}'
    assert json_check.feed(check, '"b": 2}') == ""
    assert json_check.finish(check) == ""


def test_what_is_held_stays_small():
    """Only the text since the last safe point waits: a long string streams."""
    check = JsonCheck()
    assert json_check.feed(check, '{"code": "') == '{"code": "'
    for _ in range(100):
        assert json_check.feed(check, "x" * 50) == "x" * 50
        assert check.held == ""
    assert json_check.feed(check, '", "next') == '"'
    assert check.held == ', "next'


@pytest.mark.parametrize(
    ("output", "args"),
    [
        # llama4_json (vLLM's own case): the header is out before the arguments break.
        ('{"name": "get_weather", "parameters": {invalid json}', "{}"),
        ('{"name": "get_weather", "parameters": {"city": "Tok', '{"city": "Tok"}'),
        ('{"name": "get_weather", "parameters": {"city": "Tokyo", "days": 3,}}', None),
        ('{"parameters": {"city": "Tokyo", oops}, "name": "get_weather"}', '{"city": "Tokyo"}'),
    ],
)
def test_through_a_call_list(output, args):
    """The check behind llama3_json: closed arguments whole and in every chunking, and the
    same text in the call whether the name comes first or last."""
    p = parser(marker_tokenizer(), None, "llama3_json", req=request(["get_weather"]))
    want = args if args is not None else '{"city": "Tokyo", "days": 3}'
    for how, got in [("whole", p.whole(output)), *p.all_streams(output)]:
        assert got.calls == [("get_weather", want)], how
        json.loads(got.calls[0][1])


@settings(max_examples=examples(150), deadline=None)
@given(hs.data(), _objects, hs.integers(0, 2**16))
def test_a_cut_call_list_call_has_arguments_that_parse(data, value, seed):
    """llama3_json output cut anywhere after the name: the call's arguments parse, are
    the written text closed, and the stream says what the whole response says."""
    p = parser(marker_tokenizer(), None, "llama3_json", req=request(["f"]))
    args = json.dumps(value, ensure_ascii=False)
    head = '{"name": "f", "parameters": '
    text = head + args + "}"
    cut = data.draw(hs.integers(len(head) + 1, len(text)))
    whole = p.whole(text[:cut])
    assert [n for n, _ in whole.calls] == ["f"]
    got = whole.calls[0][1]
    json.loads(got)
    assert args.startswith(got.rstrip('"}] ')), (args, got)
    assert p.stream(text[:cut], seed=seed).calls == whole.calls
    assert p.stream(text[:cut], 1).calls == whole.calls


def test_nesting_is_bounded():
    """The open containers are state: past MAX_DEPTH the text is closed as broken."""
    deep = "[" * (json_check.MAX_DEPTH + 10)
    out = _run('{"a": ' + deep, [])
    assert (
        out == '{"a": ' + "[" * (json_check.MAX_DEPTH - 1) + "]" * (json_check.MAX_DEPTH - 1) + "}"
    )
    json.loads(out)
    ok = "[" * (json_check.MAX_DEPTH - 1) + "]" * (json_check.MAX_DEPTH - 1)
    assert _run('{"a": ' + ok + "}", []) == '{"a": ' + ok + "}"
