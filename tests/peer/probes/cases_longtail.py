"""The cases of the long-tail families whose calls are JSON call lists (docs/reference/parsers.md:
Phi-4-mini, InternLM2, Jamba, GigaChat3, Apertus, xLAM), and what every long-tail case
shares: the tool set, the request shapes, the argument values, `json_list_cases`.
`probe_longtail.py` records them (the recorder is recorder.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.peer.recorded.recorder import CaseSpec, Piece, Plain

# The tool set of every long-tail case (the one functiongemma's answers use).
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "days": {"type": "integer"},
                    "include_hourly": {"type": "boolean"},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_current_date",
            "description": "Today",
            "parameters": {"type": "object", "properties": {}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "set_params",
            "description": "Typed values",
            "parameters": {
                "type": "object",
                "properties": {
                    "s": {"type": "string"},
                    "i": {"type": "integer"},
                    "n": {"type": "number"},
                    "b": {"type": "boolean"},
                    "o": {"type": "object"},
                    "a": {"type": "array"},
                },
            },
        },
    },
]
AUTO = {"tools": "@0"}
NONE = {"tools": "@0", "tool_choice": "none"}
REQUIRED = {"tools": "@0", "tool_choice": "required"}
NAMED = {"tools": "@0", "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}
NO_TOOLS: dict[str, Any] = {}

W = {"city": "Tokyo", "days": 3}
W2 = {"city": "Paris"}
UNI = {"city": '東京 "quoted" \\ back', "days": 1}
NEST = {"s": "x", "i": 1, "n": 2.5, "b": True, "o": {"k": [1, {"z": None}]}, "a": ["p", "q"]}


def _obj(name: str, args: Any, key: str = "arguments") -> str:
    return json.dumps({"name": name, key: args}, ensure_ascii=False)


def json_list_cases(
    block: Callable[[str], list[Piece]], key: str = "arguments", many: bool = True
) -> list[CaseSpec]:
    """The cases of a family whose calls are a JSON list of `{"name", key}` objects;
    `block(inner)` wraps the objects' text (`inner`: objects joined by ", ") as the family
    writes a call block."""
    one = _obj("get_weather", W, key)
    two = one + ", " + _obj("get_weather", W2, key)
    cases: list[CaseSpec] = [
        ("no call", ["Hello, how can I help?"], AUTO, "stop"),
        ("single call", block(one), AUTO, "stop"),
        ("text before call", ["Let me check. ", *block(one)], AUTO, "stop"),
        ("text after call", [*block(one), " Done."], AUTO, "stop"),
        ("leading newline before call", ["\n", *block(one)], AUTO, "stop"),
        ("empty arguments", block(_obj("get_current_date", {}, key)), AUTO, "stop"),
        ("unicode and escapes", block(_obj("get_weather", UNI, key)), AUTO, "stop"),
        ("nested values", block(_obj("set_params", NEST, key)), AUTO, "stop"),
        (
            "other key",
            block(_obj("get_weather", W, "parameters" if key != "parameters" else "arguments")),
            AUTO,
            "stop",
        ),
        ("unknown tool", block(_obj("no_such_tool", W, key)), AUTO, "stop"),
        (
            "invalid json",
            block('{"name": "get_weather", "arguments": {invalid json}}'),
            AUTO,
            "stop",
        ),
        ("truncated mid-value", _cut(block(one), '"Tok'), AUTO, "length"),
        ("truncated mid-name", _cut(block(one), '"get_wea'), AUTO, "length"),
        ("tool_choice none", ["Sure. ", *block(one)], NONE, "stop"),
        ("no tools + call", ["Sure. ", *block(one)], NO_TOOLS, "stop"),
        ("no tools, plain", ["Just text."], NO_TOOLS, "stop"),
        (
            "tool_choice required",
            ['[{"name": "get_weather", "parameters": {"city": "Tokyo", "days": 3}}]'],
            REQUIRED,
            "stop",
        ),
        ("tool_choice required, native", block(one), REQUIRED, "stop"),
        ("tool_choice named", ['{"city": "Tokyo", "days": 3}'], NAMED, "stop"),
        ("tool_choice named, native", block(one), NAMED, "stop"),
        ("content ws around call", ["  Checking.  ", *block(one), "  "], AUTO, "stop"),
    ]
    if many:
        cases += [
            ("two calls", block(two), AUTO, "stop"),
            (
                "truncated after first of two",
                _cut(block(two), ", " + _obj("get_weather", W2, key)[:12]),
                AUTO,
                "length",
            ),
        ]
    return cases


def _cut(pieces: list[Piece], at: str) -> list[Piece]:
    """The pieces up to and including the first `at`."""
    out: list[Piece] = []
    for p in pieces:
        k = p.find(at)
        if k >= 0:
            out.append(type(p)(p[: k + len(at)]))
            return out
        out.append(p)
    raise ValueError(f"{at!r} not in {pieces!r}")


def phi4_cases() -> list[CaseSpec]:
    cases = json_list_cases(lambda inner: ["functools[" + inner + "]"])
    nested_list = _obj("set_params", {"a": [1, 2]})
    cases += [
        ("bracket inside arguments", ["functools[" + nested_list + "]"], AUTO, "stop"),
        ("functools in prose", ["Use functools.partial here."], AUTO, "stop"),
        ("functools with space", ["functools [" + _obj("get_weather", W) + "]"], AUTO, "stop"),
        ("other special tokens", ["A<|user|>B<|tool|>C"], AUTO, "stop"),
    ]
    return cases


def internlm_cases() -> list[CaseSpec]:
    def block(inner: str) -> list[Piece]:
        return ["<|action_start|><|plugin|>\n" + inner + "<|action_end|>"]

    cases = json_list_cases(block, key="parameters", many=False)
    one = _obj("get_weather", W, "parameters")
    cases += [
        (
            "no newline after plugin",
            ["<|action_start|><|plugin|>" + one + "<|action_end|>"],
            AUTO,
            "stop",
        ),
        ("no action_end", ["<|action_start|><|plugin|>\n" + one], AUTO, "stop"),
        (
            "interpreter action",
            ["<|action_start|><|interpreter|>\nprint(1)<|action_end|>"],
            AUTO,
            "stop",
        ),
        (
            "markers as plain tokens",
            [Plain("<|action_start|><|plugin|>"), "\n" + one],
            AUTO,
            "stop",
        ),
        ("other special tokens", ["A<|interpreter|>B<|action_end|>C"], AUTO, "stop"),
    ]
    return cases


def jamba_cases() -> list[CaseSpec]:
    cases = json_list_cases(lambda inner: ["<tool_calls>[" + inner + "]</tool_calls>"])
    one = _obj("get_weather", W)
    cases += [
        ("space before call", [" <tool_calls>[" + one + "]</tool_calls>"], AUTO, "stop"),
        ("no closing tag", ["<tool_calls>[" + one + "]"], AUTO, "stop"),
        ("single object, no array", ["<tool_calls>" + one + "</tool_calls>"], AUTO, "stop"),
        (
            "markers as plain tokens",
            [Plain("<tool_calls>"), "[" + one + "]", Plain("</tool_calls>")],
            AUTO,
            "stop",
        ),
        ("other special tokens", ["A<|user|>B<|system|>C"], AUTO, "stop"),
    ]
    return cases


def gigachat3_cases() -> list[CaseSpec]:
    fc = "function call<|role_sep|>\n"
    msg = "<|message_sep|>\n\n"
    one = _obj("get_weather", W)
    return [
        ("no call", ["Hello, how can I help?"], AUTO, "stop"),
        ("call message", [fc + one], AUTO, "stop"),
        ("text, then call message", ["Let me check." + msg + fc + one], AUTO, "stop"),
        ("function_call token", ["<|function_call|>" + one], AUTO, "stop"),
        ("text, then function_call token", ["Let me check.<|function_call|>" + one], AUTO, "stop"),
        ("empty arguments", [fc + _obj("get_current_date", {})], AUTO, "stop"),
        ("unicode and escapes", [fc + _obj("get_weather", UNI)], AUTO, "stop"),
        ("nested values", [fc + _obj("set_params", NEST)], AUTO, "stop"),
        ("arguments as a string", [fc + _obj("get_weather", json.dumps(W))], AUTO, "stop"),
        ("no arguments key", [fc + '{"name": "get_current_date"}'], AUTO, "stop"),
        ("unknown tool", [fc + _obj("no_such_tool", W)], AUTO, "stop"),
        (
            "invalid json",
            [fc + '{"name": "get_weather", "arguments": {invalid json}}'],
            AUTO,
            "stop",
        ),
        ("text after call", [fc + one + " Done."], AUTO, "stop"),
        ("call, then message_sep", [fc + one + msg], AUTO, "stop"),
        ("truncated mid-value", _cut([fc + one], '"Tok'), AUTO, "length"),
        ("truncated mid-name", _cut([fc + one], '"get_wea'), AUTO, "length"),
        ("two messages, no call", ["First." + msg + "Second."], AUTO, "stop"),
        ("tool_choice none", ["Sure." + msg + fc + one], NONE, "stop"),
        ("no tools + call", ["Sure." + msg + fc + one], NO_TOOLS, "stop"),
        ("no tools, plain", ["Just text."], NO_TOOLS, "stop"),
        (
            "tool_choice required",
            ['[{"name": "get_weather", "parameters": {"city": "Tokyo", "days": 3}}]'],
            REQUIRED,
            "stop",
        ),
        ("tool_choice required, native", [fc + one], REQUIRED, "stop"),
        ("tool_choice named", ['{"city": "Tokyo", "days": 3}'], NAMED, "stop"),
        ("tool_choice named, native", [fc + one], NAMED, "stop"),
        ("content ws around call", ["  Checking.  " + msg + fc + one], AUTO, "stop"),
        (
            "markers as plain tokens",
            [Plain("<|message_sep|>"), "\n\nfunction call", Plain("<|role_sep|>"), "\n" + one],
            AUTO,
            "stop",
        ),
        ("function call without role_sep", ["function call" + one], AUTO, "stop"),
        ("other special tokens", ["A<s>B<|role_sep|>C"], AUTO, "stop"),
    ]


def apertus_cases() -> list[CaseSpec]:
    def keyed(name: str, args: Any) -> str:
        return json.dumps({name: args}, ensure_ascii=False)

    def block(inner: str) -> list[Piece]:
        return ["<|tools_prefix|>[" + inner + "]<|tools_suffix|>"]

    one = keyed("get_weather", W)
    two = one + ", " + keyed("get_weather", W2)
    return [
        ("no call", ["Hello, how can I help?"], AUTO, "stop"),
        ("single call", block(one), AUTO, "stop"),
        ("two calls", block(two), AUTO, "stop"),
        ("text before call", ["Let me check. ", *block(one)], AUTO, "stop"),
        ("text after call", [*block(one), " Done."], AUTO, "stop"),
        ("text around call", ["Before.\n", *block(one), "\nAfter."], AUTO, "stop"),
        ("empty arguments", block(keyed("get_current_date", {})), AUTO, "stop"),
        ("unicode and escapes", block(keyed("get_weather", UNI)), AUTO, "stop"),
        ("nested values", block(keyed("set_params", NEST)), AUTO, "stop"),
        ("unknown tool", block(keyed("no_such_tool", W)), AUTO, "stop"),
        ("two keys in one object", block(json.dumps({"get_weather": W, "extra": 1})), AUTO, "stop"),
        ("empty object", block("{}"), AUTO, "stop"),
        ("single object, no array", ["<|tools_prefix|>" + one + "<|tools_suffix|>"], AUTO, "stop"),
        ("arguments not an object", block(keyed("get_weather", "Tokyo")), AUTO, "stop"),
        ("no suffix", ["<|tools_prefix|>[" + one + "]"], AUTO, "stop"),
        (
            "text after array inside block",
            ["<|tools_prefix|>[" + one + "] trailing<|tools_suffix|>"],
            AUTO,
            "stop",
        ),
        ("invalid json", block('{"get_weather": {invalid json}}'), AUTO, "stop"),
        ("truncated mid-value", _cut(block(one), '"Tok'), AUTO, "length"),
        ("truncated mid-name", _cut(block(one), '"get_wea'), AUTO, "length"),
        ("truncated after first of two", _cut(block(two), ', {"get_w'), AUTO, "length"),
        ("tool_choice none", ["Sure. ", *block(one)], NONE, "stop"),
        ("no tools + call", ["Sure. ", *block(one)], NO_TOOLS, "stop"),
        ("no tools, plain", ["Just text."], NO_TOOLS, "stop"),
        (
            "tool_choice required",
            ['[{"name": "get_weather", "parameters": {"city": "Tokyo", "days": 3}}]'],
            REQUIRED,
            "stop",
        ),
        ("tool_choice required, native", block(one), REQUIRED, "stop"),
        ("tool_choice named", ['{"city": "Tokyo", "days": 3}'], NAMED, "stop"),
        ("tool_choice named, native", block(one), NAMED, "stop"),
        ("content ws around call", ["  Checking.  ", *block(one), "  "], AUTO, "stop"),
        (
            "markers as plain tokens",
            [Plain("<|tools_prefix|>"), "[" + one + "]", Plain("<|tools_suffix|>")],
            AUTO,
            "stop",
        ),
        ("other special tokens", ["A<|user_start|>B<|inner_prefix|>C"], AUTO, "stop"),
    ]


def xlam_cases() -> list[CaseSpec]:
    one = "[" + _obj("get_weather", W) + "]"
    return [
        *json_list_cases(lambda inner: ["[" + inner + "]"]),
        ("tool_call tags", ["<tool_call>" + one + "</tool_call>"], AUTO, "stop"),
        ("text before tool_call tags", ["Sure. <tool_call>" + one + "</tool_call>"], AUTO, "stop"),
        (
            "tool_call tags, one object",
            ["<tool_call>" + _obj("get_weather", W) + "</tool_call>"],
            AUTO,
            "stop",
        ),
        ("json fence", ["```json\n" + one + "\n```"], AUTO, "stop"),
        ("text before json fence", ["Here: ```json\n" + one + "\n```"], AUTO, "stop"),
        ("think then call", ["<think>r</think>" + one], AUTO, "stop"),
        ("think then text", ["<think>r</think>Answer."], AUTO, "stop"),
        ("single object", [_obj("get_weather", W)], AUTO, "stop"),
        ("TOOL_CALLS prefix", ["[TOOL_CALLS]" + one], AUTO, "stop"),
        ("array of plain text", ["[1, 2] is a list."], AUTO, "stop"),
    ]


__all__ = ["CaseSpec", "Piece", "Plain"]
