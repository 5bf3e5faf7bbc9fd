"""The probe cases of Baidu ERNIE 4.5, Tencent Hunyuan A13B and Tencent HY3 / HY4 (with and
without the chat template's suffix); probe_cases.py enters them into `PROBES`."""

from __future__ import annotations

from tests.peer.probes.probe_base import DATE, HIDE, NAMED, NONE, REQUIRED, WEATHER, P, T

# -- Baidu ERNIE 4.5 --------------------------------------------------------------------

E_CALL = "<tool_call>\n" + WEATHER + "\n</tool_call>\n"
ERNIE45 = [
    P("reasoning + answer", "abc\n</think>\n\ndef"),
    P("response wrapper", "abc\n</think>\n\n<response>\ndef\n</response>\n"),
    P("with start tag", "<think>abc\n</think>\ndef"),
    P("no end", "still thinking"),
    P("truncated in reasoning", "still thin", finish="length"),
    P("empty answer", "abc</think>"),
    P("response without end", "abc</think>\n<response>\ndef"),
    P("two ends", "R</think>C</think>D"),
    P("text around response", "R</think>A<response>B</response>C"),
    P("include_reasoning false", "R\n</think>\n\n<response>\nC\n</response>\n", HIDE),
    P("call", "R\n</think>\n\n\n" + E_CALL, T),
    P("two calls", "R</think>" + E_CALL + "<tool_call>\n" + DATE + "\n</tool_call>\n", T),
    P("text before call", "R</think>Checking.\n\n" + E_CALL, T),
    P("text after call", "R</think>" + E_CALL + "Done.", T),
    P("call in response", "R</think>\n<response>\n" + E_CALL + "</response>\n", T),
    P("invalid json", "R</think><tool_call>{invalid}</tool_call>", T),
    P("no arguments", 'R</think><tool_call>{"name": "get_current_date"}</tool_call>', T),
    P("call without end", "R</think><tool_call>\n" + WEATHER, T),
    P(
        "cut in value",
        'R</think><tool_call>{"name": "get_weather", "arguments": {"city": "Pa',
        T,
        finish="length",
    ),
    P("tool_choice none", "R</think>Sure. " + E_CALL, NONE),
    P("no tools + call", "R</think>" + E_CALL),
    P(
        "tool_choice required",
        'R</think>[{"name": "get_weather", "parameters": {"city": "Paris"}}]',
        REQUIRED,
    ),
    P("tool_choice named", 'R</think>{"city": "Paris"}', NAMED),
    P("call in reasoning", "R" + E_CALL + "</think>C", T),
    P(
        "unknown tool",
        'R</think><tool_call>{"name": "img_gen", "arguments": {"p": 1}}</tool_call>',
        T,
    ),
]


# -- Tencent Hunyuan A13B ---------------------------------------------------------------

H_CALLS = '<tool_calls>[{"name": "get_weather", "arguments": {"city": "Paris"}}]</tool_calls>'
HUNYUAN_A13B = [
    P("think + answer", "<think>\nR\n</think>\n<answer>\nC\n</answer>"),
    P("answer only", "C\n</answer>"),
    P("no answer end", "<think>\nR\n</think>\n<answer>\nC"),
    P("plain", "Hello there."),
    P("think without answer", "<think>\nR still"),
    P("truncated in answer", "<think>\nR\n</think>\n<answer>\nC", finish="length"),
    P("text after answer", "<think>\nR\n</think>\n<answer>\nC\n</answer>\nafter"),
    P("empty think", "<think>\n\n</think>\n<answer>\nC\n</answer>"),
    P("multiline", "<think>\na\n\nb\n</think>\n<answer>\nc\n\nd\n</answer>"),
    P("include_reasoning false", "<think>\nR\n</think>\n<answer>\nC\n</answer>", HIDE),
    P("call", "<think>\nR\n</think>\n<answer>\n" + H_CALLS + "\n</answer>", T),
    P(
        "two calls",
        '<think>\nR\n</think>\n<answer>\n<tool_calls>[{"name": "get_weather", "arguments": '
        '{"city": "Paris"}}, {"name": "get_current_date", "arguments": {}}]</tool_calls>\n'
        "</answer>",
        T,
    ),
    P(
        "text before call",
        "<think>\nR\n</think>\n<answer>\nChecking. " + H_CALLS + "\n</answer>",
        T,
    ),
    P("call without think", H_CALLS, T),
    P("call bare", H_CALLS + "\n</answer>", T),
    P(
        "invalid json",
        "<think>\nR\n</think>\n<answer>\n<tool_calls>[{bad}]</tool_calls>\n</answer>",
        T,
    ),
    P(
        "not a list",
        "<think>\nR\n</think>\n<answer>\n<tool_calls>" + WEATHER + "</tool_calls>\n</answer>",
        T,
    ),
    P(
        "string arguments",
        '<think>\nR\n</think>\n<answer>\n<tool_calls>[{"name": "get_weather", '
        '"arguments": "{\\"city\\": \\"P\\"}"}]</tool_calls>\n</answer>',
        T,
    ),
    P(
        "missing arguments",
        '<think>\nR\n</think>\n<answer>\n<tool_calls>[{"name": "get_current_date"}]'
        "</tool_calls>\n</answer>",
        T,
    ),
    P(
        "cut in call",
        '<think>\nR\n</think>\n<answer>\n<tool_calls>[{"name": "get_weather", '
        '"arguments": {"city": "Pa',
        T,
        finish="length",
    ),
    P("call in think", "<think>\nR " + H_CALLS + "\n</think>\n<answer>\nC\n</answer>", T),
    P("tool_choice none", "<think>\nR\n</think>\n<answer>\nSure. " + H_CALLS + "\n</answer>", NONE),
    P("no tools + call", "<think>\nR\n</think>\n<answer>\n" + H_CALLS + "\n</answer>"),
    P(
        "tool_choice required",
        "<think>\nR\n</think>\n<answer>\n"
        '[{"name": "get_weather", "parameters": {"city": "Paris"}}]',
        REQUIRED,
    ),
    P("tool_choice named", '{"city": "Paris"}', NAMED),
    P("assistant prefix", "助手：Hello"),
]


