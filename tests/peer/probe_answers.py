"""Records vLLM 0.33.0's answers for a recorded family (`tests/core/parsers/vllm_answers/`):
the probe that wrote the families of `tests/peer/probe_cases.py`.

Per case: the output text is encoded with the family's tokenizer (its EOS appended when the
case finishes with `stop`), the chat rendered by vLLM (the prompt's last 12 ids are kept),
and the ids derendered whole (one call) and streamed (one token a chunk), each answer folded
as `test_recorded.py` folds it. The server is the family's `<family>-recorded` of
`vllm_server.RECORDED_SPECS`, its folder written first by `recorded_models.py`.

usage: python -m tests.peer.probe_answers FAMILY  (the peer venv of setup_peer.sh; writes
tests/core/parsers/vllm_answers/FAMILY.jsonl)
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.peer import probe_cases
from tests.peer.drive import Case, Gen, run_vllm
from tests.peer.recorded_models import write_folder
from tests.peer.test_recorded import TAIL, stream_answer, whole_answer
from tests.peer.vllm_server import PEER_HOME, RECORDED_SPECS, Peer, Server

OUT = Path(__file__).parent.parent / "core" / "parsers" / "vllm_answers"
DEFAULT_MESSAGES: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]


def _ask(peer: Peer, served: str, name: str, case: dict[str, Any]) -> dict[str, Any]:
    chat = {"model": served, "messages": case["messages"], **case["request"]}
    prompt = peer.render_chat(chat)
    ids = list(case["output_ids"])
    whole = Case(
        name,
        name,
        "chat",
        False,
        chat,
        [[Gen(ids, case["finish_in"])]],
        prompts=[prompt],
        extra={"model": served},
    )
    streamed = Case(
        name,
        name,
        "chat",
        True,
        chat,
        [[Gen(ids, case["finish_in"], cuts=[1] * len(ids) or [0])]],
        prompts=[prompt],
        extra={"model": served},
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
    probe = probe_cases.PROBES[family]
    spec = RECORDED_SPECS[f"{family}-recorded"]
    for line in write_folder(PEER_HOME / "models", spec.model_dir.name):
        print(line, flush=True)
    tok = probe.tokenizer()
    server = Server(spec, Path(tempfile.mkdtemp(prefix="probe-")))
    try:
        server.wait_ready(time.monotonic() + 300)
        peer = Peer(server)
        lines = [json.dumps({"tool_sets": {"@0": probe_cases.TOOLS}}, separators=(",", ":"))]
        for c in probe.cases:
            ids = tok.encode(c.text, add_special_tokens=False).ids if c.ids is None else c.ids
            if c.finish == "stop":
                ids = [*ids, probe.eos]
            req = {**c.request}
            case: dict[str, Any] = {
                "label": c.label,
                "output_ids": ids,
                "finish_in": c.finish,
                "request": req,
            }
            if c.messages is not None:
                case["messages"] = c.messages
            live = {**case, "messages": c.messages or DEFAULT_MESSAGES}
            if req.get("tools") == "@0":
                live["request"] = {**req, "tools": probe_cases.TOOLS}
            case.update(_ask(peer, spec.served_name, c.label, live))
            print(c.label, json.dumps(case["whole"], ensure_ascii=False), flush=True)
            lines.append(json.dumps(case, ensure_ascii=False, separators=(",", ":")))
        peer.close()
    finally:
        server.stop()
    out = OUT / f"{family}.jsonl"
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in probe_cases.PROBES:
        print(__doc__.rsplit("usage:", 1)[1].strip(), file=sys.stderr)
        sys.exit(2)
    print(record(sys.argv[1]))
