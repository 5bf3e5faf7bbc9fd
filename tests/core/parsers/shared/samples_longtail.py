"""The long-tail tool formats (docs/reference/parsers.md) in the random conversations of
test_properties.py and test_mutations.py: how each family writes a conversation's calls,
and its setup. samples.py joins `longtail_setups(Setup)` to its SETUPS (the class is passed
in: this module does not import samples.py, which imports it)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol
from xml.sax.saxutils import escape

from tokenizers import Tokenizer

from tests.core.parsers.recorded.minicpm_deviations import QWEN3_TEMPLATE
from tests.support.vocab import synthetic_longtail as lt

_QUOTE = {'"': "&quot;"}


class _Call(Protocol):
    name: str
    args: dict[str, Any]


class _Conversation(Protocol):
    reasoning: str
    content: str
    calls: tuple[_Call, ...]


def _objects(conv: _Conversation, key: str = "arguments") -> list[str]:
    return [json.dumps({"name": c.name, key: c.args}, ensure_ascii=False) for c in conv.calls]


def render_phi4_mini_json(conv: _Conversation) -> str:
    if not conv.calls:
        return conv.content
    return conv.content + "functools[" + ", ".join(_objects(conv)) + "]"


def render_internlm(conv: _Conversation) -> str:
    text = conv.content
    for body in _objects(conv, "parameters"):
        text += f"<|action_start|><|plugin|>\n{body}<|action_end|>"
    return text


def render_jamba(conv: _Conversation) -> str:
    if not conv.calls:
        return conv.content
    return conv.content + "<tool_calls>[" + ", ".join(_objects(conv)) + "]</tool_calls>"


def render_gigachat3(conv: _Conversation) -> str:
    """The answer, then each call as a message from `function call`."""
    text = conv.content
    for body in _objects(conv):
        text += f"<|message_sep|>\n\nfunction call<|role_sep|>\n{body}"
    return text


def render_apertus(conv: _Conversation) -> str:
    if not conv.calls:
        return conv.content
    objs = [json.dumps({c.name: c.args}, ensure_ascii=False) for c in conv.calls]
    return conv.content + "<|tools_prefix|>[" + ", ".join(objs) + "]<|tools_suffix|>"


def _py(value: Any) -> str:
    return repr(value)


def render_lfm2(conv: _Conversation) -> str:
    """The answer, then the calls as a Python list in LFM2's call tokens."""
    if not conv.calls:
        return conv.content
    calls = ", ".join(
        f"{c.name}({', '.join(f'{k}={_py(v)}' for k, v in c.args.items())})" for c in conv.calls
    )
    return conv.content + f"<|tool_call_start|>[{calls}]<|tool_call_end|>"


def render_plamo3(conv: _Conversation) -> str:
    """PLaMo 3: the prompt opened the think block; calls in tool requests."""
    text = getattr(conv, "reasoning", "") + "<|plamo:end_think:plamo|>" + conv.content
    if conv.calls:
        text += "<|plamo:begin_tool_requests:plamo|>"
        for c in conv.calls:
            args = json.dumps(c.args, ensure_ascii=False)
            text += (
                "<|plamo:begin_tool_request:plamo|><|plamo:begin_tool_name:plamo|>"
                f"{c.name}<|plamo:end_tool_name:plamo|><|plamo:begin_tool_arguments:plamo|>"
                f"<|plamo:constrain|>json<|plamo:msg|>{args}<|plamo:end_tool_arguments:plamo|>"
                "<|plamo:end_tool_request:plamo|>"
            )
        text += "<|plamo:end_tool_requests:plamo|>"
    return text


def render_dots(conv: _Conversation) -> str:
    """dots.llm1: invoke elements in a `<dots_function_call>` block; strings as written
    (without surrounding whitespace: the parser strips values), the rest as JSON."""
    if not conv.calls:
        return conv.content
    text = conv.content + "<dots_function_call>\n"
    for c in conv.calls:
        params = "".join(
            f'<parameter name="{k}">'
            f"{v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}</parameter>\n"
            for k, v in c.args.items()
        )
        text += f'<invoke name="{c.name}">\n{params}</invoke>\n'
    return text + "</dots_function_call>"


def render_xlam(conv: _Conversation) -> str:
    """xLAM: the answer is the call array alone (vLLM reads an array only when the output
    opens with it), or the text when there is no call."""
    if not conv.calls:
        return conv.content
    return "[" + ", ".join(_objects(conv)) + "]"


def render_minicpm5(conv: _Conversation) -> str:
    """MiniCPM5: one `<function>` element per call; values as XML text (strings as they
    are, others as JSON), escaped."""
    text = conv.content
    for c in conv.calls:
        params = "".join(
            f'<param name="{escape(k, _QUOTE)}">'
            + escape(v if isinstance(v, str) else json.dumps(v, ensure_ascii=False))
            + "</param>"
            for k, v in c.args.items()
        )
        text += f'<function name="{c.name}">{params}</function>'
    return text


