"""Cohere Command A (vllm/parser/cohere_command.py) in the random conversations of
test_properties.py and test_mutations.py. samples.py joins `cohere_setups(Setup)` to its
SETUPS (the class is passed in: this module does not import samples.py, which imports
it); test_properties.truth asks `cohere_truth` for what melody's trimming leaves.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol

from tokenizers import Tokenizer

from tests.support.vocab.synthetic_cohere import cohere_tokenizer

ST, ET = "<|START_THINKING|>", "<|END_THINKING|>"
SR, ER = "<|START_RESPONSE|>", "<|END_RESPONSE|>"
SA, EA = "<|START_ACTION|>", "<|END_ACTION|>"
COHERE_MARKERS = (ST, ET, SR, ER, SA, EA, "<|START_TEXT|>", "<|END_TEXT|>", "tool_call_id")


class _Call(Protocol):
    name: str
    args: dict[str, Any]


class _Conversation(Protocol):
    reasoning: str
    content: str
    calls: tuple[_Call, ...]


def _answer(conv: _Conversation) -> str:
    text = f"{SR}{conv.content}{ER}" if conv.content else ""
    if conv.calls:
        # As Command A writes them: one call a line in an indented list.
        calls = [
            json.dumps(
                {"tool_call_id": str(n), "tool_name": c.name, "parameters": c.args},
                ensure_ascii=False,
            )
            for n, c in enumerate(conv.calls)
        ]
        text += SA + "[\n    " + ",\n    ".join(calls) + "\n]" + EA
    return text


def render_cmd3(conv: _Conversation) -> str:
    """Command A: a thinking block (when there is reasoning), the answer, the calls."""
    return (f"{ST}{conv.reasoning}{ET}" if conv.reasoning else "") + _answer(conv)


def render_cmd4(conv: _Conversation) -> str:
    """Command A Plus: the prompt opened the thinking block."""
    return f"{conv.reasoning}{ET}" + _answer(conv)


def cohere_truth(name: str, conv: _Conversation) -> tuple[str | None, str | None]:
    """(reasoning, content) after melody's trimming: each segment's trailing whitespace
    goes, and after `<|START_THINKING|>` (cmd3 writes it when there is reasoning) the
    leading whitespace up to the first text, reasoning or content."""
    left_trim = name == "cohere_command3" and bool(conv.reasoning)
    reasoning = conv.reasoning.rstrip()
    if left_trim:
        reasoning = reasoning.lstrip()
    content = conv.content.rstrip()
    if left_trim and not reasoning:
        content = content.lstrip()
    return reasoning or None, content or None


# Tokenizer key (Setup.tokenizer) → the family's synthetic tokenizer.
COHERE_TOKENIZERS: dict[str, Callable[[], Tokenizer]] = {"cohere": cohere_tokenizer}


def cohere_setups(setup: Callable[..., Any]) -> dict[str, Any]:
    """The setups, made with samples.Setup (passed as `setup`)."""
    made = [
        setup("cohere_command3", "cohere_command3", "cohere_command3", "cohere", render_cmd3,
              markers=COHERE_MARKERS),
        setup("cohere_command4", "cohere_command4", "cohere_command4", "cohere", render_cmd4,
              markers=COHERE_MARKERS),
    ]  # fmt: skip
    return {s.name: s for s in made}
