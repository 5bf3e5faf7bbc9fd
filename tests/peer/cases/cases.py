"""The parity cases: engine outputs built from texts tokenized with the DeepSeek V4
tokenizer, generated from a fixed seed (the same list on every run).

Outputs stay short (≤ ~150 tokens): with parsers vLLM replays the whole output on every
streaming call.

The groups live by what they are about: `cases_text` (plain texts, special tokens, usage,
logprobs), `cases_options` (stop, `n`, completions, refused requests), `cases_deepseek`
(reasoning, DSML tool calls); `cases_builder` holds what they build with (`Builder`, the
texts, tools and requests), re-exported here for the other models' case modules.
"""

from __future__ import annotations

from tokenizers import Tokenizer

from tests.peer.cases.cases_builder import (
    ALTERNATIVES,
    BOS,
    CALLS,
    END_THINK,
    EOS,
    MESSAGES,
    NO_THINK,
    PAD,
    REASONINGS,
    SEARCH,
    SEED,
    TEXTS,
    THINK,
    TOOL_CHOICES,
    TOOLS,
    WEATHER,
    Builder,
    chat_request,
    completion_request,
    dsml,
    function_tool,
    json_and_prose,
)
from tests.peer.cases.cases_deepseek import add_dsml_rules, add_reasoning, add_tools
from tests.peer.cases.cases_options import add_completion, add_errors, add_n, add_stops
from tests.peer.cases.cases_text import add_logprobs, add_plain, add_specials, add_usage
from tests.peer.drive import Case

__all__ = [
    "ALTERNATIVES",
    "BOS",
    "CALLS",
    "END_THINK",
    "EOS",
    "MESSAGES",
    "NO_THINK",
    "PAD",
    "REASONINGS",
    "SEARCH",
    "SEED",
    "TEXTS",
    "THINK",
    "TOOLS",
    "TOOL_CHOICES",
    "WEATHER",
    "Builder",
    "build",
    "chat_request",
    "completion_request",
    "dsml",
    "function_tool",
    "json_and_prose",
]


def build(tok: Tokenizer) -> list[Case]:
    # The order of the groups is the order of the seeded random draws: keep it.
    b = Builder(tok)
    add_plain(b)
    add_specials(b)
    add_usage(b)
    add_logprobs(b)
    add_stops(b)
    add_n(b)
    add_reasoning(b)
    add_tools(b)
    add_completion(b)
    add_errors(b)
    add_dsml_rules(b)
    return b.cases
