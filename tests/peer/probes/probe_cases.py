"""The cases `probe_answers.py` asks vLLM 0.33.0 about, per recorded family: output texts
(markers written as the family's tokens), the request, how the output ends.

Each family's tokenizer and EOS are the ones `families.FAMILIES` names
(tests/core/parsers/recorded). The shared pieces are in probe_base.py; ERNIE 4.5, Hunyuan A13B and
HY3 / HY4 in probe_cases_ernie_hunyuan.py.
"""

from __future__ import annotations

from tests.peer.probes.probe_base import DATE, HIDE, NAMED, NONE, REQUIRED, WEATHER, P, Probe, T
from tests.peer.probes.probe_cases_ernie_hunyuan import ERNIE45, HUNYUAN_A13B, _hy_cases, _suffixed
from tests.support.vocab import synthetic_families as fam

# -- Granite 3.x ------------------------------------------------------------------------

THOUGHT, RESPONSE = "Here is my thought process:", "Here is my response:"


G30 = "<|tool_call|>[" + WEATHER + "]"
G31 = "<tool_call>[" + WEATHER + "]"

GRANITE = [
    P("reasoning + response", f"{THOUGHT} I think. {RESPONSE} Hello."),
    P("here's spellings", "Here's my thought process: a Here's my response: b"),
    P("mixed spellings", "Here is my thought process: a Here's my response: b"),
    P("plain content", "Hello there."),
    P("reasoning only", f"{THOUGHT} still thinking"),
    P("truncated in reasoning", f"{THOUGHT} still thin", finish="length"),
    P("text before thought", f"Ok. {THOUGHT} a {RESPONSE} b"),
    P("leading space", f" {THOUGHT} a {RESPONSE} b"),
    P("response phrase only", f"{RESPONSE} Hi"),
    P("second thought after response", f"{THOUGHT} a {RESPONSE} b {THOUGHT} c"),
    P("cut inside response phrase", f"{THOUGHT} a Here is my res", finish="length"),
    P("empty response", f"{THOUGHT} a {RESPONSE}"),
    P("newlines", f"{THOUGHT}\nStep 1.\n\n{RESPONSE}\nAnswer.\n"),
    P("colons in reasoning", f"{THOUGHT} note: x: y {RESPONSE} z: w"),
    P("include_reasoning false", f"{THOUGHT} a {RESPONSE} b", HIDE),
    P("call 3.0", G30, T),
    P("call 3.1", G31, T),
    P("two calls", "<|tool_call|>[" + WEATHER + ", " + DATE + "]", T),
    P("text before call", "Let me check. " + G30, T),
    P("text after call", G30 + " Done.", T),
    P("reasoning + call", f"{THOUGHT} need weather. {RESPONSE} " + G30, T),
    P("tool_choice none", "Sure. " + G30, NONE),
    P("no tools + call", "Sure. " + G30),
    P(
        "tool_choice required",
        '[{"name": "get_weather", "parameters": {"city": "Paris"}}]',
        REQUIRED,
    ),
    P("tool_choice named", '{"city": "Paris"}', NAMED),
    P(
        "truncated mid-value",
        '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Par',
        T,
        finish="length",
    ),
    P("truncated after name", '<|tool_call|>[{"name": "get_weather"', T, finish="length"),
    P("invalid json", "<|tool_call|>[{invalid json}]", T),
    P("no arguments key", '<|tool_call|>[{"name": "get_current_date"}]', T),
    P(
        "arguments first",
        '<|tool_call|>[{"arguments": {"city": "Paris"}, "name": "get_weather"}]',
        T,
    ),
    P("whitespace before call", "\n\n" + G30, T),
    P(
        "space inside",
        '<|tool_call|> [ {"name": "get_weather", "arguments": {"city": "Paris", '
        '"days": 3, "include_hourly": true}} ]',
        T,
    ),
    P("unknown tool", '<|tool_call|>[{"name": "img_gen", "arguments": {"p": 1}}]', T),
    P("non-ascii", '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "杭州"}}]', T),
    P("call then second list", G30 + G30, T),
    P("object not list", "<|tool_call|>" + WEATHER, T),
    P(
        "nested args",
        '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris", '
        '"opts": {"a": [1, {"b": null}]}}}]',
        T,
    ),
]

# -- granite-20b-functioncalling --------------------------------------------------------

