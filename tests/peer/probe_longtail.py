"""How the long-tail families' answers (`tests/core/parsers/vllm_answers/<family>.jsonl`) were
recorded: each case's output written as text (markers as their single tokens, or spelled in
ordinary tokens where a case says so), sent to vLLM 0.33.0's render server for the family
(`vllm_server.RECORDED_SPECS`, folders from `recorded_longtail.py`) as
`tests/peer/test_recorded.py` sends it (rendered prompt, whole and 1-token streamed
derender), and vLLM's answers written down.

usage: python -m tests.peer.probe_longtail FAMILY [FAMILY ...]
(needs `tests/peer/setup_peer.sh`'s venv and the folders; starts one server at a time.)
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from tests import synthetic_longtail as lt

HERE = Path(__file__).resolve().parents[1] / "core" / "parsers" / "vllm_answers"

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


class Plain(str):
    """Text encoded one character at a time: a marker spelled in ordinary tokens."""


Piece = str | Plain
# label, output pieces, request, finish ("stop": the EOS is appended; "length": none)
CaseSpec = tuple[str, list[Piece], dict[str, Any], str]

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


def lfm2_cases() -> list[CaseSpec]:
    def block(inner: str) -> list[Piece]:
        return ["<|tool_call_start|>[" + inner + "]<|tool_call_end|>"]

    one = "get_weather(city='Tokyo', days=3)"
    two = one + ', get_weather(city="Paris")'
    return [
        ("no call", ["Hello, how can I help?"], AUTO, "stop"),
        ("single call", block(one), AUTO, "stop"),
        ("two calls", block(two), AUTO, "stop"),
        ("text before call", ["Let me check. ", *block(one)], AUTO, "stop"),
        ("text after call", [*block(one), "The weather is sunny."], AUTO, "stop"),
        ("text around call", ["Before.\n", *block(one), "\nAfter."], AUTO, "stop"),
        ("empty arguments", block("get_current_date()"), AUTO, "stop"),
        (
            "unicode and escapes",
            block("get_weather(city='東京 \\'q\\' \\\\ b', days=1)"),
            AUTO,
            "stop",
        ),
        (
            "nested values",
            block("set_params(s='x', i=1, n=2.5, b=True, o={'k': [1, {'z': None}]}, a=['p', 'q'])"),
            AUTO,
            "stop",
        ),
        ("json literals", block("set_params(b=true, o=null)"), AUTO, "stop"),
        ("unknown tool", block("no_such_tool(city='Tokyo')"), AUTO, "stop"),
        ("positional argument", block("get_weather('Tokyo')"), AUTO, "stop"),
        (
            "not a list",
            ["<|tool_call_start|>get_weather(city='Tokyo')<|tool_call_end|>"],
            AUTO,
            "stop",
        ),
        ("invalid python", block("get_weather(city='Tokyo'"), AUTO, "stop"),
        ("no end token", ["<|tool_call_start|>[" + one + "]"], AUTO, "stop"),
        (
            "echo after end",
            [*block(one), " get_weather(city='Tokyo')]<|tool_call_end|>Done."],
            AUTO,
            "stop",
        ),
        ("truncated mid-value", _cut(block(one), "'Tok"), AUTO, "length"),
        ("truncated mid-name", _cut(block(one), "get_wea"), AUTO, "length"),
        ("truncated after first of two", _cut(block(two), ", get_w"), AUTO, "length"),
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
        ("bare list without markers", ["[" + one + "]"], AUTO, "stop"),
        (
            "markers as plain tokens",
            [Plain("<|tool_call_start|>"), "[" + one + "]", Plain("<|tool_call_end|>")],
            AUTO,
            "stop",
        ),
        ("other special tokens", ["A<|tool_list_start|>B<|tool_response_end|>C"], AUTO, "stop"),
    ]


def plamo3_cases() -> list[CaseSpec]:
    th, te = "<|plamo:begin_think:plamo|>", "<|plamo:end_think:plamo|>"
    reqs, reqs_end = "<|plamo:begin_tool_requests:plamo|>", "<|plamo:end_tool_requests:plamo|>"
    req, req_end = "<|plamo:begin_tool_request:plamo|>", "<|plamo:end_tool_request:plamo|>"
    name, name_end = "<|plamo:begin_tool_name:plamo|>", "<|plamo:end_tool_name:plamo|>"
    args = "<|plamo:begin_tool_arguments:plamo|><|plamo:constrain|>json<|plamo:msg|>"
    args_end = "<|plamo:end_tool_arguments:plamo|>"

    def call(fn: str, a: Any) -> str:
        body = a if isinstance(a, str) else json.dumps(a, ensure_ascii=False)
        return req + name + fn + name_end + args + body + args_end + req_end

    def block(*calls: str) -> str:
        return reqs + "".join(calls) + reqs_end

    one = block(call("get_weather", W))
    off = {"chat_template_kwargs": {"enable_thinking": False}}
    return [
        ("reasoning then answer", ["Let me think." + te + "Answer."], AUTO, "stop"),
        ("reasoning only", ["Still thinking"], AUTO, "stop"),
        ("reasoning trailing whitespace", ["Think.\n\n" + te + "\n\nAnswer."], AUTO, "stop"),
        ("empty reasoning", [te + "Answer."], AUTO, "stop"),
        ("thinking off", ["Answer."], {**AUTO, **off}, "stop"),
        ("thinking off, think markers", [th + "r" + te + "c"], {**AUTO, **off}, "stop"),
        ("repeated start in reasoning", [th + "r" + te + "c"], AUTO, "stop"),
        ("second think block", ["r1" + te + "c1" + th + "r2" + te + "c2"], AUTO, "stop"),
        ("stray end in content", ["r" + te + "a" + te + "b"], AUTO, "stop"),
        ("call after reasoning", ["r" + te + one], AUTO, "stop"),
        ("call inside reasoning", ["r" + one], AUTO, "stop"),
        (
            "two calls",
            ["r" + te + block(call("get_weather", W), call("get_weather", W2))],
            AUTO,
            "stop",
        ),
        ("text before call", ["r" + te + "Sure. " + one], AUTO, "stop"),
        ("whitespace before call", ["r" + te + "\n\n" + one], AUTO, "stop"),
        ("text after call block", ["r" + te + one + "Done."], AUTO, "stop"),
        ("empty arguments", ["r" + te + block(call("get_current_date", {}))], AUTO, "stop"),
        ("blank arguments", ["r" + te + block(call("get_current_date", " "))], AUTO, "stop"),
        ("unicode and escapes", ["r" + te + block(call("get_weather", UNI))], AUTO, "stop"),
        ("nested values", ["r" + te + block(call("set_params", NEST))], AUTO, "stop"),
        ("unknown tool", ["r" + te + block(call("no_such_tool", W))], AUTO, "stop"),
        ("invalid json", ["r" + te + block(call("get_weather", "{invalid json}"))], AUTO, "stop"),
        ("truncated mid-value", _cut(["r" + te + one], '"Tok'), AUTO, "length"),
        ("truncated mid-name", _cut(["r" + te + one], "get_wea"), AUTO, "length"),
        (
            "truncated after first of two",
            _cut(
                ["r" + te + block(call("get_weather", W), call("get_weather", W2))], req_end + req
            ),
            AUTO,
            "length",
        ),
        ("thinking off, call", ["Sure. " + one], {**AUTO, **off}, "stop"),
        (
            "include_reasoning false",
            ["r" + te + "Answer."],
            {**AUTO, "include_reasoning": False},
            "stop",
        ),
        ("tool_choice none", ["r" + te + "Sure. " + one], NONE, "stop"),
        ("no tools + call", ["r" + te + "Sure. " + one], NO_TOOLS, "stop"),
        ("no tools, plain", ["r" + te + "Just text."], NO_TOOLS, "stop"),
        ("tool_choice required", ["r" + te + one], REQUIRED, "stop"),
        (
            "tool_choice required, json",
            ["r" + te + '[{"name": "get_weather", "parameters": {"city": "Tokyo", "days": 3}}]'],
            REQUIRED,
            "stop",
        ),
        ("tool_choice named", ["r" + te + one], NAMED, "stop"),
        ("tool_choice named, json", ["r" + te + '{"city": "Tokyo", "days": 3}'], NAMED, "stop"),
        ("markers as plain tokens", [Plain("r" + te + "c")], AUTO, "stop"),
        ("call markers as plain tokens", ["r" + te, Plain(one)], AUTO, "stop"),
        ("other special tokens", ["r" + te + "A<|plamo:bos|>B<|plamo:msg|>C"], AUTO, "stop"),
    ]


def dots_cases() -> list[CaseSpec]:
    def inv(fn: str, args: dict[str, Any], q: str = '"') -> str:
        ps = "".join(
            f'<parameter name="{k}">{v if isinstance(v, str) else json.dumps(v)}</parameter>\n'
            for k, v in args.items()
        )
        return f"<invoke name={q}{fn}{q}>\n{ps}</invoke>\n"

    def block(*invokes: str) -> str:
        return "<dots_function_call>\n" + "".join(invokes) + "</dots_function_call>"

    one = block(inv("get_weather", W))
    return [
        ("no call", ["Hello, how can I help?"], AUTO, "stop"),
        ("single call", [one], AUTO, "stop"),
        ("two invokes", [block(inv("get_weather", W), inv("get_weather", W2))], AUTO, "stop"),
        ("two blocks", [one + "\n" + block(inv("get_weather", W2))], AUTO, "stop"),
        ("text before call", ["Let me check. " + one], AUTO, "stop"),
        ("text after call", [one + " Done."], AUTO, "stop"),
        ("empty arguments", [block(inv("get_current_date", {}))], AUTO, "stop"),
        (
            "typed values",
            [
                block(
                    inv(
                        "set_params",
                        {
                            "s": "x",
                            "i": "7",
                            "n": "2.5",
                            "b": "true",
                            "o": '{"k": [1]}',
                            "a": '["p"]',
                        },
                    )
                )
            ],
            AUTO,
            "stop",
        ),
        ("null value", [block(inv("set_params", {"s": "null", "i": "null"}))], AUTO, "stop"),
        ("value with spaces", [block(inv("get_weather", {"city": "  New York \n"}))], AUTO, "stop"),
        (
            "integer not a number",
            [block(inv("get_weather", {"city": "Tokyo", "days": "three"}))],
            AUTO,
            "stop",
        ),
        ("single-quoted name", [block(inv("get_weather", W, "'"))], AUTO, "stop"),
        ("bare name", [block(inv("get_weather", W, ""))], AUTO, "stop"),
        ("unknown tool", [block(inv("no_such_tool", W))], AUTO, "stop"),
        (
            "unknown parameter",
            [block(inv("get_weather", {"city": "Tokyo", "extra": "5"}))],
            AUTO,
            "stop",
        ),
        (
            "json fallback",
            [
                "<dots_function_call>"
                + json.dumps({"name": "get_weather", "arguments": {"city": "Tokyo"}})
                + "</dots_function_call>"
            ],
            AUTO,
            "stop",
        ),
        ("no closing tag", ["<dots_function_call>\n" + inv("get_weather", W)], AUTO, "stop"),
        ("truncated mid-value", _cut([one], "Tok"), AUTO, "length"),
        ("truncated mid-name", _cut([one], "get_wea"), AUTO, "length"),
        ("tool_choice none", ["Sure. " + one], NONE, "stop"),
        ("no tools + call", ["Sure. " + one], NO_TOOLS, "stop"),
        ("no tools, plain", ["Just text."], NO_TOOLS, "stop"),
        ("tool_choice required", [one], REQUIRED, "stop"),
        (
            "tool_choice required, json",
            ['[{"name": "get_weather", "parameters": {"city": "Tokyo", "days": 3}}]'],
            REQUIRED,
            "stop",
        ),
        ("tool_choice named", [one], NAMED, "stop"),
        ("tool_choice named, json", ['{"city": "Tokyo", "days": 3}'], NAMED, "stop"),
        ("content ws around call", ["  Checking.  " + one + "  "], AUTO, "stop"),
        (
            "markers as plain tokens",
            [
                Plain("<dots_function_call>"),
                "\n" + inv("get_weather", W),
                Plain("</dots_function_call>"),
            ],
            AUTO,
            "stop",
        ),
        ("other special tokens", ["A<|userprompt|>B<|response|>C"], AUTO, "stop"),
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


# family → (tokenizer, EOS token, cases)
PROBES: dict[str, tuple[Callable[[], Tokenizer], str, Callable[[], list[CaseSpec]]]] = {
    "phi4_mini_json": (lt.phi4_mini_tokenizer, "<|end|>", phi4_cases),
    "internlm": (lt.internlm_tokenizer, "<|im_end|>", internlm_cases),
    "jamba": (lt.jamba_tokenizer, "<|eom|>", jamba_cases),
    "gigachat3": (lt.gigachat3_tokenizer, "</s>", gigachat3_cases),
    "apertus": (lt.apertus_tokenizer, "<|assistant_end|>", apertus_cases),
    "lfm2": (lt.lfm2_tokenizer, "<|im_end|>", lfm2_cases),
    "plamo3": (lt.plamo3_tokenizer, "<|plamo:tag|>", plamo3_cases),
    "dots": (lt.dots_tokenizer, "<|endofresponse|>", dots_cases),
    "xlam": (lt.xlam_tokenizer, "<|im_end|>", xlam_cases),
}


def encode(tok: Tokenizer, pieces: list[Piece]) -> list[int]:
    ids: list[int] = []
    for p in pieces:
        if isinstance(p, Plain):
            for ch in p:
                ids += tok.encode(ch, add_special_tokens=False).ids
        else:
            ids += tok.encode(p, add_special_tokens=False).ids
    return ids


def build(family: str) -> list[dict[str, Any]]:
    make_tok, eos, make_cases = PROBES[family]
    tok = make_tok()
    eos_id = tok.token_to_id(eos)
    out = []
    seen = set()
    for label, pieces, req, finish in make_cases():
        assert label not in seen, label
        seen.add(label)
        ids = encode(tok, pieces) + ([eos_id] if finish == "stop" else [])
        request = {**req}
        if request.get("tools") == "@0":
            request["tools"] = TOOLS
        out.append(
            {
                "label": label,
                "output_ids": ids,
                "finish_in": finish,
                "request": request,
                "messages": [{"role": "user", "content": "hi"}],
            }
        )
    return out


def record(family: str) -> Path:
    from tests.peer.test_recorded import ask
    from tests.peer.vllm_server import RECORDED_SPECS, Peer, Server

    spec = RECORDED_SPECS[f"{family}-recorded"]
    server = Server(spec, Path(tempfile.mkdtemp(prefix=f"probe-{family}-")))
    lines = [json.dumps({"tool_sets": {"@0": TOOLS}}, ensure_ascii=False, separators=(",", ":"))]
    try:
        server.wait_ready(time.monotonic() + 300)
        peer = Peer(server)
        for case in build(family):
            try:
                live = ask(peer, family, case)
            except BaseException as exc:  # pytest.fail's Failed: vLLM answered an error
                if "vLLM answered HTTP" not in str(exc) and "render failed: HTTP" not in str(exc):
                    raise
                # No answer to record (README says which cases vLLM fails).
                print(f"{family}: {case['label']!r}: {str(exc).splitlines()[0]}", flush=True)
                continue
            request = dict(case["request"])
            if "tools" in request:
                request["tools"] = "@0"
            row = {
                "label": case["label"],
                "output_ids": case["output_ids"],
                "finish_in": case["finish_in"],
                "request": request,
                "prompt_tail_ids": live.prompt[-12:],
                "whole": live.whole,
                "stream": live.stream,
            }
            lines.append(json.dumps(row, ensure_ascii=False, separators=(",", ":")))
        peer.close()
    finally:
        server.stop()
    path = HERE / f"{family}.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.rsplit("usage:", 1)[1].strip(), file=sys.stderr)
        return 2
    for family in argv:
        print(f"{family}: {record(family)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
