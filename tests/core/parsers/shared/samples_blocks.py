"""The typed-block and message formats (Inkling, K2 Horizon, Muse; docs/reference/parsers.md)
in the random
conversations of test_properties.py and test_mutations.py. samples.py joins
`block_setups(Setup)` to its SETUPS (the class is passed in: this module does not import
samples.py, which imports it)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol

from tokenizers import Tokenizer

from tests.support.vocab.synthetic_inkling import inkling_tokenizer
from tests.support.vocab.synthetic_k2_horizon import k2_horizon_tokenizer
from tests.support.vocab.synthetic_muse import muse_tokenizer

_M, _E = "<|message_model|>", "<|end_message|>"
INKLING_MARKERS = (
    "<|message_model|>",
    "<|content_thinking|>",
    "<|content_text|>",
    "<|content_invoke_tool_json|>",
    "<|end_message|>",
)


class _Call(Protocol):
    name: str
    args: dict[str, Any]


class _Conversation(Protocol):
    reasoning: str
    content: str
    calls: tuple[_Call, ...]


def render_inkling(conv: _Conversation) -> str:
    """One block per part, the first after the prompt's `<|message_model|>`."""
    blocks = []
    if conv.reasoning:
        blocks.append(f"<|content_thinking|>{conv.reasoning}{_E}")
    if conv.content:
        blocks.append(f"<|content_text|>{conv.content}{_E}")
    for c in conv.calls:
        body = json.dumps({"name": c.name, "args": c.args}, ensure_ascii=False)
        blocks.append(f"<|content_invoke_tool_json|>{body}{_E}")
    return _M.join(blocks)


def render_k2_horizon(conv: _Conversation) -> str:
    """The prompt opened `<ifm|think>`; calls as `xml` elements, non-strings as JSON."""
    text = f"{conv.reasoning}</ifm|think>{conv.content}"
    if conv.calls:
        text += "<ifm|tool_calls>"
        for c in conv.calls:
            text += f"<ifm|tool_call>{c.name}"
            for k, v in c.args.items():
                value = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
                text += f"<ifm|arg_key>{k}</ifm|arg_key><ifm|arg_value>{value}</ifm|arg_value>"
            text += "</ifm|tool_call>"
        text += "</ifm|tool_calls>"
    return text


def render_muse(conv: _Conversation) -> str:
    """One message per part (the prompt ended `<|start|>assistant`): reasoning to `self`,
    each call to its tool as ATEM, the answer to `user`."""
    messages = []
    if conv.reasoning:
        messages.append(f" to=self<|message|>{conv.reasoning}<|eom|>")
    for c in conv.calls:
        params = "".join(
            f'<atem:parameter name="{k}">'
            + (v if isinstance(v, str) else json.dumps(v, ensure_ascii=False))
            + "</atem:parameter>"
            for k, v in c.args.items()
        )
        body = f'<atem:function_calls><atem:invoke name="{c.name}">{params}</atem:invoke>'
        messages.append(f" to={c.name}<|message|>{body}</atem:function_calls><|eom|>")
    if conv.content:
        messages.append(f" to=user<|message|>{conv.content}<|eot|>")
    return "<|start|>assistant".join(messages)


# Tokenizer key (Setup.tokenizer) → the family's synthetic tokenizer.
BLOCK_TOKENIZERS: dict[str, Callable[[], Tokenizer]] = {
    "inkling": inkling_tokenizer,
    "k2_horizon": k2_horizon_tokenizer,
    "muse": muse_tokenizer,
}


def block_setups(setup: Callable[..., Any]) -> dict[str, Any]:
    """The setups, made with samples.Setup (passed as `setup`)."""
    made = [
        setup(
            "inkling",
            "inkling",
            "inkling",
            "inkling",
            render_inkling,
            _M,
            markers=INKLING_MARKERS,
        ),
        setup(
            "k2_horizon",
            "k2_horizon",
            "k2_horizon",
            "k2_horizon",
            render_k2_horizon,
            "<|im_start|>assistant\n<ifm|think>",
            markers=("<ifm|",),
        ),
        setup(
            "muse",
            "muse",
            "muse",
            "muse",
            render_muse,
            "<|start|>assistant",
            markers=("<|message|>", "<|eom|>", "<|eot|>", "<atem:"),
        ),
    ]
    return {s.name: s for s in made}
