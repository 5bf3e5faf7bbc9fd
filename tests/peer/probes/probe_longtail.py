"""How the long-tail families' answers (`tests/core/parsers/vllm_answers/<family>.jsonl`) were
recorded: each case's output written as text (markers as their single tokens, or spelled in
ordinary tokens where a case says so), sent to vLLM 0.33.0's render server for the family
(`vllm_server.RECORDED_SPECS`, folders from `recorded_longtail.py`) by recorder.py (the
rendered prompt, whole and 1-token streamed derender), and vLLM's answers written down. The
cases: cases_longtail.py (JSON call lists), cases_longtail_markup.py (LFM2, PLaMo 3, dots).

usage: python -m tests.peer.probes.probe_longtail FAMILY [FAMILY ...]
(needs `tests/peer/setup_peer.sh`'s venv and the folders; starts one server at a time.)
"""

from __future__ import annotations

import sys

from tests.peer.probes import cases_longtail as c
from tests.peer.probes import cases_longtail_markup as m
from tests.peer.recorded.recorder import Probe, from_pieces, main
from tests.support.vocab import synthetic_longtail as lt


def _probe(tok: object, eos: str, cases: object) -> Probe:
    return Probe(c.TOOLS, from_pieces(tok, eos, cases), skip_refused=True)  # type: ignore[arg-type]


PROBES: dict[str, Probe] = {
    "phi4_mini_json": _probe(lt.phi4_mini_tokenizer, "<|end|>", c.phi4_cases),
    "internlm": _probe(lt.internlm_tokenizer, "<|im_end|>", c.internlm_cases),
    "jamba": _probe(lt.jamba_tokenizer, "<|eom|>", c.jamba_cases),
    "gigachat3": _probe(lt.gigachat3_tokenizer, "</s>", c.gigachat3_cases),
    "apertus": _probe(lt.apertus_tokenizer, "<|assistant_end|>", c.apertus_cases),
    "lfm2": _probe(lt.lfm2_tokenizer, "<|im_end|>", m.lfm2_cases),
    "plamo3": _probe(lt.plamo3_tokenizer, "<|plamo:tag|>", m.plamo3_cases),
    "dots": _probe(lt.dots_tokenizer, "<|endofresponse|>", m.dots_cases),
    "xlam": _probe(lt.xlam_tokenizer, "<|im_end|>", c.xlam_cases),
}

if __name__ == "__main__":
    sys.exit(main(PROBES, sys.argv[1:], (__doc__ or "").rsplit("usage:", 1)[1]))
