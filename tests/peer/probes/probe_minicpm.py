"""How the answers of MiniCPM-V, MiniCPM5 and the response-template parsers
(`tests/core/parsers/vllm_answers/{minicpmv,minicpm5,hf,beam}.jsonl`) were recorded: these
cases, on the folders of `recorded_minicpm.py`, by recorder.py (as the long tail's; a case
vLLM refuses is left out: hf refuses tool_choice "required" / named and
`parallel_tool_calls: false`, beam "required" / named with this template).

usage: python -m tests.peer.probes.probe_minicpm FAMILY [FAMILY ...]
(needs `tests/peer/setup_peer.sh`'s venv and the folders; starts one server at a time.)
"""

from __future__ import annotations

import json
import sys
from typing import Any

from tests.peer.probes.cases_longtail import AUTO, NAMED, NO_TOOLS, NONE, REQUIRED, TOOLS, W
from tests.peer.recorded.recorder import CaseSpec, Plain, Probe, from_pieces, main
from tests.support.vocab import synthetic_longtail as lt

OFF = {"chat_template_kwargs": {"enable_thinking": False}}
HIDE = {"include_reasoning": False}
SINGLE = {"parallel_tool_calls": False}


def _xml_call(name: str, args: dict[str, Any]) -> str:
    """A Qwen3-Coder call (MiniCPM-V writes them)."""
    params = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in args.items())
    return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"


def minicpmv_cases() -> list[CaseSpec]:
    call = _xml_call("get_weather", {"city": "Tokyo", "days": 3})
    return [
        ("reasoning then answer", ["Let me think.\n</think>\n\nThe answer."], AUTO, "stop"),
        ("escaped newlines", ["Step 1\\nStep 2</think>Line 1\\nLine 2"], AUTO, "stop"),
        ("escapes in code and math", ["r</think>Use `a\\nb` and $x\\n$ then\\nend"], AUTO, "stop"),
        ("fenced code", ["r</think>```\\nx\\n```\\nafter"], AUTO, "stop"),
        ("latex brackets", ["r</think>\\(a\\nb\\) and \\[c\\nd\\]\\ne"], AUTO, "stop"),
        ("double backslash", ["r</think>C:\\\\new and \\\\\\n three"], AUTO, "stop"),
        ("carriage returns", ["r</think>a\\r\\nb\\rc"], AUTO, "stop"),
        ("im_end inside", ["r</think>A", "<|im_end|>", "B"], AUTO, "stop"),
        ("reserved markers as text", ["r</think>A<reserved_12>B<|reserved_13|>C"], AUTO, "stop"),
        ("thinking off: plain", ["Answer\\nhere"], {**AUTO, **OFF}, "stop"),
        ("thinking off: think block", ["<think>hidden</think>Answer"], {**AUTO, **OFF}, "stop"),
        ("thinking off: stray end", ["A</think>B"], {**AUTO, **OFF}, "stop"),
        ("call after reasoning", ["r</think>Checking.\n" + call], AUTO, "stop"),
        (
            "escape inside call",
            ["r</think>" + _xml_call("get_weather", {"city": "Pa\\nris"})],
            AUTO,
            "stop",
        ),
        ("include_reasoning false", ["r\\ns</think>A\\nB"], {**AUTO, **HIDE}, "stop"),
        ("cut in reasoning after backslash", ["abc\\"], AUTO, "length"),
        ("cut in content after backslash", ["r</think>abc\\"], AUTO, "length"),
        ("think again after end", ["r</think>A<think>B</think>C"], AUTO, "stop"),
        ("tool_choice none", ["r</think>Sure. " + call], NONE, "stop"),
        ("no tools", ["r</think>Just\\ntext."], NO_TOOLS, "stop"),
        ("markers as plain tokens", [Plain("r</think>"), "A\\nB"], AUTO, "stop"),
    ]


def _fn(name: str, *params: tuple[str, str]) -> str:
    body = "".join(f'<param name="{k}">{v}</param>' for k, v in params)
    return f'<function name="{name}">{body}</function>'