FC = "<function_call> " + WEATHER
GRANITE_20B_FC = [
    P("one call", FC, T),
    P("two calls", FC + " <function_call> " + DATE, T),
    P("no space", "<function_call>" + WEATHER, T),
    P("text before call", "Sure. " + FC, T),
    P("text after call", FC + " Done.", T),
    P("plain content", "Hello there.", T),
    P("plain content, no tools", "Hello there."),
    P("invalid json", "<function_call> {invalid json}", T),
    P("missing arguments", '<function_call> {"name": "get_current_date"}', T),
    P(
        "truncated mid-value",
        '<function_call> {"name": "get_weather", "arguments": {"city": "Pa',
        T,
        finish="length",
    ),
    P("tool_choice none", "Sure. " + FC, NONE),
    P("no tools + call", FC),
    P(
        "tool_choice required",
        '[{"name": "get_weather", "parameters": {"city": "Paris"}}]',
        REQUIRED,
    ),
    P("tool_choice named", '{"city": "Paris"}', NAMED),
    P("non-ascii", '<function_call> {"name": "get_weather", "arguments": {"city": "杭州"}}', T),
    P("newline separated", FC + "\n<function_call> " + DATE, T),
    P("whitespace before call", "\n\n" + FC, T),
    P("unknown tool", '<function_call> {"name": "img_gen", "arguments": {"p": 1}}', T),
    P("partial marker in text", "a <function_ b", T),
]

PROBES: dict[str, Probe] = {
    "granite": Probe(fam.granite_tokenizer, 151671, GRANITE),
    "granite_20b_fc": Probe(fam.granite_tokenizer, 151671, GRANITE_20B_FC),
}

# -- OLMo 3 -----------------------------------------------------------------------------

OW = "get_weather(city='Paris')"
OLMO3 = [
    P("think + answer", "<think>I think.</think>Hello."),
    P("no start tag", "I think.</think>Hello."),
    P("no tags", "Hello there."),
    P("reasoning without end", "<think>still thinking"),
    P("truncated in reasoning", "<think>still thin", finish="length"),
    P("text before think", "A<think>R</think>C"),
    P("two ends", "<think>R</think>C</think>D"),
    P("second think block", "<think>R</think>C<think>S</think>D"),
    P("whitespace", "<think>\nR\n</think>\n\nC\n"),
    P("empty think", "<think></think>C"),
    P("cut in end tag", "<think>R</thi", finish="length"),
    P("include_reasoning false", "<think>R</think>C", HIDE),
    P("call", f"<think>R</think><function_calls>{OW}</function_calls>", T),
    P(
        "two calls",
        '<think>R</think><function_calls>get_weather(city="Paris", days=3)\n'
        "get_current_date()</function_calls>",
        T,
    ),
    P(
        "json literals",
        "<think>R</think><function_calls>get_weather(city='Paris', include_hourly=true, "
        "days=null)</function_calls>",
        T,
    ),
    P(
        "python literals",
        "R</think><function_calls>get_weather(city='P', include_hourly=True, days=None)"
        "</function_calls>",
        T,
    ),
    P("text before block", f"R</think>Checking.\n<function_calls>{OW}</function_calls>", T),
    P("text after block", f"R</think><function_calls>{OW}</function_calls> Done.", T),
    P("bare call line", f"R</think>{OW}", T),
    P("call without think", f"<function_calls>{OW}</function_calls>", T),
    P("tool_choice none", f"R</think>Sure. <function_calls>{OW}</function_calls>", NONE),
    P("no tools + call", f"R</think><function_calls>{OW}</function_calls>"),
    P(
        "tool_choice required",
        'R</think>[{"name": "get_weather", "parameters": {"city": "Paris"}}]',
        REQUIRED,
    ),
    P("tool_choice named", 'R</think>{"city": "Paris"}', NAMED),
    P("truncated mid-value", "R</think><function_calls>get_weather(city='Par", T, finish="length"),
    P("block without closer", f"R</think><function_calls>{OW}", T),
    P("not a call", "R</think><function_calls>not a call</function_calls>", T),
    P(
        "nested values",
        "R</think><function_calls>get_weather(city='Paris', opts={'a': [1, 2], 'b': None})"
        "</function_calls>",
        T,
    ),
    P("unknown tool", "R</think><function_calls>img_gen(p=1)</function_calls>", T),
    P("call inside reasoning", f"<think>R<function_calls>{OW}</function_calls></think>C", T),
    P("whitespace before block", f"R</think>\n\n<function_calls>{OW}</function_calls>", T),
    P(
        "comma separated",
        "R</think><function_calls>get_weather(city='A'), get_weather(city='B')</function_calls>",
        T,
    ),
]
PROBES["olmo3"] = Probe(fam.olmo3_tokenizer, 151645, OLMO3)

# -- StepFun Step-3 ---------------------------------------------------------------------

