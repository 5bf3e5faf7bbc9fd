"""The cases of the long-tail families whose calls are markup or Python call lists
(docs/reference/parsers.md: LiquidAI LFM2, PLaMo 3, dots.llm1). `probe_longtail.py`
records them (the recorder is recorder.py).
"""

from __future__ import annotations

import json
from typing import Any

from tests.peer.probes.cases_longtail import (
    AUTO,
    NAMED,
    NEST,
    NO_TOOLS,
    NONE,
    REQUIRED,
    UNI,
    W2,
    W,
    _cut,
)
from tests.peer.recorded.recorder import CaseSpec, Piece, Plain


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