def minicpm5_cases() -> list[CaseSpec]:
    one = _fn("get_weather", ("city", "Tokyo"), ("days", "3"))
    return [
        ("no call", ["Hello, how can I help?"], AUTO, "stop"),
        ("single call", [one], AUTO, "stop"),
        ("text before call", ["Let me check. " + one], AUTO, "stop"),
        ("text after call", [one + " Done."], AUTO, "stop"),
        ("two calls", [one + "\n" + _fn("get_weather", ("city", "Paris"))], AUTO, "stop"),
        ("empty arguments", [_fn("get_current_date")], AUTO, "stop"),
        ("unknown tool", [_fn("no_such_tool", ("city", "x"))], AUTO, "stop"),
        ("missing required", [_fn("get_weather", ("days", "2"))], AUTO, "stop"),
        ("parameter twice", [_fn("get_weather", ("city", "a"), ("city", "b"))], AUTO, "stop"),
        ("extra parameter", [_fn("get_weather", ("city", "x"), ("zzz", "1"))], AUTO, "stop"),
        ("xml entity", [_fn("get_weather", ("city", " A &amp; B "))], AUTO, "stop"),
        ("not xml", [_fn("get_weather", ("city", " a < b "))], AUTO, "stop"),
        (
            "typed values",
            [
                _fn(
                    "set_params",
                    ("s", "123"),
                    ("i", "7"),
                    ("n", "2.5"),
                    ("b", "true"),
                    ("o", '{"k": [1, null]}'),
                    ("a", "['p', 'q']"),
                )
            ],
            AUTO,
            "stop",
        ),
        ("arguments wrapper", [_fn("get_weather", ("arguments", json.dumps(W)))], AUTO, "stop"),
        (
            "nameless param",
            ['<function name="get_weather"><param>x</param></function>'],
            AUTO,
            "stop",
        ),
        ("cdata value", [_fn("get_weather", ("city", "<![CDATA[a < b]]>"))], AUTO, "stop"),
        ("cut block", ['<function name="get_weather"><param name="city">To'], AUTO, "length"),
        ("think then answer", ["<think>r</think>\n\nAnswer."], AUTO, "stop"),
        ("think then call", ["<think>r</think>" + one], AUTO, "stop"),
        ("content ws around call", ["  Checking.  " + one + "  "], AUTO, "stop"),
        ("tool_choice none", ["Sure. " + one], NONE, "stop"),
        ("no tools + call", ["Sure. " + one], NO_TOOLS, "stop"),
        (
            "tool_choice required",
            ['[{"name": "get_weather", "parameters": {"city": "Tokyo", "days": 3}}]'],
            REQUIRED,
            "stop",
        ),
        ("tool_choice named", ['{"city": "Tokyo", "days": 3}'], NAMED, "stop"),
        (
            "markers as plain tokens",
            [Plain('<function name="get_weather">'), '<param name="city">x</param></function>'],
            AUTO,
            "stop",
        ),
    ]


def _tc(args: dict[str, Any], name: str = "get_weather") -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


def template_cases() -> list[CaseSpec]:
    one = _tc({"city": "Tokyo", "days": 3})
    return [
        ("reasoning then answer", ["Let me think.</think>The answer."], AUTO, "stop"),
        ("thinking off", ["The answer."], {**AUTO, **OFF}, "stop"),
        ("thinking off, think block", ["<think>r</think>A"], {**AUTO, **OFF}, "stop"),
        ("call after reasoning", ["r</think>" + one], AUTO, "stop"),
        (
            "text and whitespace around calls",
            ["r</think>Checking.\n\n" + one + "\n" + _tc({"city": "Paris"}) + "\nDone. \n"],
            AUTO,
            "stop",
        ),
        (
            "string arguments typed",
            ["r</think>" + _tc({"city": "Tokyo", "days": "3"})],
            AUTO,
            "stop",
        ),
        ("invalid json", ["r</think>A<tool_call>{bad json}</tool_call>B"], AUTO, "stop"),
        (
            "no arguments",
            ['r</think><tool_call>{"name": "get_current_date"}</tool_call>'],
            AUTO,
            "stop",
        ),
        ("unknown tool", ["r</think>" + _tc({"x": 1}, "no_such_tool")], AUTO, "stop"),
        ("tool tag inside reasoning", ["a <tool_call>x</tool_call> b</think>Hi"], AUTO, "stop"),
        (
            "cut call, complete json",
            ['r</think><tool_call>{"name": "get_weather", "arguments": {"city": "X"}}'],
            AUTO,
            "length",
        ),
        (
            "cut call mid-value",
            ['r</think><tool_call>{"name": "get_weather", "arguments": {"city": "To'],
            AUTO,
            "length",
        ),
        ("cut in reasoning", ["still thinking"], AUTO, "length"),
        ("think again after end", ["r</think>A<think>B</think>C"], AUTO, "stop"),
        ("im_end inside", ["r</think>A \n", "<|im_end|>", "B"], AUTO, "stop"),
        ("include_reasoning false", ["r</think>A"], {**AUTO, **HIDE}, "stop"),
        ("tool_choice none", ["r</think>Sure.\n" + one], NONE, "stop"),
        ("no tools + call", ["r</think>Sure.\n" + one], NO_TOOLS, "stop"),
        ("tool_choice required", ["r</think>" + one], REQUIRED, "stop"),
        ("tool_choice named", ["r</think>" + one], NAMED, "stop"),
        ("parallel_tool_calls false", ["r</think>" + one + one], {**AUTO, **SINGLE}, "stop"),
        (
            "markers as plain tokens",
            [
                Plain("r</think>"),
                "A",
                Plain("<tool_call>"),
                json.dumps({"name": "f", "arguments": {}}),
                Plain("</tool_call>"),
            ],
            AUTO,
            "stop",
        ),
    ]


def _probe(cases: object) -> Probe:
    # The real Qwen3 vocabulary (xlam_tokenizer is it, unchanged); EOS `<|im_end|>`.
    return Probe(TOOLS, from_pieces(lt.xlam_tokenizer, "<|im_end|>", cases), skip_refused=True)  # type: ignore[arg-type]


PROBES: dict[str, Probe] = {
    "minicpmv": _probe(minicpmv_cases),
    "minicpm5": _probe(minicpm5_cases),
    "hf": _probe(template_cases),
    "beam": _probe(template_cases),
}

if __name__ == "__main__":
    sys.exit(main(PROBES, sys.argv[1:], (__doc__ or "").rsplit("usage:", 1)[1]))
