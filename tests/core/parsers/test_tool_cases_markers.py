"""vLLM's tests/tool_parsers/ cases of DeepSeek V3 / V3.1, DSML, kimi_k2 and qwen3_coder as
tables, as test_tool_cases.py runs hermes, llama3_json, pythonic and mistral.

Each case runs non-streaming (`parse_whole`) and streamed through the real incremental
detokenizer in several chunkings; formats whose markers are text are also streamed as
text-only character deltas. Arguments are compared as JSON values unless the case says
`exact` (vLLM's test compares the text).

`deviation` marks where we answer differently from vLLM on purpose; the reason is
always the same: our non-streaming answer is the streaming engine run once, and a
stream cannot take back what it has sent (a header, prose before a call).
"""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer

from tests.core.parsers.shared.harness import (
    KIMI_SPECIAL,
    marker_tokenizer,
    parser,
    request,
    tool,
)
from tests.core.parsers.shared.tool_cases import CHARS, NS, Case, S, check
from tests.core.parsers.shared.tool_cases import qwen_tok as qwen_tok  # (the fixture)

# -- DeepSeek V3 / V3.1 (test_deepseekv31_tool_parser.py) ------------------------------------
# The real DeepSeek tokenizer has these markers.

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


# -- DSML on the real DeepSeek V4 tokenizer (test_deepseekv4_tool_parser.py) ----------------


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


# -- kimi_k2 (test_kimi_k2_tool_parser.py) -------------------------------------------------

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


# -- qwen3_coder (test_qwen3coder_tool_parser.py) ---------------------------------------------

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
