"""Records vLLM 0.33.0's answers for Cohere Command A (`cohere_command3`, `cohere_command4`)
into `tests/core/parsers/vllm_answers/<name>.jsonl`, in the format test_vllm_answers.py
reads.

Per case: the output text encoded with `synthetic_cohere.cohere_tokenizer()` (markers are
its special tokens; `<|END_OF_TURN_TOKEN|>`, the EOS, appended when the case finishes with
`stop`), recorded by recorder.py (the rendered prompt, whole and 1-token streamed
derender). The server is `<name>-recorded` of `vllm_server.RECORDED_SPECS` (the `cohere`
folder of recorded_models.py; vLLM's parser needs `cohere-melody` in the peer venv).

usage: python -m tests.peer.probes.probe_cohere cohere_command3|cohere_command4
"""

from __future__ import annotations

import sys
from typing import Any

from tests.peer.recorded.recorder import Piece, Probe, from_pieces, main
from tests.support.vocab.synthetic_cohere import cohere_tokenizer

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_current_date",
            "parameters": {"type": "object", "properties": {}},
        },
    },
]
T = {"tools": "@0"}
NONE = {"tools": "@0", "tool_choice": "none"}
REQUIRED = {"tools": "@0", "tool_choice": "required"}
NAMED = {"tools": "@0", "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}

ST, ET = "<|START_THINKING|>", "<|END_THINKING|>"
SR, ER = "<|START_RESPONSE|>", "<|END_RESPONSE|>"
SA, EA = "<|START_ACTION|>", "<|END_ACTION|>"
STX, ETX = "<|START_TEXT|>", "<|END_TEXT|>"
W = '{"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Paris", "days": 3}}'
D = '{"tool_call_id": "1", "tool_name": "get_current_date", "parameters": {}}'
CALL = SA + "[" + W + "]" + EA
PRETTY = (
    SA + '[\n    {\n        "tool_call_id": "0",\n        "tool_name": "get_weather",\n'
    '        "parameters": {\n            "city": "Paris",\n            "days": 3\n'
    "        }\n    }\n]" + EA
)


def act(tool: str, params: str, cut: bool = False) -> str:
    """An action block with one call (`cut`: the output stops inside `params`)."""
    call = f'{{"tool_call_id": "0", "tool_name": "{tool}", "parameters": {params}'
    return SA + "[" + call + ("" if cut else "}]" + EA)


NESTED = '{"city": "Paris", "opts": {"a": [1, {"b": null}], "s": "}"}}'
HIDE = {"include_reasoning": False}
THINK_OFF = {"chat_template_kwargs": {"enable_thinking": False}}
CITES = f"{SR}The <co>sky is blue</co: 0:[1,2]> today, <co>x</co: 1:[0]>.{ER}"

# (label, output text, request, finish)
Case = tuple[str, str, dict[str, Any], str]  # label, output text, request, finish
COMMON: list[Case] = [
    ("reasoning + response", f"{ST}Let me think.{ET}{SR}Hello there.{ER}", {}, "stop"),
    ("response only", f"{SR}Hello there.{ER}", {}, "stop"),
    ("plain text", "Hello there.", {}, "stop"),
    ("whitespace around markers", f"{ST}  Think.  \n{ET}  {SR}  Hi.  \n{ER}  ", {}, "stop"),
    ("empty thinking, spaced answer", f"{ST}{ET}  {SR}  Hi.{ER}", {}, "stop"),
    ("newlines inside", f"{ST}Step 1.\n\nStep 2.{ET}{SR}Line 1.\nLine 2.{ER}", {}, "stop"),
    ("text after end of response", f"{SR}Hi.{ER} trailing words", {}, "stop"),
    ("citations", CITES, {}, "stop"),
    ("citation in reasoning", f"{ST}Doc says <co>rain</co: 0:[0]> later.{ET}{SR}Rain.{ER}", {},
     "stop"),
    ("spaces inside citation", f"{SR}a<co> b </co: 0:[1]> c{ER}", {}, "stop"),
    ("call", CALL, T, "stop"),
    ("reasoning + call", f"{ST}Need weather.{ET}" + CALL, T, "stop"),
    ("pretty-printed call", f"{ST}Plan.{ET}" + PRETTY, T, "stop"),
    ("two calls", SA + "[" + W + ", " + D + "]" + EA, T, "stop"),
    ("text before call", "Let me check." + CALL, T, "stop"),
    ("response after call", CALL + f"{SR}Done.{ER}", T, "stop"),
    ("tool_choice none", f"{ST}Plan.{ET}" + CALL, NONE, "stop"),
    ("no tools + call", f"{ST}Plan.{ET}" + CALL, {}, "stop"),
    ("tool_choice required", CALL, REQUIRED, "stop"),
    ("tool_choice named", CALL, NAMED, "stop"),
    ("include_reasoning false", f"{ST}Secret.{ET}{SR}Hi.{ER}", HIDE, "stop"),
    ("include_reasoning false + call", f"{ST}Secret.{ET}" + CALL, {**T, **HIDE}, "stop"),
    ("thinking kwarg off", f"{ST}A.{ET}{SR}B{ER}", THINK_OFF, "stop"),
    ("truncated in reasoning", f"{ST}Still thin", {}, "length"),
    ("truncated in response", f"{ST}A.{ET}{SR}Hel", {}, "length"),
    ("truncated mid-value", act("get_weather", '{"city": "Tok', cut=True), T, "length"),
    ("truncated after name", act("get_weather", "", cut=True)[: -len(', "parameters": ')], T,
     "length"),
    ("empty parameters", SA + "[" + D + "]" + EA, T, "stop"),
    ("unknown tool", act("img_gen", '{"p": 1}'), T, "stop"),
    ("nested arguments", act("get_weather", NESTED), T, "stop"),
    ("non-ascii", f"{ST}思考。{ET}{SR}杭州 ☀️ é{ER}", {}, "stop"),
    ("non-ascii call", act("get_weather", '{"city": "杭州"}'), T, "stop"),
    ("other special tokens", f"{SR}A<|USER_TOKEN|>B{ER}", {}, "stop"),
    ("second thinking block", f"{ST}a{ET}{SR}b{ER}{ST}c{ET}{SR}d{ER}", {}, "stop"),
    ("empty output", "", {}, "stop"),
]  # fmt: skip
CMD4_ONLY: list[Case] = [
    ("no start marker", f"Thinking here.{ET}{STX}Answer.{ETX}", {}, "stop"),
    ("text markers", f"{ST}Plan.{ET}{STX}Hello.{ETX}", {}, "stop"),
    ("text markers + call", f"Plan.{ET}" + CALL, T, "stop"),
]
CMD3_ONLY: list[Case] = [
    ("text markers are no markers", f"{STX}Hello.{ETX}", {}, "stop"),
]
CASES = {
    "cohere_command3": COMMON + CMD3_ONLY,
    "cohere_command4": COMMON + CMD4_ONLY,
}


def _cases(family: str) -> Probe:
    def cases() -> list[tuple[str, list[Piece], dict[str, Any], str]]:
        return [(label, [text], req, finish) for label, text, req, finish in CASES[family]]

    return Probe(TOOLS, from_pieces(cohere_tokenizer, "<|END_OF_TURN_TOKEN|>", cases))


PROBES = {family: _cases(family) for family in CASES}

if __name__ == "__main__":
    sys.exit(main(PROBES, sys.argv[1:], (__doc__ or "").rsplit("usage:", 1)[1]))
