"""The one recorder of vLLM 0.33.0's answers (`tests/core/parsers/vllm_answers/<family>.jsonl`,
the format test_vllm_answers.py reads). The case modules say what to send; this says how.

Per case: the output ids (the family's EOS appended when the case finishes with `stop`), the
chat rendered by vLLM (the prompt's last 12 ids are kept), the ids derendered whole (one
call) and streamed (one token a chunk), each answer folded as `test_recorded.py` folds it.
The server is the family's `<family>-recorded` of `vllm_server.RECORDED_SPECS`, its folder
written first (`recorded_models.py` and the modules it takes in). A case vLLM refuses
(HTTP 4xx on the render or the derender) is left out and said on stdout where the probe
allows it (`Probe.skip_refused`), else it stops the recording.

The case modules and their commands (`python -m tests.peer.<module> FAMILY …`, in the peer
venv of setup_peer.sh): probe_answers (cases in probe_cases.py), probe_cohere,
probe_longtail (cases in cases_longtail.py, cases_longtail_markup.py), probe_minicpm.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

OUT = Path(__file__).resolve().parents[2] / "core" / "parsers" / "vllm_answers"
DEFAULT_MESSAGES: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]


class Plain(str):
    """Text encoded one character at a time: a marker spelled in ordinary tokens."""


Piece = str | Plain
# label, output pieces, request, finish ("stop": the EOS is appended; "length": none)
CaseSpec = tuple[str, list[Piece], dict[str, Any], str]


@dataclass(frozen=True)
class Probe:
    """A family's recording: the tool set the cases name as `"tools": "@0"`, and the cases
    (dicts with `label`, `output_ids`, `finish_in`, `request`, and `messages` when they are
    not DEFAULT_MESSAGES)."""

    tools: list[dict[str, Any]]
    cases: Callable[[], list[dict[str, Any]]]
    skip_refused: bool = False


class Refused(RuntimeError):
    """vLLM answered the case with an HTTP error."""


def encode(tok: Tokenizer, pieces: list[Piece]) -> list[int]:
    ids: list[int] = []
    for p in pieces:
        if isinstance(p, Plain):
            for ch in p:
                ids += tok.encode(ch, add_special_tokens=False).ids
        else:
            ids += tok.encode(p, add_special_tokens=False).ids
    return ids


def from_pieces(
    make_tok: Callable[[], Tokenizer], eos: str, specs: Callable[[], list[CaseSpec]]
) -> Callable[[], list[dict[str, Any]]]:
    """The cases of `specs` (output as text pieces), encoded with the family's tokenizer."""

    def cases() -> list[dict[str, Any]]:
        tok = make_tok()
        eos_id = tok.token_to_id(eos)
        out, seen = [], set()
        for label, pieces, req, finish in specs():
            assert label not in seen, label
            seen.add(label)
            ids = encode(tok, pieces) + ([eos_id] if finish == "stop" else [])
            out.append({"label": label, "output_ids": ids, "finish_in": finish, "request": req})
        return out

    return cases


def ask(
    peer: Any, served: str, name: str, case: dict[str, Any], tools: list[Any]
) -> dict[str, Any]:
    """vLLM's answers to one case: the prompt's tail, whole and 1-token streamed."""
    from tests.peer.drive import Case, Gen, run_vllm
    from tests.peer.recorded.test_recorded import TAIL, stream_answer, whole_answer

    request = dict(case["request"])
    if request.get("tools") == "@0":
        request["tools"] = tools
    chat = {"model": served, "messages": case.get("messages") or DEFAULT_MESSAGES, **request}
    try:
        prompt = peer.render_chat(chat)
    except RuntimeError as exc:
        if "render failed: HTTP" in str(exc):
            raise Refused(str(exc)) from None
        raise
    ids = list(case["output_ids"])
    whole = Case(name, name, "chat", False, chat, [[Gen(ids, case["finish_in"])]],
                 prompts=[prompt], extra={"model": served})  # fmt: skip
    # One token a chunk; an empty output is one empty chunk carrying the finish reason.
    streamed = replace(
        whole, stream=True, outputs=[[Gen(ids, case["finish_in"], cuts=[1] * len(ids) or [0])]]
    )
    got = []
    for c in (whole, streamed):
        res = run_vllm(peer, c)
        if res.status != 200:
            raise Refused(f"{name}: HTTP {res.status}: {res.error}")
        got.append(res)
    assert got[0].body is not None
    return {
        "prompt_tail_ids": prompt[-TAIL:],
        "whole": whole_answer(got[0].body),
        "stream": stream_answer(got[1].chunks),
    }


def _write_folder(name: str) -> None:
    from tests.peer.recorded import recorded_models
    from tests.peer.recorded.recorded_blocks import FOLDERS as BLOCKS
    from tests.peer.recorded.recorded_longtail import FOLDERS as LONGTAIL
    from tests.peer.vllm_server import PEER_HOME

    recorded_models.FOLDERS.update({**LONGTAIL, **BLOCKS})
    if name in recorded_models.FOLDERS:
        for line in recorded_models.write_folder(PEER_HOME / "models", name):
            print(line, flush=True)


def record(family: str, probe: Probe) -> Path:
    """Records the family's answers; returns the file written."""
    from tests.peer.vllm_server import RECORDED_SPECS, Peer, Server

    spec = RECORDED_SPECS[f"{family}-recorded"]
    _write_folder(spec.model_dir.name)
    lines = [
        json.dumps({"tool_sets": {"@0": probe.tools}}, ensure_ascii=False, separators=(",", ":"))
    ]
    server = Server(spec, Path(tempfile.mkdtemp(prefix=f"probe-{family}-")))
    try:
        server.wait_ready(time.monotonic() + 300)
        peer = Peer(server)
        for case in probe.cases():
            try:
                row = {**case, **ask(peer, spec.served_name, case["label"], case, probe.tools)}
            except Refused as exc:
                if not probe.skip_refused:
                    raise
                # No answer to record (docs/reference/differences.md says which cases vLLM refuses).
                print(f"{family}: {case['label']!r}: {str(exc).splitlines()[0]}", flush=True)
                continue
            print(case["label"], json.dumps(row["whole"], ensure_ascii=False), flush=True)
            lines.append(json.dumps(row, ensure_ascii=False, separators=(",", ":")))
        peer.close()
    finally:
        server.stop()
    path = OUT / f"{family}.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def main(probes: dict[str, Probe], argv: list[str], usage: str) -> int:
    """`python -m tests.peer.<module> FAMILY …`: records each family named."""
    if not argv or any(f not in probes for f in argv):
        print(usage.strip(), f"(families: {', '.join(probes)})", file=sys.stderr)
        return 2
    for family in argv:
        print(f"{family}: {record(family, probes[family])}", flush=True)
    return 0