def render_template(conv: _Conversation) -> str:
    """The Qwen3 response template (the prompt opened `<think>`): hermes' calls."""
    text = conv.reasoning + "</think>" + conv.content
    for c in conv.calls:
        body = json.dumps({"name": c.name, "arguments": c.args}, ensure_ascii=False)
        text += f"<tool_call>\n{body}\n</tool_call>"
    return text


def render_minicpmv(conv: _Conversation) -> str:
    """MiniCPM-V: Qwen3's reasoning (the prompt opened `<think>`) and Qwen3-Coder calls."""
    text = conv.reasoning + "</think>" + conv.content
    for c in conv.calls:
        params = "".join(
            f"<parameter={k}>\n{v if isinstance(v, str) else json.dumps(v)}\n</parameter>\n"
            for k, v in c.args.items()
        )
        text += f"<tool_call>\n<function={c.name}>\n{params}</function>\n</tool_call>"
    return text


# Tokenizer key (Setup.tokenizer) → the family's synthetic tokenizer.
LONGTAIL_TOKENIZERS: dict[str, Callable[[], Tokenizer]] = {
    "phi4_mini": lt.phi4_mini_tokenizer,
    "internlm": lt.internlm_tokenizer,
    "jamba": lt.jamba_tokenizer,
    "gigachat3": lt.gigachat3_tokenizer,
    "apertus": lt.apertus_tokenizer,
    "lfm2": lt.lfm2_tokenizer,
    "plamo3": lt.plamo3_tokenizer,
    "dots": lt.dots_tokenizer,
    "xlam": lt.xlam_tokenizer,
}


def longtail_setups(setup: Callable[..., Any]) -> dict[str, Any]:
    """The setups, made with samples.Setup (passed as `setup`)."""
    made = [
        setup(
            "phi4_mini_json",
            None,
            "phi4_mini_json",
            "phi4_mini",
            render_phi4_mini_json,
            reasoning=False,
            markers=("functools[",),
        ),
        # One call per answer: vLLM's InternLM2 parser reads one.
        setup(
            "internlm",
            None,
            "internlm",
            "internlm",
            render_internlm,
            reasoning=False,
            many_calls=False,
            markers=("<|action_start|>", "<|plugin|>", "<|action_end|>"),
        ),
        setup(
            "jamba",
            None,
            "jamba",
            "jamba",
            render_jamba,
            reasoning=False,
            markers=("<tool_calls>", "</tool_calls>"),
        ),
        setup(
            "gigachat3",
            None,
            "gigachat3",
            "gigachat3",
            render_gigachat3,
            reasoning=False,
            markers=("<|message_sep|>", "function call", "<|role_sep|>"),
        ),
        setup(
            "apertus",
            None,
            "apertus",
            "apertus",
            render_apertus,
            reasoning=False,
            markers=("<|tools_prefix|>", "<|tools_suffix|>"),
        ),
        setup(
            "lfm2",
            None,
            "lfm2",
            "lfm2",
            render_lfm2,
            reasoning=False,
            markers=("<|tool_call_start|>", "<|tool_call_end|>"),
        ),
        setup(
            "plamo3",
            "plamo3",
            "plamo3",
            "plamo3",
            render_plamo3,
            "<|plamo:msg|>assistant\n<|plamo:begin_think:plamo|>",
            markers=("<|plamo:", ":plamo|>"),
        ),
        setup(
            "dots",
            None,
            "dots",
            "dots",
            render_dots,
            reasoning=False,
            markers=("<dots_function_call>", "<invoke", "<parameter"),
            strip_values=True,
        ),
        setup(
            "xlam",
            None,
            "xlam",
            "xlam",
            render_xlam,
            reasoning=False,
            content_with_calls=False,
            markers=('{"name"', "<tool_call>"),
        ),
        # MiniCPM-V (minicpm_formats.py) with its qwen3_coder calls, the real Qwen3 vocabulary.
        setup(
            "minicpmv",
            "minicpmv",
            "qwen3_coder",
            "xlam",
            render_minicpmv,
            "<|im_start|>assistant\n<think>\n",
            markers=("</think>", "<tool_call>", "<function=", "<parameter="),
        ),
        # MiniCPM5 (minicpm_formats.py): the real Qwen3 vocabulary, the markup text.
        setup(
            "minicpm5",
            None,
            "minicpm5",
            "xlam",
            render_minicpm5,
            reasoning=False,
            markers=("<function", "<param", "</function>"),
        ),
        # The response-template parsers with the Qwen3 template transformers ships.
        *(
            setup(
                name,
                name,
                name,
                "xlam",
                render_template,
                "<|im_start|>assistant\n<think>\n",
                markers=("<tool_call>", "</think>"),
                template=QWEN3_TEMPLATE,
                closers=("</tool_call>",),
            )
            for name in ("hf", "beam")
        ),
    ]
    return {s.name: s for s in made}
