"""Known, deliberate differences between our derender and vLLM 0.33.0's.

Each has a stable id (docs/reference/differences.md's "Differences from vLLM 0.33" table
lists exactly these ids, checked by `test_differences_page.py`), a one-line title, and a
predicate saying whether one observed difference of one case (`compare.Diff`: field path,
vLLM's value, ours) is explained by it. A case whose every difference is explained by some entry
counts as `documented`; any other difference fails it.

The predicates live by topic: `differences_requests` (any model: request options, stream
shape), `differences_tokens` (special tokens, logprobs), `differences_lax` (strict tool
calling off), `differences_llama`, `differences_families` (GLM-4.7, MiniMax M2, Qwen3),
`differences_gptoss`, `differences_m3` (MiniMax M3), `differences_serve` (HTTP only);
`differences_base` holds the `Difference` type and the readers of a diff they share.

Imports nothing of the project but those modules: it is read by a test that runs without
vLLM or httpx.
"""

from __future__ import annotations

from typing import Any

from tests.peer.differences.differences_base import Difference
from tests.peer.differences.differences_families import FAMILIES
from tests.peer.differences.differences_gptoss import GPTOSS
from tests.peer.differences.differences_lax import LAX
from tests.peer.differences.differences_llama import LLAMA, PYTHON_TAG_IN_CONTENT
from tests.peer.differences.differences_m3 import M3
from tests.peer.differences.differences_requests import REQUESTS
from tests.peer.differences.differences_serve import SERVE
from tests.peer.differences.differences_tokens import (
    HIDDEN_REASONING_LOGPROBS,
    LOGPROB_CHAR_INSIDE,
    SPECIAL_SKIP_SET,
)

__all__ = ["BY_ID", "DIFFERENCES", "PROPOSED", "Difference", "explain"]

# `explain` takes the first entry that explains a diff, so this order is part of what a
# report says (which id it names): it is the order the entries were accepted in.
DIFFERENCES: list[Difference] = [
    *REQUESTS,
    PYTHON_TAG_IN_CONTENT,
    SPECIAL_SKIP_SET,
    *LAX,
    HIDDEN_REASONING_LOGPROBS,
    *LLAMA,
    *FAMILIES,
    LOGPROB_CHAR_INSIDE,
    *GPTOSS,
    *M3,
    *SERVE,
]

# Observed, and possibly deliberate on our side, but not (yet) accepted: they still fail
# a case. A failing case's report names the proposal that would explain it; moving an
# entry into DIFFERENCES (and a row into docs/reference/differences.md's table) accepts it.
PROPOSED: list[Difference] = []

BY_ID = {d.id: d for d in DIFFERENCES}


def explain(
    case: Any, diffs: list[Any], among: list[Difference] = DIFFERENCES
) -> tuple[list[str], list[Any]]:
    """The ids explaining some of `diffs`, and the diffs nothing explains."""
    used: list[str] = []
    unexplained = []
    for d in diffs:
        hit = next((x for x in among if x.explains(case, d)), None)
        if hit is None:
            unexplained.append(d)
        elif hit.id not in used:
            used.append(hit.id)
    return used, unexplained
