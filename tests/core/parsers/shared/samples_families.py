"""Granite 3.x, OLMo 3, Step-3, Hunyuan and ERNIE 4.5 in the random conversations of
test_properties.py and test_mutations.py: how each family writes a conversation, and its
setup. samples.py joins `family_setups(Setup)` to its SETUPS (the class is passed in: this
module does not import samples.py, which imports it)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol

from tokenizers import Tokenizer

from tests.support.vocab import synthetic_families as fam


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


def render_step3(conv: _Conversation) -> str:
    """Step-3: reasoning up to `</think>`; values as text (JSON for non-strings)."""
    text = conv.reasoning + "</think>" + conv.content
    if conv.calls:
        text += "<｜tool_calls_begin｜>"
        for c in conv.calls:
            params = "".join(
                f'<steptml:parameter name="{k}">'
                f"{v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}"
                "</steptml:parameter>"
                for k, v in c.args.items()
            )
            text += (
                f'<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="{c.name}">'
                f"{params}</steptml:invoke><｜tool_call_end｜>"
            )
        text += "<｜tool_calls_end｜>"
    return text


def render_ernie45(conv: _Conversation) -> str:
    """ERNIE 4.5: reasoning up to `</think>`, the answer in `<response>` when there are no
    calls, calls as hermes objects."""
    if not conv.calls:
        return conv.reasoning + "</think>\n\n<response>" + conv.content + "</response>\n"
    calls = "".join(f"<tool_call>\n{o}\n</tool_call>\n" for o in _objects(conv))
    return conv.reasoning + "</think>" + conv.content + calls


def render_hunyuan_a13b(conv: _Conversation) -> str:
    """Hunyuan A13B: `<think>\n…\n</think>\n<answer>\n…\n</answer>`, calls as a JSON list
    in `<tool_calls>`."""
    text = conv.content
    if conv.calls:
        text += "<tool_calls>[" + ", ".join(_objects(conv)) + "]</tool_calls>"
    text += "\n</answer>"
    if conv.reasoning:
        text = "<think>\n" + conv.reasoning + "\n</think>\n<answer>\n" + text
    return text


def _render_hy(conv: _Conversation, sep: str) -> str:
    """HY3 / HY4: reasoning up to `</think>`; values as text (JSON for non-strings)."""
    text = conv.reasoning + "</think>" + conv.content
    if conv.calls:
        text += "<tool_calls>"
        for c in conv.calls:
            pairs = "".join(
                f"<arg_key>{k}</arg_key><arg_value>"
                f"{v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}</arg_value>"
                for k, v in c.args.items()
            )
            text += f"<tool_call>{c.name}{sep}{pairs}</tool_call>"
        text += "</tool_calls>"
    return text


def render_hy_v3(conv: _Conversation) -> str:
    return _render_hy(conv, "<tool_sep>")


def render_hy_v4(conv: _Conversation) -> str:
    return _render_hy(conv, "")


def render_hy_v4_suffix(conv: _Conversation) -> str:
    """HY4 on a checkpoint whose tags carry a suffix (`<tool_call:6124c78e>`)."""
    text = _render_hy(conv, "")
    for tag in ("think", "tool_calls", "tool_call", "arg_key", "arg_value"):
        for t in (f"<{tag}>", f"</{tag}>"):
            text = text.replace(t, t[:-1] + fam.HY_SUFFIX + ">")
    return text


# Tokenizer key (Setup.tokenizer) → the family's synthetic tokenizer.
FAMILY_TOKENIZERS: dict[str, Callable[[], Tokenizer]] = {
    "granite": fam.granite_tokenizer,
    "olmo3": fam.olmo3_tokenizer,
    "step3": fam.step3_tokenizer,
    "ernie45": fam.ernie45_tokenizer,
    "hy": fam.hy_tokenizer,
    "hy_suffix": fam.hy_suffix_tokenizer,
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
        setup(
            "step3",
            "step3",
            "step3",
            "step3",
            render_step3,
            markers=("</think>", "<｜tool_calls_begin｜>", "<steptml:"),
            strip_values=True,
        ),
        setup(
            "ernie45",
            "ernie45",
            "ernie45",
            "ernie45",
            render_ernie45,
            markers=("</think>", "<response>", "</response>", "<tool_call>"),
        ),
        setup(
            "hunyuan_a13b",
            "hunyuan_a13b",
            "hunyuan_a13b",
            "olmo3",
            render_hunyuan_a13b,
            markers=("<think>", "</think>", "<answer>", "</answer>", "<tool_calls>"),
        ),
        setup(
            "hy_v3",
            "hy_v3",
            "hy_v3",
            "hy",
            render_hy_v3,
            markers=("</think>", "<tool_calls>", "<tool_call>", "<arg_key>", "<arg_value>"),
            kwargs={"reasoning_effort": "high"},
        ),
        setup(
            "hy_v4",
            "hy_v4",
            "hy_v4",
            "hy",
            render_hy_v4,
            markers=("</think>", "<tool_calls>", "<tool_call>", "<arg_key>", "<arg_value>"),
        ),
        setup(
            "hy_v4_suffix",
            "hy_v4",
            "hy_v4",
            "hy_suffix",
            render_hy_v4_suffix,
            markers=("</think", "<tool_calls", "<tool_call", "<arg_key", "<arg_value"),
        ),
    ]
    return {s.name: s for s in made}
