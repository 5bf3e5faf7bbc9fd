"""Conversations rendered as each format's model output, with their ground truth.

A `Conversation` is what the model meant (reasoning, answer text, tool calls); a
`Setup` says how a model family writes it and which tokenizer, prompt and request go
with it. The property tests render random conversations; `golden_inputs` renders one
canonical reasoning + tool-call conversation per format as token ids, for replay golden
files (`tests/golden/make_inputs.py` can write ChunkRecords from them once `step`
drives the parser).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tokenizers import Tokenizer

from tests.core.parsers.shared.harness import (
    KIMI_SPECIAL,
    LLAMA_SPECIAL,
    MISTRAL_OLD_SPECIAL,
    MISTRAL_SPECIAL,
    QWEN_ADDED,
    QWEN_SPECIAL,
    marker_tokenizer,
)
from tests.core.parsers.shared.samples_blocks import block_setups
from tests.core.parsers.shared.samples_cohere import cohere_setups
from tests.core.parsers.shared.samples_families import family_setups
from tests.core.parsers.shared.samples_longtail import longtail_setups

Args = dict[str, Any]


@dataclass(frozen=True)
class Call:
    name: str
    args: Args


@dataclass(frozen=True)
class Conversation:
    reasoning: str = ""  # "" = no reasoning block
    content: str = ""
    calls: tuple[Call, ...] = ()


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def tools_for(conv: Conversation) -> list[dict[str, Any]]:
    """Request tools whose schemas declare the types the calls use."""
    seen: dict[str, dict[str, Any]] = {}
    for call in conv.calls:
        props = seen.setdefault(call.name, {})
        for k, v in call.args.items():
            props[k] = {"type": _json_type(v)}
    if not seen:
        seen["unused_tool"] = {}
    return [
        {
            "type": "function",
            "function": {"name": n, "parameters": {"type": "object", "properties": p}},
        }
        for n, p in seen.items()
    ]


# -- renderers: how each family writes a conversation ------------------------------------


def _dsml(wrapper: str, conv: Conversation) -> str:
    out = [f"<｜DSML｜{wrapper}>"]
    for call in conv.calls:
        out.append(f'<｜DSML｜invoke name="{call.name}">')
        for k, v in call.args.items():
            if isinstance(v, str):
                out.append(f'<｜DSML｜parameter name="{k}" string="true">{v}</｜DSML｜parameter>')
            else:
                value = json.dumps(v, ensure_ascii=False)
                out.append(
                    f'<｜DSML｜parameter name="{k}" string="false">{value}</｜DSML｜parameter>'
                )
        out.append("</｜DSML｜invoke>")
    out.append(f"</｜DSML｜{wrapper}>")
    return "\n".join(out)


def _think(conv: Conversation, end: str = "</think>") -> str:
    return conv.reasoning + end if conv.reasoning else end


def render_deepseek_v4(conv: Conversation) -> str:
    # The prompt ends with <think>: the output starts inside the reasoning.
    text = _think(conv) + conv.content
    if conv.calls:
        text += "\n\n" + _dsml("tool_calls", conv)
    return text


def render_deepseek_v32(conv: Conversation) -> str:
    text = _think(conv) + conv.content
    if conv.calls:
        text += "\n\n" + _dsml("function_calls", conv)
    return text


def render_qwen3_coder(conv: Conversation) -> str:
    text = _think(conv) + conv.content
    for call in conv.calls:
        params = "".join(
            f"<parameter={k}>\n{v if isinstance(v, str) else json.dumps(v)}\n</parameter>\n"
            for k, v in call.args.items()
        )
        text += f"<tool_call>\n<function={call.name}>\n{params}</function>\n</tool_call>"
    return text


def render_glm(conv: Conversation) -> str:
    """GLM-4.5 … 5.x: values are written as text (JSON for non-strings), the schema types
    them back."""
    text = _think(conv) + conv.content
    for call in conv.calls:
        params = "".join(
            f"<arg_key>{k}</arg_key>\n<arg_value>"
            f"{v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}</arg_value>\n"
            for k, v in call.args.items()
        )
        text += f"<tool_call>{call.name}\n{params}</tool_call>"
    return text


def render_minimax_m2(conv: Conversation) -> str:
    """MiniMax M2: the template opened `<think>`; values written as text."""
    text = _think(conv) + conv.content
    if conv.calls:
        text += "<minimax:tool_call>\n"
        for call in conv.calls:
            params = "".join(
                f'<parameter name="{k}">'
                f"{v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}</parameter>\n"
                for k, v in call.args.items()
            )
            text += f'<invoke name="{call.name}">\n{params}</invoke>\n'
        text += "</minimax:tool_call>"
    return text


def render_hermes(conv: Conversation) -> str:
    text = _think(conv) + conv.content
    for call in conv.calls:
        body = json.dumps({"name": call.name, "arguments": call.args}, ensure_ascii=False)
        text += f"<tool_call>\n{body}\n</tool_call>"
    return text


def render_kimi_k2(conv: Conversation) -> str:
    text = _think(conv) + conv.content
    if conv.calls:
        text += "<|tool_calls_section_begin|>"
        for i, call in enumerate(conv.calls):
            args = json.dumps(call.args, ensure_ascii=False)
            text += (
                f"<|tool_call_begin|>functions.{call.name}:{i}<|tool_call_argument_begin|>"
                f"{args}<|tool_call_end|>"
            )
        text += "<|tool_calls_section_end|>"
    return text


def render_mistral(conv: Conversation) -> str:
    text = f"[THINK]{conv.reasoning}[/THINK]" if conv.reasoning else ""
    text += conv.content
    for call in conv.calls:
        text += f"[TOOL_CALLS]{call.name}[ARGS]{json.dumps(call.args, ensure_ascii=False)}"
    return text


def render_mistral_pre_v11(conv: Conversation) -> str:
    text = conv.content
    if conv.calls:
        objs = [{"name": c.name, "arguments": c.args} for c in conv.calls]
        text += "[TOOL_CALLS]" + json.dumps(objs, ensure_ascii=False)
    return text


def render_llama3_json(conv: Conversation) -> str:
    objs = [
        json.dumps({"name": c.name, "parameters": c.args}, ensure_ascii=False) for c in conv.calls
    ]
    return conv.content + "; ".join(objs)


def _py(value: Any) -> str:
    return repr(value)


def render_pythonic(conv: Conversation) -> str:
    if not conv.calls:
        return conv.content
    calls = ", ".join(
        f"{c.name}({', '.join(f'{k}={_py(v)}' for k, v in c.args.items())})" for c in conv.calls
    )
    return f"[{calls}]"


def render_kimi_k3(conv: Conversation) -> str:
    """Kimi K3's XTML: the prompt opened the think channel; strings typed `string`, other
    values JSON with their JSON type."""
    o, c, sep = "<|open|>", "<|close|>", "<|sep|>"
    text = conv.reasoning + f"{c}think{sep}"
    if conv.content:
        text += f"{o}response{sep}{conv.content}{c}response{sep}"
    if conv.calls:
        text += f"{o}tools{sep}"
        for i, call in enumerate(conv.calls, 1):
            text += f'{o}call tool="{call.name}" index="{i}"{sep}'
            for k, v in call.args.items():
                kind = "string" if isinstance(v, str) else _json_type(v)
                body = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
                text += f'{o}argument key="{k}" type="{kind}"{sep}{body}{c}argument{sep}'
            text += f"{c}call{sep}"
        text += f"{c}tools{sep}"
    return text + f"{c}message{sep}"


def render_minimax_m3(conv: Conversation) -> str:
    """MiniMax M3: an explicit think block; parameters as namespaced elements, non-strings
    as JSON text (typed back by the schema)."""
    ns = "]<]minimax[>["
    text = f"<mm:think>{conv.reasoning}</mm:think>" if conv.reasoning else ""
    text += conv.content
    if conv.calls:
        text += f"{ns}<tool_call>\n"
        for call in conv.calls:
            params = "".join(
                f"{ns}<{k}>{v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}"
                f"{ns}</{k}>"
                for k, v in call.args.items()
            )
            text += f'{ns}<invoke name="{call.name}">{params}{ns}</invoke>\n'
        text += f"{ns}</tool_call>"
    return text


def render_required(conv: Conversation) -> str:
    """tool_choice "required": the constrained output (reasoning first)."""
    objs = [{"name": c.name, "parameters": c.args} for c in conv.calls]
    return _think(conv) + json.dumps(objs, ensure_ascii=False)


def render_named(conv: Conversation) -> str:
    """A named tool_choice: the output is the arguments object."""
    return _think(conv) + json.dumps(conv.calls[0].args, ensure_ascii=False)


# -- setups ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setup:
    name: str
    reasoning_parser: str | None
    tool_parser: str | None
    tokenizer: str  # "deepseek" (the real one) or a marker tokenizer key below
    render: Callable[[Conversation], str]
    prompt_tail: str = ""  # the end of the rendered prompt (decides the start state)
    # What the format can express (generators respect these).
    reasoning: bool = True
    content_with_calls: bool = True
    many_calls: bool = True
    tool_choice: str | dict[str, Any] | None = None
    markers: tuple[str, ...] = field(default=())  # texts that must never leak
    strict: bool = True  # the model's strict_tool_calling
    kwargs: dict[str, Any] | None = None  # chat_template_kwargs
    strip_values: bool = False  # the format strips string values (Step-3)
    template: dict[str, Any] | None = None  # the checkpoint's response_template (hf, beam)
    # Texts no argument value may hold: a format whose regions end at the first match of
    # their closer's text (hf / beam, as vLLM's response-template parser) cannot carry one
    # inside a value; test_response_template pins what both then say.
    closers: tuple[str, ...] = ()


MARKER_TOKENIZERS: dict[str, Callable[[], Tokenizer]] = {
    "qwen": lambda: marker_tokenizer(added=QWEN_ADDED, special=QWEN_SPECIAL),
    "kimi": lambda: marker_tokenizer(special=KIMI_SPECIAL),
    "mistral": lambda: marker_tokenizer(special=MISTRAL_SPECIAL),
    "mistral_old": lambda: marker_tokenizer(special=MISTRAL_OLD_SPECIAL),
    "llama": lambda: marker_tokenizer(special=LLAMA_SPECIAL),
}

_THINK_MARKERS = ("<think>", "</think>")

SETUPS: dict[str, Setup] = {
    s.name: s
    for s in [
        Setup("deepseek_v4", "deepseek_v4", "deepseek_v4", "deepseek", render_deepseek_v4,
              "<｜Assistant｜><think>", markers=(*_THINK_MARKERS, "｜DSML｜")),
        # vLLM's deepseek_v3 reasoning thinks only when the kwargs ask for it.
        Setup("deepseek_v32", "deepseek_v3", "deepseek_v32", "deepseek", render_deepseek_v32,
              "<｜Assistant｜><think>", markers=(*_THINK_MARKERS, "｜DSML｜"),
              kwargs={"thinking": True}),
        Setup("qwen3_coder", "qwen3", "qwen3_coder", "qwen", render_qwen3_coder,
              "<|im_start|>assistant\n<think>\n",
              markers=(*_THINK_MARKERS, "<tool_call>", "<function=", "<parameter=")),
        Setup("glm47", "glm47", "glm47", "glm", render_glm, "<|assistant|><think>",
              markers=(*_THINK_MARKERS, "<tool_call>", "<arg_key>", "<arg_value>")),
        Setup("minimax_m2", "minimax_m2", "minimax_m2", "minimax", render_minimax_m2,
              "]~b]ai\n<think>\n",
              markers=(*_THINK_MARKERS, "<minimax:tool_call>", "<invoke", "<parameter")),
        Setup("hermes", "qwen3", "hermes", "qwen", render_hermes,
              "<|im_start|>assistant\n<think>\n",
              markers=(*_THINK_MARKERS, "<tool_call>", "</tool_call>")),
        Setup("kimi_k2", "kimi_k2", "kimi_k2", "kimi", render_kimi_k2,
              "<|im_end|>assistant<think>", markers=(*_THINK_MARKERS, "<|tool_call")),
        Setup("mistral", "mistral", "mistral", "mistral", render_mistral,
              markers=("[THINK]", "[/THINK]", "[TOOL_CALLS]", "[ARGS]")),
        Setup("mistral_pre_v11", None, "mistral", "mistral_old", render_mistral_pre_v11,
              reasoning=False, markers=("[TOOL_CALLS]",)),
        Setup("llama3_json", None, "llama3_json", "llama", render_llama3_json,
              reasoning=False, content_with_calls=False, markers=('{"name"',)),
        Setup("pythonic", None, "pythonic", "llama", render_pythonic, reasoning=False,
              content_with_calls=False),
        # Qwen 3.5 / 3.6 (one vocabulary, 248k ids; `<think>` 248068, `<tool_call>` 248058).
        Setup("qwen3_6", "qwen3", "qwen3_coder", "qwen3_6", render_qwen3_coder,
              "<|im_start|>assistant\n<think>\n",
              markers=(*_THINK_MARKERS, "<tool_call>", "<function=", "<parameter=")),
        Setup("nemotron_v3", "nemotron_v3", "qwen3_coder", "qwen", render_qwen3_coder,
              "<|im_start|>assistant\n<think>\n",
              markers=(*_THINK_MARKERS, "<tool_call>", "<function=", "<parameter=")),
        Setup("ling3", "ling3", "ling3", "glm", render_glm, "<|assistant|><think>",
              markers=(*_THINK_MARKERS, "<tool_call>", "<arg_key>", "<arg_value>")),
        Setup("kimi_k3", "kimi_k3", "kimi_k3", "kimi_k3", render_kimi_k3,
              markers=("<|open|>", "<|close|>", "<|sep|>")),
        Setup("minimax_m3", "minimax_m3", "minimax_m3", "minimax_m3", render_minimax_m3,
              markers=("<mm:think>", "</mm:think>", "]<]minimax[>[")),
        # Strict tool calling off: the forced modes' output is bare JSON.
        Setup("required", "deepseek_v4", "deepseek_v4", "deepseek", render_required,
              "<｜Assistant｜><think>", content_with_calls=False, tool_choice="required",
              markers=_THINK_MARKERS, strict=False),
        Setup("named", "deepseek_v4", "deepseek_v4", "deepseek", render_named,
              "<｜Assistant｜><think>", content_with_calls=False, many_calls=False,
              tool_choice={"type": "function", "function": {"name": "get_weather"}},
              markers=_THINK_MARKERS, strict=False),
        # Strict (the default): the forced modes' output is the model's own format.
        Setup("required_strict", "deepseek_v4", "deepseek_v4", "deepseek",
              render_deepseek_v4, "<｜Assistant｜><think>", tool_choice="required",
              markers=(*_THINK_MARKERS, "｜DSML｜")),
        Setup("named_strict", "deepseek_v4", "deepseek_v4", "deepseek", render_deepseek_v4,
              "<｜Assistant｜><think>", many_calls=False,
              tool_choice={"type": "function", "function": {"name": "get_weather"}},
              markers=(*_THINK_MARKERS, "｜DSML｜")),
        # tool_choice "none": the block is parsed and its calls dropped.
        Setup("none", "deepseek_v4", "deepseek_v4", "deepseek", render_deepseek_v4,
              "<｜Assistant｜><think>", tool_choice="none",
              markers=(*_THINK_MARKERS, "｜DSML｜")),
    ]
}  # fmt: skip

# Inkling (samples_blocks.py).
SETUPS.update(block_setups(Setup))
# Cohere Command A (samples_cohere.py).
SETUPS.update(cohere_setups(Setup))
# Granite 3.x, OLMo 3, Step-3, Hunyuan, ERNIE 4.5 (samples_families.py).
SETUPS.update(family_setups(Setup))
# The long tail: Phi-4-mini, InternLM2, Jamba, … (samples_longtail.py).
SETUPS.update(longtail_setups(Setup))


def chat_request(setup: Setup, conv: Conversation) -> dict[str, Any]:
    req: dict[str, Any] = {"tools": tools_for(conv)}
    if setup.tool_choice is not None:
        req["tool_choice"] = setup.tool_choice
    if setup.kwargs is not None:
        req["chat_template_kwargs"] = setup.kwargs
    return req


# The canonical conversation of the golden files: reasoning, a sentence, two calls.
GOLDEN = Conversation(
    reasoning="The user wants the weather in two cities. I will call the tool twice.",
    content="Let me check both cities.",
    calls=(
        Call("get_weather", {"city": "Paris", "days": 3, "metric": True}),
        Call("get_weather", {"city": '東京 "Tokyo"', "days": 1, "metric": False}),
    ),
)


def golden_inputs(setup: Setup, tok: Tokenizer) -> dict[str, Any]:
    """Prompt ids, output ids and the chat request for the canonical conversation."""
    conv = GOLDEN
    if not setup.reasoning:
        conv = Conversation("", conv.content, conv.calls)
    if not setup.content_with_calls:
        conv = Conversation(conv.reasoning, "", conv.calls)
    if not setup.many_calls:
        conv = Conversation(conv.reasoning, conv.content, conv.calls[:1])
    return {
        "prompt_token_ids": tok.encode(setup.prompt_tail, add_special_tokens=False).ids,
        "token_ids": tok.encode(setup.render(conv), add_special_tokens=False).ids,
        "chat_request": chat_request(setup, conv),
        "conversation": conv,
    }


def decoy_tools(n: int) -> list[dict[str, Any]]:
    """Tools the model never calls, 4 typed parameters each (~400 bytes of JSON: an MCP
    server's worth): the large requests of tests/core/test_tables.py and bench/."""
    types = ["string", "integer", "boolean", "number"]
    return [
        {
            "type": "function",
            "function": {
                "name": f"mcp_server_tool_{i}",
                "description": "Looks something up in a system the answer does not need.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        f"param_{j}": {"type": types[j], "description": f"parameter {j}"}
                        for j in range(4)
                    },
                    "required": ["param_0"],
                },
            },
        }
        for i in range(n)
    ]
