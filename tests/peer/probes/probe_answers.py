"""Records vLLM 0.33.0's answers for a recorded family (`tests/core/parsers/vllm_answers/`):
the probe that wrote the families of `tests/peer/probes/probe_cases.py`.

Per case: the output text is encoded with the family's tokenizer (its EOS appended when the
case finishes with `stop`) and recorded by recorder.py (the chat rendered by vLLM, the ids
derendered whole and 1-token streamed, each answer folded as `test_recorded.py` folds it).
The server is the family's `<family>-recorded` of `vllm_server.RECORDED_SPECS`, its folder
written first by `recorded_models.py`.

usage: python -m tests.peer.probes.probe_answers FAMILY  (the peer venv of setup_peer.sh; writes
tests/core/parsers/vllm_answers/FAMILY.jsonl)
"""

from __future__ import annotations

import sys
from typing import Any

from tests.peer.probes import probe_cases
from tests.peer.probes.probe_base import TOOLS
from tests.peer.recorded.recorder import Probe, main


def _probe(family: str) -> Probe:
    def cases() -> list[dict[str, Any]]:
        probe = probe_cases.PROBES[family]
        tok = probe.tokenizer()
        out = []
        for c in probe.cases:
            ids = tok.encode(c.text, add_special_tokens=False).ids if c.ids is None else c.ids
            if c.finish == "stop":
                ids = [*ids, probe.eos]
            case: dict[str, Any] = {
                "label": c.label,
                "output_ids": list(ids),
                "finish_in": c.finish,
                "request": {**c.request},
            }
            if c.messages is not None:
                case["messages"] = c.messages
            out.append(case)
        return out

    return Probe(TOOLS, cases)


PROBES = {family: _probe(family) for family in probe_cases.PROBES}

if __name__ == "__main__":
    sys.exit(main(PROBES, sys.argv[1:], (__doc__ or "").rsplit("usage:", 1)[1]))
