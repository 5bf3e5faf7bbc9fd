"""vLLM's tests/tool_parsers/ cases of hermes, llama3_json, pythonic and mistral as tables;
DeepSeek, DSML, kimi_k2 and qwen3_coder are in test_tool_cases_markers.py, the Case and its
check in shared/tool_cases.py.

Each case runs non-streaming (`parse_whole`) and streamed through the real incremental
detokenizer in several chunkings; formats whose markers are text are also streamed as
text-only character deltas. Arguments are compared as JSON values unless the case says
`exact` (vLLM's test compares the text).

`deviation` marks where we answer differently from vLLM on purpose; the reason is
always the same: our non-streaming answer is the streaming engine run once, and a
stream cannot take back what it has sent (a header, prose before a call).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from tokenizers import Tokenizer

from tests.core.parsers.shared.harness import (
    LLAMA_SPECIAL,
    MISTRAL_OLD_SPECIAL,
    MISTRAL_SPECIAL,
    marker_tokenizer,
    parser,
    plain_tokenizer,
    request,
)
from tests.core.parsers.shared.tool_cases import NS, Case, S, check
from tests.core.parsers.shared.tool_cases import qwen_tok as qwen_tok  # (the fixture)

# -- hermes (vLLM's test_hermes_tool_parser.py) ----------------------------------------

_TEMP = (
    '<tool_call>{"name": "get_current_temperature","arguments": {"location":"San Francisco, '
    'California, United States", "unit": "celsius"}}</tool_call>'
)
_TEMP_SF = (
    '<tool_call>{"name": "get_current_temperature", "arguments": {"location": "San Francisco",'
    ' "unit": "celsius"}}</tool_call>'
)
_FINAL = '<tool_call>\n{"name": "final_answer", "arguments": {"trigger": true}}\n</tool_call>'
_PRIOR = "This is some prior text that has nothing to do with tool calling."

H_CASES = [
    Case("H01", _PRIOR, _PRIOR, (), (S,)),
    Case("H02", _FINAL, None, (("final_answer", '{"trigger": true}'),), (S,), exact=True),
    Case("H03", _TEMP, None, (("get_current_temperature",
         {"location": "San Francisco, California, United States", "unit": "celsius"}),), (S,)),
    Case("H04", _TEMP_SF, None,
         (("get_current_temperature", {"location": "San Francisco", "unit": "celsius"}),)),
    Case("H05", 'Sure, let me check the weather.<tool_call>{"name": "get_weather", "arguments":'
         ' {"city": "NYC"}}</tool_call>', "Sure, let me check the weather.",
         (("get_weather", {"city": "NYC"}),)),
    Case("H06", '<tool_call>{"name": "search", "arguments": {"q": "cats"}}</tool_call><tool_call>'
         '{"name": "search", "arguments": {"q": "dogs"}}</tool_call>', None,
         (("search", {"q": "cats"}), ("search", {"q": "dogs"}))),
    Case("H07", "This is not a tool call.", "This is not a tool call.", (), (NS,)),
    Case("H08", _FINAL, None, (("final_answer", '{"trigger": true}'),), (NS,), exact=True),
    Case("H09", '<tool_call>\n{"name": "final_answer", "arguments": {"trigger": true}}', None,
         (("final_answer", '{"trigger": true}'),), exact=True),
    Case("H10", '<tool_call>\n{"name": "final_answer", "arguments": {"trigger": true}', None,
         (("final_answer", '{"trigger": true}'),), exact=True,
         deviation="vLLM's non-streaming answers no call for the unclosed object; the "
         "stream has sent the header and the complete arguments by then"),
    Case("H11", '<tool_call>\n{"name": "get_db_config", "arguments": "{\\"param\\": '
         '\\"max_connections\\"}"}\n</tool_call>', None,
         (("get_db_config", {"param": "max_connections"}),)),
    Case("H12", '<tool_call>\n{"name": "do_thing", "arguments": "hello"}\n</tool_call>', None,
         (("do_thing", "hello"),)),
    Case("H14", 'Hi!<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>', "Hi!",
         (("f", {"x": 1}),)),
    Case("H/between", '<tool_call>{"name": "f", "arguments": {}}</tool_call>\nthen text'
         '<tool_call>{"name": "g", "arguments": {}}</tool_call> after', None,
         (("f", {}), ("g", {}))),
    Case("H/name-after-args", '<tool_call>{"arguments": {"x": [1, {"y": "}"}]}, "name": "f"}'
         "</tool_call>", None, (("f", '{"x": [1, {"y": "}"}]}'),), exact=True),
]  # fmt: skip


@pytest.fixture(scope="module", params=["qwen", "plain"])
def hermes_tok(request: pytest.FixtureRequest, qwen_tok: Tokenizer) -> Tokenizer:
    """`<tool_call>` as one added token (Qwen) and as several ordinary tokens."""
    return qwen_tok if request.param == "qwen" else plain_tokenizer()


@pytest.mark.parametrize("case", H_CASES, ids=lambda c: c.id)
def test_hermes(hermes_tok: Tokenizer, case: Case) -> None:
    check(parser(hermes_tok, None, "hermes", req=request(["x"])), case)


def test_h01_every_token_says_something(qwen_tok: Tokenizer) -> None:
    p = parser(qwen_tok, None, "hermes", req=request(["x"]))
    per_chunk, _ = p.stream_ids(p.ids(_PRIOR), list(range(1, len(p.ids(_PRIOR)))))
    assert all(per_chunk), "a token of plain prose produced no delta"


@pytest.mark.parametrize("every", [2, 3, 5, 8])
def test_h04_stream_intervals(qwen_tok: Tokenizer, every: int) -> None:
    p = parser(qwen_tok, None, "hermes", req=request(["x"]))
    got = p.stream(_TEMP_SF, every)
    assert got.calls[0][0] == "get_current_temperature"
    assert got.args() == [{"location": "San Francisco", "unit": "celsius"}]


@pytest.mark.parametrize(
    "value", [{"param": "max_connections"}, "hello", "{hello world}", "[oops", '{"a": 1} tail text']
)
def test_h13_string_arguments_stream_as_they_parse(qwen_tok: Tokenizer, value: Any) -> None:
    text = "<tool_call>" + json.dumps({"name": "f", "arguments": value}) + "</tool_call>"
    p = parser(qwen_tok, None, "hermes", req=request(["f"]))
    whole = p.whole(text).calls
    for every in (1, 3):
        assert p.stream(text, every).calls == whole
    json.loads(whole[0][1])  # always valid JSON


# -- llama3_json (test_llama3_json_tool_parser.py) ----------------------------------------

_SEARCH1 = '{"name": "searchTool", "parameters": {"query": "test1"}}'
_INCIDENTS = '{"name": "getOpenIncidentsTool", "parameters": {}}'
_SEARCH2 = '{"name": "searchTool", "parameters": {"query": "test2"}}'
_THREE = (("searchTool", {"query": "test1"}), ("getOpenIncidentsTool", {}),
          ("searchTool", {"query": "test2"}))  # fmt: skip

L_CASES = [
    Case("L01", 'Here is the result: {"name": "getOpenIncidentsTool", "parameters": {}} Would you '
         "like to know more?", "Here is the result: ", (("getOpenIncidentsTool", "{}"),),
         exact=True, deviation="vLLM's non-streaming drops the prose (content None); its "
         "streaming parser never sees the call. We stream the prose before the call"),
    Case("L02", '{"name": "searchTool", "parameters": {"query": "test query", "limit": 10}}', None,
         (("searchTool", {"query": "test query", "limit": 10}),)),
    Case("L03", "This is just some text without any tool calls",
         "This is just some text without any tool calls"),
    Case("L04", '{"name": "invalidTool", "parameters": {invalid json}', None,
         (("invalidTool", "{}"),), exact=True,
         deviation="vLLM answers no tools; a stream has sent the header when the arguments "
         "turn out not to be JSON, so they are closed there (differences.md invalid-arguments)"),
    Case("L05", '{"name": "searchTool", "arguments": {"query": "test"}}', None,
         (("searchTool", {"query": "test"}),)),
    Case("L06", f"{_SEARCH1}; {_INCIDENTS}; {_SEARCH2}", None, _THREE),
    Case("L07", f"Let me search. {_SEARCH1} ; {_INCIDENTS} ; {_SEARCH2} Done.",
         "Let me search. ", _THREE, deviation="content None in vLLM (prose dropped)"),
    Case("L08", '{"name": "complexTool", "parameters": {"level1": {"level2": {"level3": '
         '{"level4": {"value": "deep"}}}}}}', None,
         (("complexTool", {"level1": {"level2": {"level3": {"level4": {"value": "deep"}}}}}),)),
    Case("L09", '{"name": "searchTool", "parameters": {"query": "test {value} [complex]","nested":'
         ' {"inner": "more {brackets}"}}}', None,
         (("searchTool", {"query": "test {value} [complex]",
                          "nested": {"inner": "more {brackets}"}}),)),
    Case("L10", '{"name": "parserTool", "parameters": {"text": "He said \\"Hello {world}\\""}}',
         None, (("parserTool", {"text": 'He said "Hello {world}"'}),)),
    Case("L11", '{"parameters": {}}', '{"parameters": {}}'),
    Case("L12", '{"name": "toolWithoutParams"}', '{"name": "toolWithoutParams"}'),
    Case("L13", '{"name": "searchTool", "parameters": {"query": "test"}} I used {searchTool} for '
         "this.", None, (("searchTool", {"query": "test"}),)),
    Case("L14", '{"name": "searchTool", "parameters": {"query": "test"}} The arguments I passed '
         'were {"query": "test"}', None, (("searchTool", {"query": "test"}),)),
    Case("L/python-tag", "<|python_tag|>" + _SEARCH1, None, (("searchTool", {"query": "test1"}),)),
    Case("L/eot", _SEARCH1 + "<|eot_id|>", None, (("searchTool", {"query": "test1"}),)),
]  # fmt: skip


@pytest.fixture(scope="module")
def llama_tok() -> Tokenizer:
    return marker_tokenizer(special=LLAMA_SPECIAL)


@pytest.mark.parametrize("case", L_CASES, ids=lambda c: c.id)
def test_llama3_json(llama_tok: Tokenizer, case: Case) -> None:
    check(parser(llama_tok, None, "llama3_json", req=request(["x"])), case)


@pytest.mark.parametrize("sep", ["; ", ";", ";\n", "\n"], ids=repr)
def test_l15_separators_in_seven_char_chunks(llama_tok: Tokenizer, sep: str) -> None:
    p = parser(llama_tok, None, "llama3_json", req=request(["x"]))
    text = _SEARCH1 + sep + _INCIDENTS
    for got in (p.stream_chars(text, 7), p.stream(text, 2)):
        assert got.names() == ["searchTool", "getOpenIncidentsTool"]
        assert got.args()[0] == {"query": "test1"}


# -- pythonic (test_pythonic_tool_parser.py) ----------------------------------------------

_P02 = "get_weather(city='San Francisco', metric='celsius')"
_P02_ARGS = '{"city": "San Francisco", "metric": "celsius"}'
_P03 = (
    "register_user(name='John Doe', age=37, address={'city': 'San Francisco', 'state': 'CA'}, "
    "role=None, passed_test=True, aliases=['John', 'Johnny'])"
)
_P03_ARGS = (
    '{"name": "John Doe", "age": 37, "address": {"city": "San Francisco", "state": "CA"}, '
    '"role": null, "passed_test": true, "aliases": ["John", "Johnny"]}'
)

P_CASES = [
    Case("P01", "How can I help you today?", "How can I help you today?"),
    Case("P02", f"[{_P02}]", None, (("get_weather", _P02_ARGS),), exact=True),
    Case("P03", f"[{_P03}]", None, (("register_user", _P03_ARGS),), exact=True),
    Case("P04", "[get_weather()]", None, (("get_weather", "{}"),), exact=True),
    Case("P05a", "[do_something_cool(additional_data={})]", None,
         (("do_something_cool", '{"additional_data": {}}'),), exact=True),
    Case("P05b", "[do_something_cool(steps=[])]", None,
         (("do_something_cool", '{"steps": []}'),), exact=True),
    Case("P06", "[get_weather(city='Martha\\'s Vineyard', metric='\\\"cool units\\\"')]", None,
         (("get_weather", {"city": "Martha's Vineyard", "metric": '"cool units"'}),)),
    Case("P07", f"[{_P02}, {_P03}]", None,
         (("get_weather", _P02_ARGS), ("register_user", _P03_ARGS)), exact=True),
    Case("P09", f"[bad(x=b'z'), {_P02}]", None, (("get_weather", _P02_ARGS),), exact=True),
    Case("P10", f"[calc(x=1e999), {_P02}]", None, (("get_weather", _P02_ARGS),), (NS,),
         exact=True),
    Case("P11", "[foo(x=1])]", "[foo(x=1])]", (), (S,)),
    Case("P/citation", "[1] is a citation, not a call", "[1] is a citation, not a call"),
    Case("P/wrapped", f"<|python_start|>[{_P02}]<|python_end|>", None,
         (("get_weather", _P02_ARGS),), exact=True),
]  # fmt: skip


@pytest.mark.parametrize("case", P_CASES, ids=lambda c: c.id)
def test_pythonic(llama_tok: Tokenizer, case: Case) -> None:
    check(parser(llama_tok, None, "pythonic", req=request(["x"])), case)


def test_p08_deltas(llama_tok: Tokenizer) -> None:
    p = parser(llama_tok, None, "pythonic", req=request(["x"]))
    got = p.stream_deltas(
        [
            "[get_weather(city='San",
            " Francisco', metric='celsius'), get_weather(), do_something_cool(steps=[])]",
        ]
    )
    assert got.calls == [
        ("get_weather", _P02_ARGS),
        ("get_weather", "{}"),
        ("do_something_cool", '{"steps": []}'),
    ]
    assert not got.content


# -- mistral (test_mistral_tool_parser.py) ----------------------------------------------

_WEATHER = {"city": "San Francisco", "state": "CA", "unit": "celsius"}
MT_OLD = [
    Case("MT01", '[TOOL_CALLS][{"name": "add", "arguments":{"a": 3.5, "b": 4}}]', None,
         (("add", json.dumps({"a": 3.5, "b": 4})),), exact=True),
    Case("MT02", '[TOOL_CALLS] [{"arguments":{"city": "San Francisco", "state": "CA", "unit": '
         '"celsius"}, "name": "get_current_weather"}]', None,
         (("get_current_weather", _WEATHER),)),
    Case("MT03", '[TOOL_CALLS] [{"arguments":{"name": "John Doe"}, "name": "get_age"}]', None,
         (("get_age", {"name": "John Doe"}),)),
    Case("MT04", '[TOOL_CALLS] [{"name": "add", "arguments": {"a": 3.5, "b": 4}}, {"name": '
         '"get_current_weather", "arguments":{"city": "San Francisco", "state": "CA", "unit": '
         '"celsius"}}]', None, (("add", {"a": 3.5, "b": 4}), ("get_current_weather", _WEATHER))),
    Case("MT05", 'Hello[TOOL_CALLS] [{"name": "add", "arguments":{"a": 1, "b": 2}}]', "Hello",
         (("add", {"a": 1, "b": 2}),)),
    Case("MT06", '[TOOL_CALLS] [{"name": "get_current_weather", "arguments":{"city": "Dallas", '
         '"state": "TX", "unit": "fahrenheit"}}]\nextra trailing data', None,
         (("get_current_weather", {"city": "Dallas", "state": "TX", "unit": "fahrenheit"}),)),
    Case("MT07", '[TOOL_CALLS] [{"name": "add", "arguments": {"a": 1}}][TOOL_CALLS] [{"name": '
         '"mul", "arguments": {"b": 2}}]', None, (("add", {"a": 1}), ("mul", {"b": 2})),
         deviation="vLLM raises ValueError ('Only one BOT token'); a stream cannot raise "
         "half-way, so the second group is parsed as well"),
    Case("MT08", '[TOOL_CALLS]  junk [{"name": "add", "arguments":{"a": 1, "b": 2}}] trail',
         None, (("add", {"a": 1, "b": 2}),)),
    Case("MT09", "[TOOL_CALLS] not json at all", " not json at all",
         deviation="vLLM strips the leading space"),
    Case("MT13", "This is a test", "This is a test"),
]  # fmt: skip

MT_V11 = [
    Case("MT10", '[TOOL_CALLS]add_this_and_that{"a": 3.5, "b": 4}', None,
         (("add_this_and_that", {"a": 3.5, "b": 4}),)),
    Case("MT11", '[TOOL_CALLS]get_current_weather{"city": "San Francisco", "state": "CA", "unit":'
         ' "celsius"}', None, (("get_current_weather", _WEATHER),)),
    Case("MT12", '[TOOL_CALLS]add{"a": 3.5, "b": 4}[TOOL_CALLS]multiply{"a": 3, "b": 6}', None,
         (("add", {"a": 3.5, "b": 4}), ("multiply", {"a": 3, "b": 6}))),
    Case("MT13", "This is a test", "This is a test"),
    Case("MT/args-token", '[TOOL_CALLS]add[ARGS]{"a": 1}', None, (("add", {"a": 1}),)),
]  # fmt: skip


@pytest.mark.parametrize("case", MT_OLD, ids=lambda c: c.id)
def test_mistral_pre_v11(case: Case) -> None:
    tok = marker_tokenizer(special=MISTRAL_OLD_SPECIAL)
    p = parser(tok, None, "mistral", req=request(["x"]))
    assert p.spec.tools is not None and p.spec.tools.calls is not None  # the JSON-list layout
    check(p, case)


@pytest.mark.parametrize("case", MT_V11, ids=lambda c: c.id)
def test_mistral_v11(case: Case) -> None:
    p = parser(marker_tokenizer(special=MISTRAL_SPECIAL), None, "mistral", req=request(["x"]))
    check(p, case)


def test_mistral_ids_are_nine_alphanumerics() -> None:
    p = parser(marker_tokenizer(special=MISTRAL_SPECIAL), None, "mistral", req=request(["x"]))
    ids = p.whole('[TOOL_CALLS]add{"a": 1}[TOOL_CALLS]mul{"b": 2}').ids
    assert len(ids) == 2 and ids[0] != ids[1]
    assert all(len(i) == 9 and i.isalnum() and i.isascii() for i in ids)
