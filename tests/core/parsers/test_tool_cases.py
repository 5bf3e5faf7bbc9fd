"""reference/vllm-parsers.md §5.5-5.12: tool-call formats, as tables.

Each case runs non-streaming (`parse_whole`) and streamed through the real incremental
detokenizer in several chunkings; formats whose markers are text are also streamed as
text-only character deltas. Arguments are compared as JSON values unless the case says
`exact` (the reference's "exactly").

`deviation` marks where we answer differently from vLLM on purpose; the reason is
always the same: our non-streaming answer is the streaming engine run once, and a
stream cannot take back what it has sent (a header, prose before a call).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from tokenizers import Tokenizer

from tests.core.parsers.shared.harness import (
    KIMI_SPECIAL,
    LLAMA_SPECIAL,
    MISTRAL_OLD_SPECIAL,
    MISTRAL_SPECIAL,
    QWEN_ADDED,
    QWEN_SPECIAL,
    Parser,
    Result,
    marker_tokenizer,
    parser,
    plain_tokenizer,
    request,
    tool,
)

NS, S, CHARS = "NS", "S", "chars"


@dataclass(frozen=True)
class Case:
    id: str
    text: str
    content: str | None
    calls: tuple[tuple[str, Any], ...] = ()
    modes: tuple[str, ...] = (NS, S)
    exact: bool = False  # arguments compared as text
    deviation: str = ""


def _results(p: Parser, case: Case) -> list[tuple[str, Result]]:
    out: list[tuple[str, Result]] = []
    if NS in case.modes:
        out.append(("NS", p.whole(case.text)))
    if S in case.modes:
        out += [(f"S {how}", r) for how, r in p.all_streams(case.text)]
    if CHARS in case.modes:
        out += [(f"{n} chars", p.stream_chars(case.text, n)) for n in (1, 5, 7)]
    return out


def check(p: Parser, case: Case) -> None:
    for how, got in _results(p, case):
        assert got.reasoning is None, f"{case.id} {how}"
        assert got.content == case.content, f"{case.id} {how}"
        assert got.names() == [n for n, _ in case.calls], f"{case.id} {how}"
        for (name, want), (_, args) in zip(case.calls, got.calls, strict=True):
            if case.exact:
                assert args == want, f"{case.id} {how} {name}"
            else:
                assert json.loads(args) == want, f"{case.id} {how} {name}"


# -- §5.5 hermes -----------------------------------------------------------------------

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


@pytest.fixture(scope="module")
def qwen_tok() -> Tokenizer:
    return marker_tokenizer(added=QWEN_ADDED, special=QWEN_SPECIAL)


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


# -- §5.6 llama3_json ---------------------------------------------------------------------

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
         "turn out not to be JSON, so they are closed there (README invalid-arguments)"),
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


# -- §5.7 pythonic ------------------------------------------------------------------------

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


# -- §5.8 mistral -----------------------------------------------------------------------

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


# -- §5.9 DeepSeek V3 / V3.1 (the real DeepSeek tokenizer has these markers) ---------------

_B, _E = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
_C, _CE, _SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"

D_CASES = [
    Case("D01", f'normal text{_B}{_C}foo{_SEP}{{"x":1}}{_CE}{_E}', "normal text",
         (("foo", '{"x":1}'),), exact=True),
    Case("D02", f'some prefix text{_B}{_C}foo{_SEP}{{"x":1}}{_CE}{_C}bar{_SEP}{{"y":2}}{_CE}{_E}'
         " some suffix text", "some prefix text", (("foo", {"x": 1}), ("bar", {"y": 2}))),
    Case("D03", f"Let me look that up.{_B}get_weather", "Let me look that up.",
         deviation="vLLM gives the whole text back as content; the stream has withheld the "
         "block from its opening marker on"),
    Case("D04", f'{_B}foo{_SEP}{{"x":1}}{_E}', None, deviation="vLLM: content = input"),
]  # fmt: skip


@pytest.mark.parametrize("case", D_CASES, ids=lambda c: c.id)
def test_deepseek_v31(deepseek: Tokenizer, case: Case) -> None:
    check(parser(deepseek, None, "deepseek_v31", req=request(["x"])), case)


def test_d05_deepseek_v3_fenced_arguments(deepseek: Tokenizer) -> None:
    text = f'{_B}{_C}function{_SEP}get_weather\n```json\n{{"city": "Paris"}}\n```{_CE}{_E}'
    check(
        parser(deepseek, None, "deepseek_v3", req=request(["x"])),
        Case("D05", text, None, (("get_weather", '{"city": "Paris"}'),), exact=True),
    )


# -- §5.10 DSML on the real DeepSeek V4 tokenizer -------------------------------------------


def block(
    fn: str, params: dict[str, str], wrapper: str = "tool_calls", string: str = "true"
) -> str:
    out = f'<｜DSML｜{wrapper}>\n<｜DSML｜invoke name="{fn}">\n'
    for k, v in params.items():
        out += f'<｜DSML｜parameter name="{k}" string="{string}">{v}</｜DSML｜parameter>\n'
    return out + f"</｜DSML｜invoke>\n</｜DSML｜{wrapper}>"


_S02 = block("search", {"query": "vllm"}, wrapper="function_calls")
_S04_PARAMS = {
    "whole": "5.0",
    "flag": "true",
    "payload": '{"nested":true}',
    "items": "[1,2]",
    "empty": "null",
}

S_V4 = [
    Case("S01", "Let me check. " + block("get_weather", {"location": "Beijing", "unit": "celsius"}),
         "Let me check. ", (("get_weather", {"location": "Beijing", "unit": "celsius"}),),
         (NS, S, CHARS)),
    # vLLM 0.33: an invoke is a call even outside a block of the right spelling.
    Case("S02", _S02, "<｜DSML｜function_calls>\n", (("search", {"query": "vllm"}),),
         (NS, S, CHARS)),
    Case("S/variant-opener", _S02.replace("function_calls>", "toolcalls>", 1), None,
         (("search", {"query": "vllm"}),), (NS, S, CHARS)),
    Case("S/text-after-block-dropped", "Sure. " + block("search", {"query": "q"}) + "\nDone.",
         "Sure. ", (("search", {"query": "q"}),), (NS, S, CHARS)),
    Case("S/missing-flag-is-json", '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="f">\n'
         '<｜DSML｜parameter name="n">5</｜DSML｜parameter>\n'
         '<｜DSML｜parameter name="q">q</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
         "</｜DSML｜tool_calls>", None, (("f", {"n": 5, "q": "q"}),), (NS, S, CHARS)),
    Case("S03", block("search", {"query": "deepseek v4"}), None,
         (("search", {"query": "deepseek v4"}),), (NS, S, CHARS)),
    Case("S/two-calls", '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="a">\n</｜DSML｜invoke>\n'
         '<｜DSML｜invoke name="b">\n<｜DSML｜parameter name="q" string="true">x < y </ z'
         "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>", None,
         (("a", {}), ("b", {"q": "x < y </ z"})), (NS, S, CHARS)),
]  # fmt: skip

S_V32 = [
    Case("S04", block("convert", _S04_PARAMS, "function_calls", string="false"), None,
         (("convert", {"whole": 5.0, "flag": True, "payload": {"nested": True}, "items": [1, 2],
                       "empty": None}),), (NS, S, CHARS)),
    Case("S05", block("convert", _S04_PARAMS, "function_calls", string="true"), None,
         (("convert", {"whole": "5.0", "flag": "true", "payload": '{"nested":true}',
                       "items": "[1,2]", "empty": "null"}),), (NS, S, CHARS)),
    Case("S07", "Hello, world!", "Hello, world!"),
]  # fmt: skip


@pytest.mark.parametrize("case", S_V4, ids=lambda c: c.id)
def test_dsml_v4(deepseek: Tokenizer, case: Case) -> None:
    check(parser(deepseek, None, "deepseek_v4", req=request(["x"])), case)


@pytest.mark.parametrize("case", S_V32, ids=lambda c: c.id)
def test_dsml_v32(deepseek: Tokenizer, case: Case) -> None:
    check(parser(deepseek, None, "deepseek_v32", req=request(["x"])), case)


def test_s06_deltas(deepseek: Tokenizer) -> None:
    p = parser(deepseek, None, "deepseek_v32", req=request(["x"]))
    got = p.stream_deltas(
        [
            "Thinking... ",
            "<｜DSML｜function_calls>\n",
            '<｜DSML｜invoke name="get_weather">\n',
            '<｜DSML｜parameter name="location" string="true">SF</｜DSML｜parameter>\n',
            "</｜DSML｜invoke>\n",
            "</｜DSML｜function_calls>",
        ]
    )
    assert (got.content, got.calls) == ("Thinking... ", [("get_weather", '{"location": "SF"}')])


def test_dsml_schema_types_convert_values(deepseek: Tokenizer) -> None:
    """string="true" values of non-string parameters are converted by the schema, and a
    string="false" value of a string parameter stays the text the model wrote."""
    p = parser(
        deepseek,
        None,
        "deepseek_v4",
        req=request([tool("f", n="integer", ok="boolean", s="string", o="object")]),
    )
    text = (
        '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="f">\n'
        '<｜DSML｜parameter name="n" string="true">42</｜DSML｜parameter>\n'
        '<｜DSML｜parameter name="ok" string="true">True</｜DSML｜parameter>\n'
        '<｜DSML｜parameter name="s" string="false">123</｜DSML｜parameter>\n'
        '<｜DSML｜parameter name="o" string="true">{"k": [1]}</｜DSML｜parameter>\n'
        "</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
    )
    want = {"n": 42, "ok": True, "s": "123", "o": {"k": [1]}}
    check(p, Case("dsml-schema", text, None, (("f", want),), (NS, S, CHARS)))


def test_dsml_json_values_corrected_as_vllm(deepseek: Tokenizer) -> None:
    """string="false" values (JSON), corrected by the schema as vLLM 0.33 does (found
    by `make parity`): arrays and objects stay as written even for a string parameter,
    a JSON string is parsed as its parameter's type, other scalars of a string
    parameter become their JSON text."""
    schema = tool("f", a="string", o="string", n="integer", b="string")
    p = parser(deepseek, None, "deepseek_v4", req=request([schema]))
    params = {"a": "[1, 2]", "o": '{"k": 1}', "n": '"7"', "b": "true"}
    text = (
        '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="f">\n'
        + "".join(
            f'<｜DSML｜parameter name="{k}" string="false">{v}</｜DSML｜parameter>\n'
            for k, v in params.items()
        )
        + "</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
    )
    want = {"a": [1, 2], "o": {"k": 1}, "n": 7, "b": "true"}
    check(p, Case("dsml-json", text, None, (("f", want),), (NS, S, CHARS)))


# -- §5.11 kimi_k2 -------------------------------------------------------------------------

_SB, _SE = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"


def kimi(call_id: str, args: str) -> str:
    return f"<|tool_call_begin|>{call_id} <|tool_call_argument_begin|>{args}<|tool_call_end|>"


K_CASES = [
    Case("K01", "I'll check. " + _SB + kimi("functions.get_weather:0", '{"city": "Beijing"}') + _SE,
         "I'll check. ", (("get_weather", {"city": "Beijing"}),)),
    Case("K02", _SB + kimi("functions.get_weather:0", '{"city": "Beijing"}')
         + kimi("functions.get_weather:1", '{"city": "Shanghai"}') + _SE, None,
         (("get_weather", {"city": "Beijing"}), ("get_weather", {"city": "Shanghai"}))),
    Case("K03", _SB + kimi("functions.process_html:0", '{"html": "<div>content</div>"}') + _SE,
         None, (("process_html", {"html": "<div>content</div>"}),)),
    Case("K04", _SB + kimi("functions.process_data:0", '{\n  "name": "test",\n  "value": 123\n}')
         + _SE, None, (("process_data", {"name": "test", "value": 123}),)),
    Case("K05", _SB + kimi("get_weather:0", '{"city": "Tokyo"}') + _SE, None,
         (("get_weather", {"city": "Tokyo"}),)),
    Case("K06", _SB + kimi("functions.test:0", "{}") + _SE, None, (("test", "{}"),), exact=True),
    Case("K07", _SB + kimi("functions.bad:0", '{"city": "Beijing"')
         + kimi("functions.good:1", '{"city": "Shanghai"}') + _SE, None,
         (("bad", '{"city": "Beijing"'), ("good", '{"city": "Shanghai"}')), exact=True),
    Case("K08", _SB + kimi("functions.invalid.0", '{"a": 1}')
         + kimi("functions.valid:1", '{"b": 2}') + _SE, None, (("valid", {"b": 2}),)),
    Case("K/after-section", "Sure. " + _SB + kimi("functions.f:0", "{}") + _SE + " trailing",
         "Sure. ", (("f", "{}"),), exact=True),
]  # fmt: skip


@pytest.fixture(scope="module")
def kimi_tok() -> Tokenizer:
    return marker_tokenizer(special=KIMI_SPECIAL)


@pytest.mark.parametrize("case", K_CASES, ids=lambda c: c.id)
def test_kimi_k2(kimi_tok: Tokenizer, case: Case) -> None:
    check(parser(kimi_tok, None, "kimi_k2", req=request(["x", "y"])), case)


def test_kimi_ids_are_the_model_ids(kimi_tok: Tokenizer) -> None:
    p = parser(kimi_tok, None, "kimi_k2", req=request(["get_weather"]))
    text = _SB + kimi("functions.get_weather:0", "{}") + kimi("functions.get_weather:1", "{}")
    assert p.whole(text).ids == ["functions.get_weather:0", "functions.get_weather:1"]
    assert p.stream(text, 1).ids == ["functions.get_weather:0", "functions.get_weather:1"]


def test_k09_deltas(kimi_tok: Tokenizer) -> None:
    p = parser(kimi_tok, None, "kimi_k2", req=request(["get_weather"]))
    got = p.stream_deltas(
        [
            "I'll help. ",
            _SB,
            "<|tool_call_begin|>",
            "functions.get_weather:0 ",
            "<|tool_call_argument_begin|>",
            '{"city": "Beijing"} ',
            "<|tool_call_end|>",
            _SE,
        ]
    )
    assert got.content == "I'll help. "
    assert got.ids == ["functions.get_weather:0"]
    assert got.args() == [{"city": "Beijing"}]


def test_k10_bare_counter_with_one_tool(kimi_tok: Tokenizer) -> None:
    p = parser(kimi_tok, None, "kimi_k2", req=request([tool("get_weather", city="string")]))
    text = _SB + kimi("0", '{"city": "Tokyo", "unit": "celsius"}') + _SE
    for got in (p.whole(text), p.stream(text, 1)):
        assert got.names() == ["get_weather"] and got.ids == ["0"]


def test_k10_bare_counter_names_the_tool_its_arguments_fit(kimi_tok: Tokenizer) -> None:
    tools = [tool("get_weather", city="string"), tool("book_flight", origin="string")]
    p = parser(kimi_tok, None, "kimi_k2", req=request(tools))
    text = _SB + kimi("0", '{"city": "Tokyo"}') + _SE
    for got in (p.whole(text), p.stream(text, 1)):
        assert got.calls == [("get_weather", '{"city": "Tokyo"}')]


def test_k11_ambiguous_bare_counter_is_no_call(kimi_tok: Tokenizer) -> None:
    # Both tools take a `city`, so the arguments do not say which one was meant.
    tools = [tool("get_weather", city="string"), tool("book_flight", city="string", date="string")]
    p = parser(kimi_tok, None, "kimi_k2", req=request(tools))
    text = _SB + kimi("0", '{"city": "Tokyo"}') + _SE
    for got in (p.whole(text), p.stream(text, 1)):
        assert got.calls == [] and got.content is None


# -- §5.12 qwen3_coder ------------------------------------------------------------------------

WEATHER_TOOL = tool("get_current_weather", city="string", state="string", unit="string")
AREA_TOOL = tool("calculate_area", shape="string", dimensions="object", precision="integer")


def xml_call(fn: str, params: dict[str, str]) -> str:
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params.items())
    return f"<tool_call>\n<function={fn}>\n{body}</function>\n</tool_call>"


_C01 = xml_call("get_current_weather", {"city": "Dallas", "state": "TX", "unit": "fahrenheit"})
_C01_ARGS = {"city": "Dallas", "state": "TX", "unit": "fahrenheit"}

C_CASES = [
    Case("C01", _C01, None, (("get_current_weather", _C01_ARGS),), (NS, S, CHARS)),
    Case("C02", "Sure! Let me check the weather for you." + _C01,
         "Sure! Let me check the weather for you.", (("get_current_weather", _C01_ARGS),)),
    Case("C03", xml_call("calculate_area", {"shape": "rectangle",
         "dimensions": '{"width": 10, \n "height": 20}', "precision": "2"}), None,
         (("calculate_area", {"shape": "rectangle", "dimensions": {"width": 10, "height": 20},
                              "precision": 2}),), (NS, S, CHARS)),
    Case("C04", _C01 + "\n" + xml_call("get_current_weather",
         {"city": "Orlando", "state": "FL", "unit": "fahrenheit"}), None,
         (("get_current_weather", _C01_ARGS),
          ("get_current_weather", {"city": "Orlando", "state": "FL", "unit": "fahrenheit"}))),
    Case("C05", "Let me calculate that area for you." + xml_call("calculate_area",
         {"shape": "circle", "dimensions": '{"radius": 15.5}', "precision": "3"}),
         "Let me calculate that area for you.",
         (("calculate_area", {"shape": "circle", "dimensions": {"radius": 15.5},
                              "precision": 3}),)),
    Case("C06", "<function=get_current_weather>\n<parameter=city>\nDallas\n</parameter>\n"
         "<parameter=state>\nTX\n</parameter>\n</function>", None,
         (("get_current_weather", {"city": "Dallas", "state": "TX"}),), (NS, S, CHARS)),
    Case("C08", "This is a test response without any tool calls",
         "This is a test response without any tool calls"),
    Case("C/multiline-string", xml_call("get_current_weather", {"city": "a\n\nb <c> </d"}), None,
         (("get_current_weather", {"city": "a\n\nb <c> </d"}),), (NS, S, CHARS)),
]  # fmt: skip


@pytest.mark.parametrize("case", C_CASES, ids=lambda c: c.id)
def test_qwen3_coder(qwen_tok: Tokenizer, case: Case) -> None:
    check(parser(qwen_tok, None, "qwen3_coder", req=request([WEATHER_TOOL, AREA_TOOL])), case)


def test_c07_schema_types(qwen_tok: Tokenizer) -> None:
    types = tool(
        "test_types",
        int_param="integer",
        float_param="float",
        bool_param="boolean",
        str_param="string",
        obj_param="object",
    )
    text = xml_call(
        "test_types",
        {
            "int_param": "42",
            "float_param": "3.14",
            "bool_param": "true",
            "str_param": "hello world",
            "obj_param": '{"key": "value"}',
        },
    )
    want = {
        "int_param": 42,
        "float_param": 3.14,
        "bool_param": True,
        "str_param": "hello world",
        "obj_param": {"key": "value"},
    }
    check(
        parser(qwen_tok, None, "qwen3_coder", req=request([types])),
        Case("C07", text, None, (("test_types", want),), (NS, S, CHARS)),
    )