# -- Tencent HY3 / HY4 ------------------------------------------------------------------

THINK = {"chat_template_kwargs": {"reasoning_effort": "high"}}
NO_THINK = {"chat_template_kwargs": {"reasoning_effort": "no_think"}}


def _hy_call(name: str, sep: str, **args: str) -> str:
    pairs = "".join(f"<arg_key>{k}</arg_key><arg_value>{v}</arg_value>" for k, v in args.items())
    return f"<tool_call>{name}{sep}{pairs}</tool_call>"


def _suffixed(p: P, suffix: str) -> P:
    """The case with every HY tag carrying the checkpoint's suffix."""
    text = p.text
    for tag in ("think", "tool_calls", "tool_call", "tool_sep", "arg_key", "arg_value"):
        for t in (f"<{tag}>", f"</{tag}>"):
            text = text.replace(t, t[:-1] + suffix + ">")
    return P(p.label, text, p.request, p.finish, p.messages)


def _hy_cases(sep: str) -> list[P]:
    paris = "<tool_calls>" + _hy_call("get_weather", sep, city="Paris") + "</tool_calls>"
    return [
        P("default effort", "R</think>C"),
        P("effort high", "R</think>C", THINK),
        P("effort no_think", "<think>R</think>C", NO_THINK),
        P("top-level effort high", "R</think>C", {"reasoning_effort": "high"}),
        P("think tag written", "<think>R</think>C", THINK),
        P("no end", "still thinking", THINK),
        P("truncated in reasoning", "still thin", THINK, finish="length"),
        P("two ends", "R</think>C</think>D", THINK),
        P("whitespace", "\nR\n</think>\n\nC\n", THINK),
        P("include_reasoning false", "R</think>C", {**THINK, **HIDE}),
        P("call", "R</think>" + paris, {**T, **THINK}),
        P("call, no_think", paris, {**T, **NO_THINK}),
        P(
            "typed args",
            "R</think><tool_calls>"
            + _hy_call("get_weather", sep, city="Paris", days="3", include_hourly="true")
            + "</tool_calls>",
            {**T, **THINK},
        ),
        P(
            "two calls",
            "R</think><tool_calls>"
            + _hy_call("get_weather", sep, city="A")
            + _hy_call("get_current_date", sep)
            + "</tool_calls>",
            {**T, **THINK},
        ),
        P("text before block", "R</think>Checking. " + paris, {**T, **THINK}),
        P("text after block", "R</think>" + paris + " Done.", {**T, **THINK}),
        P(
            "value with spaces",
            "R</think><tool_calls>"
            + _hy_call("get_weather", sep, city="  Paris \n")
            + "</tool_calls>",
            {**T, **THINK},
        ),
        P(
            "unknown key",
            "R</think><tool_calls>"
            + _hy_call("get_weather", sep, city="P", extra="[1, 2]")
            + "</tool_calls>",
            {**T, **THINK},
        ),
        P(
            "block without end",
            "R</think><tool_calls>" + _hy_call("get_weather", sep, city="Paris"),
            {**T, **THINK},
        ),
        P(
            "cut in value",
            "R</think><tool_calls><tool_call>get_weather"
            + sep
            + "<arg_key>city</arg_key><arg_value>Par",
            {**T, **THINK},
            finish="length",
        ),
        P("tool_choice none", "R</think>Sure. " + paris, {**NONE, **THINK}),
        P("no tools + call", "R</think>" + paris, THINK),
        P(
            "tool_choice required",
            'R</think>[{"name": "get_weather", "parameters": {"city": "Paris"}}]',
            {**REQUIRED, **THINK},
        ),
        P("tool_choice named", 'R</think>{"city": "Paris"}', {**NAMED, **THINK}),
        P(
            "unknown tool",
            "R</think><tool_calls>" + _hy_call("img_gen", sep, p="1") + "</tool_calls>",
            {**T, **THINK},
        ),
        P("call in reasoning", "R" + paris + "</think>C", {**T, **THINK}),
    ]