S_CALLS, S_CALLS_END = "<｜tool_calls_begin｜>", "<｜tool_calls_end｜>"
S_CALL, S_CALL_END, S_SEP = "<｜tool_call_begin｜>", "<｜tool_call_end｜>", "<｜tool_sep｜>"


def _s_call(name: str, params: str, kind: str = "function") -> str:
    return (
        f'{S_CALL}{kind}{S_SEP}<steptml:invoke name="{name}">{params}</steptml:invoke>{S_CALL_END}'
    )


def _s_param(key: str, value: str) -> str:
    return f'<steptml:parameter name="{key}">{value}</steptml:parameter>'


S_PARIS = _s_call("get_weather", _s_param("city", "Paris"))
S_BLOCK = S_CALLS + S_PARIS + S_CALLS_END
STEP3 = [
    P("reasoning + answer", "I think.</think>Hello."),
    P("with start tag", "<think>I think.</think>Hello."),
    P("no end", "still thinking"),
    P("truncated in reasoning", "still thin", finish="length"),
    P("empty reasoning", "</think>Hello."),
    P("empty answer", "I think.</think>"),
    P("two ends", "R</think>C</think>D"),
    P("whitespace", "\nR\n</think>\n\nC\n"),
    P("include_reasoning false", "R</think>C", HIDE),
    P("call", "R</think>" + S_BLOCK, T),
    P(
        "typed params",
        "R</think>"
        + S_CALLS
        + _s_call(
            "get_weather",
            _s_param("city", " Paris ")
            + _s_param("days", "3")
            + _s_param("include_hourly", "true"),
        )
        + S_CALLS_END,
        T,
    ),
    P(
        "two calls",
        "R</think>" + S_CALLS + S_PARIS + _s_call("get_current_date", "") + S_CALLS_END,
        T,
    ),
    P("text before block", "R</think>Checking. " + S_BLOCK, T),
    P("text after block", "R</think>" + S_BLOCK + " Done.", T),
    P("whitespace before block", "R</think>\n\n" + S_BLOCK, T),
    P("block without end", "R</think>" + S_CALLS + S_PARIS, T),
    P(
        "cut in value",
        "R</think>"
        + S_CALLS
        + S_CALL
        + "function"
        + S_SEP
        + '<steptml:invoke name="get_weather"><steptml:parameter name="city">Par',
        T,
        finish="length",
    ),
    P(
        "not a function",
        "R</think>" + S_CALLS + _s_call("get_weather", _s_param("city", "P"), "code") + S_CALLS_END,
        T,
    ),
    P("tool_choice none", "R</think>Sure. " + S_BLOCK, NONE),
    P("no tools + call", "R</think>" + S_BLOCK),
    P(
        "tool_choice required",
        'R</think>[{"name": "get_weather", "parameters": {"city": "Paris"}}]',
        REQUIRED,
    ),
    P("tool_choice named", 'R</think>{"city": "Paris"}', NAMED),
    P(
        "unknown tool",
        "R</think>" + S_CALLS + _s_call("img_gen", _s_param("p", "1")) + S_CALLS_END,
        T,
    ),
    P(
        "bad integer",
        "R</think>"
        + S_CALLS
        + _s_call("get_weather", _s_param("city", "P") + _s_param("days", "three"))
        + S_CALLS_END,
        T,
    ),
    P("call in reasoning", "R" + S_BLOCK + "</think>C", T),
    P(
        "multiline value",
        "R</think>"
        + S_CALLS
        + _s_call("get_weather", _s_param("city", "\nNew\nYork\n"))
        + S_CALLS_END,
        T,
    ),
]
PROBES["step3"] = Probe(fam.step3_tokenizer, 151670, STEP3)


PROBES["ernie45"] = Probe(fam.ernie45_tokenizer, 151670, ERNIE45)


PROBES["hunyuan_a13b"] = Probe(fam.olmo3_tokenizer, 151645, HUNYUAN_A13B)


PROBES["hy_v3"] = Probe(fam.hy_tokenizer, 151645, _hy_cases("<tool_sep>"))
PROBES["hy_v4"] = Probe(fam.hy_tokenizer, 151645, _hy_cases(""))
PROBES["hy_v3_suffix"] = Probe(
    fam.hy_suffix_tokenizer,
    151645,
    [_suffixed(p, fam.HY_SUFFIX) for p in _hy_cases("<tool_sep>")],
)
PROBES["hy_v4_suffix"] = Probe(
    fam.hy_suffix_tokenizer, 151645, [_suffixed(p, fam.HY_SUFFIX) for p in _hy_cases("")]
)
