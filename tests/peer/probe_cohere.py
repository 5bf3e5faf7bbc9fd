"""Records vLLM 0.33.0's answers for Cohere Command A (`cohere_command3`, `cohere_command4`)
into `tests/core/parsers/vllm_answers/<name>.jsonl`, in the format test_vllm_answers.py
reads.

Per case: the output text encoded with `synthetic_cohere.cohere_tokenizer()` (markers are
its special tokens; `<|END_OF_TURN_TOKEN|>`, the EOS, appended when the case finishes with
`stop`), the chat rendered by vLLM (the prompt's last 12 ids kept), the ids derendered
whole (one call) and streamed (one token a chunk), each folded as test_recorded.py folds
it. The server is `<name>-recorded` of `vllm_server.RECORDED_SPECS` (the `cohere` folder
of recorded_models.py; vLLM's parser needs `cohere-melody` in the peer venv).

usage: python -m tests.peer.probe_cohere cohere_command3|cohere_command4
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from tests.peer.drive import Case, Gen, run_vllm
from tests.peer.recorded_models import write_folder
from tests.peer.test_recorded import TAIL, stream_answer, whole_answer
from tests.peer.vllm_server import PEER_HOME, RECORDED_SPECS, Peer, Server
from tests.synthetic_cohere import cohere_tokenizer

OUT = Path(__file__).parent.parent / "core" / "parsers" / "vllm_answers"
MESSAGES: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]

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
Probe = tuple[str, str, dict[str, Any], str]
COMMON: list[Probe] = [
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
CMD4_ONLY: list[Probe] = [
    ("no start marker", f"Thinking here.{ET}{STX}Answer.{ETX}", {}, "stop"),
    ("text markers", f"{ST}Plan.{ET}{STX}Hello.{ETX}", {}, "stop"),
    ("text markers + call", f"Plan.{ET}" + CALL, T, "stop"),
]
CMD3_ONLY: list[Probe] = [
    ("text markers are no markers", f"{STX}Hello.{ETX}", {}, "stop"),
]
CASES = {
    "cohere_command3": COMMON + CMD3_ONLY,
    "cohere_command4": COMMON + CMD4_ONLY,
}


def _ask(peer: Peer, served: str, name: str, case: dict[str, Any]) -> dict[str, Any]:
    chat = {"model": served, "messages": case["messages"], **case["request"]}
    prompt = peer.render_chat(chat)
    ids = list(case["output_ids"])
    whole = Case(name, name, "chat", False, chat, [[Gen(ids, case["finish_in"])]],
                 prompts=[prompt], extra={"model": served})  # fmt: skip
    streamed = replace(
        whole, stream=True, outputs=[[Gen(ids, case["finish_in"], cuts=[1] * len(ids) or [0])]]
    )
    got = []
    for c in (whole, streamed):
        res = run_vllm(peer, c)
        if res.status != 200:
            raise RuntimeError(f"{name}: HTTP {res.status}: {res.error}")
        got.append(res)
    assert got[0].body is not None
    return {
        "prompt_tail_ids": prompt[-TAIL:],
        "whole": whole_answer(got[0].body),
        "stream": stream_answer(got[1].chunks),
    }


def record(family: str) -> Path:
    spec = RECORDED_SPECS[f"{family}-recorded"]
    for line in write_folder(PEER_HOME / "models", spec.model_dir.name):
        print(line, flush=True)
    tok = cohere_tokenizer()
    eos = tok.token_to_id("<|END_OF_TURN_TOKEN|>")
    server = Server(spec, Path(tempfile.mkdtemp(prefix="probe-")))
    lines = [json.dumps({"tool_sets": {"@0": TOOLS}}, separators=(",", ":"))]
    try:
        server.wait_ready(time.monotonic() + 300)
        peer = Peer(server)
        for label, text, req, finish in CASES[family]:
            ids = tok.encode(text, add_special_tokens=False).ids
            if finish == "stop":
                ids = [*ids, eos]
            case: dict[str, Any] = {
                "label": label,
                "output_ids": ids,
                "finish_in": finish,
                "request": req,
            }
            live_req = {**req, "tools": TOOLS} if req.get("tools") == "@0" else req
            live = {**case, "request": live_req, "messages": MESSAGES}
            case.update(_ask(peer, spec.served_name, label, live))
            print(label, json.dumps(case["whole"], ensure_ascii=False), flush=True)
            lines.append(json.dumps(case, ensure_ascii=False, separators=(",", ":")))
        peer.close()
    finally:
        server.stop()
    out = OUT / f"{family}.jsonl"
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        print(__doc__.rsplit("usage:", 1)[1].strip(), file=sys.stderr)
        sys.exit(2)
    print(record(sys.argv[1]))
