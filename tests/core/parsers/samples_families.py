"""Granite 3.x, OLMo 3, Step-3, Hunyuan and ERNIE 4.5 in the random conversations of
test_properties.py and test_mutations.py: how each family writes a conversation, and its
setup. samples.py joins `family_setups(Setup)` to its SETUPS (the class is passed in: this
module does not import samples.py, which imports it)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol

from tokenizers import Tokenizer

from tests import synthetic_families as fam


class _Call(Protocol):
    name: str
    args: dict[str, Any]


class _Conversation(Protocol):
    reasoning: str
    content: str
    calls: tuple[_Call, ...]


def _objects(conv: _Conversation) -> list[str]:
    return [
        json.dumps({"name": c.name, "arguments": c.args}, ensure_ascii=False) for c in conv.calls
    ]


def render_granite(conv: _Conversation) -> str:
    """Granite 3.2's phrases around the reasoning, then Granite 3.0's call list."""
    text = conv.content
    if conv.reasoning:
        text = f"Here is my thought process:{conv.reasoning}Here is my response:{text}"
    if conv.calls:
        text += "<|tool_call|>[" + ", ".join(_objects(conv)) + "]"
    return text


def render_granite_20b_fc(conv: _Conversation) -> str:
    return conv.content + "".join(f"<function_call> {o}\n" for o in _objects(conv))


def render_olmo3(conv: _Conversation) -> str:
    """OLMo 3: the template opened `<think>`; calls one per line in `<function_calls>`,
    values as JSON (OLMo 3 writes `true` / `null` too)."""
    text = conv.reasoning + "</think>" + conv.content
    if conv.calls:
        lines = [
            c.name
            + "("
            + ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in c.args.items())
            + ")"
            for c in conv.calls
        ]
        text += "<function_calls>" + "\n".join(lines) + "</function_calls>"
    return text


# Tokenizer key (Setup.tokenizer) → the family's synthetic tokenizer.
FAMILY_TOKENIZERS: dict[str, Callable[[], Tokenizer]] = {
    "granite": fam.granite_tokenizer,
    "olmo3": fam.olmo3_tokenizer,
}


def family_setups(setup: Callable[..., Any]) -> dict[str, Any]:
    """The setups, made with samples.Setup (passed as `setup`)."""
    made = [
        setup(
            "granite",
            "granite",
            "granite",
            "granite",
            render_granite,
            markers=("Here is my thought process:", "Here is my response:", "<|tool_call|>"),
        ),
        setup(
            "granite-20b-fc",
            None,
            "granite-20b-fc",
            "granite",
            render_granite_20b_fc,
            reasoning=False,
            markers=("<function_call>",),
        ),
        setup(
            "olmo3",
            "olmo3",
            "olmo3",
            "olmo3",
            render_olmo3,
            markers=("<think>", "</think>", "<function_calls>", "</function_calls>"),
        ),
    ]
    return {s.name: s for s in made}
