"""IBM Granite 3.x, OLMo 3, StepFun Step-3, Tencent Hunyuan and Baidu ERNIE 4.5
(vLLM 0.33.0's `granite`, `olmo3`, `step3`, `hunyuan_a13b`, `hy_v3`, `hy_v4`, `ernie45`
parsers in vllm/reasoning/ and vllm/tool_parsers/) as entries of the one engine's tables.

formats.py adds `FAMILY_REASONING_FORMATS` and `FAMILY_TOOL_FORMATS` to the registry.
"""

from __future__ import annotations

import re
from dataclasses import replace

from worker.core.parsers.language.grammar import (
    ARGS,
    BETWEEN,
    CALL_END,
    CALL_START,
    CONTENT,
    DROP,
    DROP_WS,
    FORCED_JSON,
    FORCED_STRICT,
    HEADER,
    NAME,
    NAME_END,
    PARAM_END,
    PARAM_START,
    PKEY,
    PREAMBLE,
    PVALUE,
    SHAPE_ARRAY,
    SHAPE_SINGLE,
    VALUE_START,
    CallShape,
    ReasoningFormat,
    Table,
    ToolFormat,
    Transition,
)
from worker.core.parsers.language.state import CallList, CallParams, CallPythonic

# -- IBM Granite 3.x (vllm/parser/granite.py, granite_reasoning_parser.py) -----------------

# Granite 3.2 separates its answer with plain-text phrases, no tokens. vLLM's parser
# finds the first "Here is my thought process:" (or "Here's …") and the first "Here is my
# response:" after it; the text between is reasoning, as written (nothing stripped).
# Thinking is the template's business (`thinking: true` asks for the phrases), not the
# parser's: the output starts as content.
GRANITE_REASONING = ReasoningFormat(
    "granite",
    "Here is my thought process:",
    "Here is my response:",
    thinking_default=False,
    from_prompt=False,
    from_kwargs=False,
    strip_trailing=False,
    once=True,
    opens_once=True,
    spellings=(("Here's my thought process:", "Here's my response:"),),
)

# Granite 3.0 `<|tool_call|>` (a special token) / 3.1 `<tool_call>` (text), then a JSON
# array of `{"name", "arguments"}`; the array's `]` ends it (no closer) and what follows
# is not content, as vLLM's granite engine config reads it. A second marker opens another
# array. vLLM has no structural tag for it: "required" / named output is bare JSON.
_G30, _G31 = "<|tool_call|>", "<tool_call>"
GRANITE_TOOLS = ToolFormat(
    "granite",
    {
        (CONTENT, _G30): Transition(ARGS, CALL_START),
        (CONTENT, _G31): Transition(ARGS, CALL_START),
        (ARGS, _G30): Transition(ARGS, CALL_END | CALL_START),
        (ARGS, _G31): Transition(ARGS, CALL_END | CALL_START),
    },
    CallList,
    calls=CallShape(SHAPE_ARRAY),
    fallback=True,
    forced=FORCED_JSON,
    text_markers=(_G31,),  # vLLM matches only 3.0's marker by token id
)

# granite-20b-functioncalling: `<function_call>` (text) and one `{"name", "arguments"}`
# object, repeated; what follows an object up to the next marker is not content (vLLM
# decodes one JSON value per marker and ignores the rest).
_FC = "<function_call>"
GRANITE_20B_FC = ToolFormat(
    "granite-20b-fc",
    {
        (CONTENT, _FC): Transition(ARGS, CALL_START),
        (ARGS, _FC): Transition(ARGS, CALL_END | CALL_START),
    },
    CallList,
    calls=CallShape(SHAPE_SINGLE),
    forced=FORCED_JSON,
)

# -- OLMo 3 (olmo3_reasoning_parser.py, olmo3_tool_parser.py) ------------------------------

# `<think>` and `</think>` are ordinary text for OLMo 3 (matched on text). The template may
# write the first `<think>` itself, so the output starts in reasoning (vLLM's streaming
# parser does too); the first `</think>` ends it for good: later tags are the answer's
# text, as vLLM's regex reads them. A call block inside reasoning ends it.
_FN_CALLS, _FN_CALLS_END = "<function_calls>", "</function_calls>"
OLMO3_REASONING = ReasoningFormat(
    "olmo3",
    "<think>",
    "</think>",
    thinking_default=True,
    from_kwargs=False,
    strip_trailing=False,
    once=True,
    text_match=True,
    implicit_end=(_FN_CALLS,),
)

# Pythonic calls, one per line (or comma-separated), inside `<function_calls>`; JSON's
# `true` / `false` / `null` are values too (convert.python_literal). No structural tag in
# vLLM: "required" / named output is bare JSON.
OLMO3_TOOLS = ToolFormat(
    "olmo3",
    {
        (CONTENT, _FN_CALLS): Transition(ARGS, CALL_START),
        (ARGS, _FN_CALLS_END): Transition(CONTENT, CALL_END),
    },
    CallPythonic,
    forced=FORCED_JSON,
    bare_list=True,
)

# -- StepFun Step-3 (step3_reasoning_parser.py, step3_tool_parser.py) ----------------------

# Step-3 writes only `</think>`: everything before the first one is reasoning, as written
# (a `<think>` the model writes stays in it), everything after it content. No switch.
STEP3_REASONING = ReasoningFormat(
    "step3",
    "</think>",  # (no start marker: the table's start entry is the end's, overwritten)
    "</think>",
    thinking_default=True,
    from_prompt=False,
    from_kwargs=False,
    strip_trailing=False,
    empty_as_text=True,
    once=True,
)

# `<｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke
# name="f"><steptml:parameter name="k">v</steptml:parameter></steptml:invoke>
# <｜tool_call_end｜><｜tool_calls_end｜>`; the call type before the separator is dropped,
# values are stripped and typed by the schema; text after the block is content.
_S_CALLS, _S_CALLS_END = "<｜tool_calls_begin｜>", "<｜tool_calls_end｜>"
_S_CALL, _S_CALL_END, _S_SEP = "<｜tool_call_begin｜>", "<｜tool_call_end｜>", "<｜tool_sep｜>"
_S_INVOKE, _S_INVOKE_END = '<steptml:invoke name="', "</steptml:invoke>"
_S_PARAM, _S_PARAM_END = '<steptml:parameter name="', "</steptml:parameter>"
STEP3_TOOLS = ToolFormat(
    "step3",
    {
        (CONTENT, _S_CALLS): Transition(PREAMBLE),
        (PREAMBLE, _S_CALL): Transition(HEADER, CALL_START),
        (HEADER, _S_SEP): Transition(HEADER),
        (HEADER, _S_INVOKE): Transition(NAME),
        (NAME, '">'): Transition(ARGS),
        (ARGS, _S_PARAM): Transition(PKEY, PARAM_START),
        (PKEY, '">'): Transition(PVALUE, VALUE_START),
        (PVALUE, _S_PARAM_END): Transition(ARGS, PARAM_END),
        (ARGS, _S_INVOKE_END): Transition(ARGS),
        (ARGS, _S_CALL_END): Transition(PREAMBLE, CALL_END),
        (PVALUE, _S_CALL_END): Transition(PREAMBLE, PARAM_END | CALL_END),
        (NAME, _S_CALL_END): Transition(PREAMBLE, CALL_END),
        (HEADER, _S_CALL_END): Transition(PREAMBLE, CALL_END),
        (PREAMBLE, _S_CALLS_END): Transition(CONTENT),
        (ARGS, _S_CALLS_END): Transition(CONTENT, CALL_END),
        (PVALUE, _S_CALLS_END): Transition(CONTENT, PARAM_END | CALL_END),
    },
    CallParams,
    schema=True,
    strip_values=True,
    forced=FORCED_JSON,
)

# -- Baidu ERNIE 4.5 (ernie45_reasoning_parser.py, ernie45_tool_parser.py) -----------------

# Reasoning until the first `</think>` (a `<think>` the model writes is dropped), as
# vLLM's think-tag base class. No switch.
ERNIE45_REASONING = ReasoningFormat(
    "ernie45",
    "<think>",
    "</think>",
    thinking_default=True,
    from_prompt=False,
    from_kwargs=False,
    strip_trailing=False,
    empty_as_text=True,
    once=True,
)

# `<tool_call>{"name", "arguments"}</tool_call>` (hermes); text after the calls is not
# content. The answer may be wrapped in `<response>` … `</response>`: vLLM's content is
# then what the wrapper holds, so the newlines held before `<response>` are dropped with
# it and what follows `</response>` is not content.
_E_CALL, _E_CALL_END = "<tool_call>", "</tool_call>"
ERNIE45_TOOLS = ToolFormat(
    "ernie45",
    {
        (CONTENT, _E_CALL): Transition(ARGS, CALL_START),
        (ARGS, _E_CALL_END): Transition(BETWEEN, CALL_END),
        (BETWEEN, _E_CALL): Transition(ARGS, CALL_START),
        (CONTENT, "<response>"): Transition(CONTENT, DROP_WS),
        (CONTENT, "</response>"): Transition(DROP),
    },
    CallList,
    calls=CallShape(SHAPE_SINGLE),
    forced=FORCED_JSON,
)

# -- Tencent Hunyuan A13B (hunyuan_a13b_reasoning_parser.py, …_tool_parser.py) -------------

# `<think>\n…\n</think>\n<answer>\n…\n</answer>`, all text. The reasoning block is the one
# opened from content (vLLM's regex reads the first); the answer ends at `\n</answer>`,
# after which nothing is content (the tool table drops it).
HUNYUAN_A13B_REASONING = ReasoningFormat(
    "hunyuan_a13b",
    "<think>\n",
    "\n</think>\n<answer>\n",
    thinking_default=False,
    from_prompt=False,
    from_kwargs=False,
    strip_trailing=False,
    once=True,
    opens_once=True,
    text_match=True,
)

# `<tool_calls>[{"name", "arguments"}, …]</tool_calls>` (text): an object without both
# keys is no call; text after the block is not content.
HUNYUAN_A13B_TOOLS = ToolFormat(
    "hunyuan_a13b",
    {
        (CONTENT, "<tool_calls>"): Transition(ARGS, CALL_START),
        (ARGS, "</tool_calls>"): Transition(BETWEEN, CALL_END),
        (CONTENT, "\n</answer>"): Transition(DROP),
    },
    CallList,
    calls=CallShape(SHAPE_ARRAY, need_args_key=True),
    forced=FORCED_JSON,
)

# -- Tencent HY3 / HY4 (hy_v3_* and hy_v4_* parsers) ---------------------------------------

# Think tags (special tokens), reasoning until the first `</think>` (a `<think>` the model
# writes is dropped), as vLLM's think-tag base class; `reasoning_effort: "no_think"`
# means no reasoning parsing at all (vLLM's identity parser), any other effort thinking.
# Unset, HY3 does not think and HY4 does (its template defaults to "high").
HY_V3_REASONING = ReasoningFormat(
    "hy_v3",
    "<think>",
    "</think>",
    thinking_default=False,
    from_prompt=False,
    strip_trailing=False,
    empty_as_text=True,
    once=True,
    off_is_plain=True,
    effort_off="no_think",
)
HY_V4_REASONING = replace(HY_V3_REASONING, name="hy_v4", thinking_default=True)


def _hy_tools(name: str, sep: bool, forced: int, suffix: str = "") -> ToolFormat:
    """`<tool_calls><tool_call>NAME<tool_sep><arg_key>K</arg_key><arg_value>V</arg_value>…
    </tool_call></tool_calls>` (HY4 writes no `<tool_sep>`: the name ends at the first key);
    values typed by the schema (strings raw); what follows the block is not content. Every
    tag may carry the checkpoint's suffix (`<tool_call:6124c78e>`)."""

    def tag(t: str) -> str:
        return f"<{t}{suffix}>"

    call, call_end, key, key_end = (
        tag("tool_call"),
        tag("/tool_call"),
        tag("arg_key"),
        tag("/arg_key"),
    )
    value, value_end = tag("arg_value"), tag("/arg_value")
    t: Table = {
        (CONTENT, tag("tool_calls")): Transition(PREAMBLE),
        (PREAMBLE, call): Transition(NAME, CALL_START),
        (NAME, call_end): Transition(PREAMBLE, NAME_END | CALL_END),
        (PKEY, key_end): Transition(ARGS),  # the key waits in the call for its value
        (ARGS, key): Transition(PKEY, PARAM_START),
        (ARGS, value): Transition(PVALUE, VALUE_START),
        (PVALUE, value_end): Transition(ARGS, PARAM_END),
        (ARGS, call_end): Transition(PREAMBLE, CALL_END),
        (PVALUE, call_end): Transition(PREAMBLE, PARAM_END | CALL_END),
        (PREAMBLE, tag("/tool_calls")): Transition(DROP),
        (ARGS, tag("/tool_calls")): Transition(DROP, CALL_END),
    }
    if sep:
        t[(NAME, tag("tool_sep"))] = Transition(ARGS)
    else:
        t[(NAME, key)] = Transition(PKEY, PARAM_START)
    return ToolFormat(name, t, CallParams, schema=True, forced=forced)


# HY3 has no structural tag in vLLM ("required" / named output is bare JSON); HY4 has one:
# with strict tool calling that output is HY4's own markup.
HY_V3_TOOLS = _hy_tools("hy_v3", True, FORCED_JSON)
HY_V4_TOOLS = _hy_tools("hy_v4", False, FORCED_STRICT)
# A checkpoint's tags may all end in one suffix, `:` and hex digits (`<think:6124c78e>`,
# vLLM reads it from the tokenizer): found among the added tokens (`token_suffix`).
_HY_SUFFIX = re.compile(r"<tool_calls(:[0-9A-Za-z]+)>")


def token_suffix(
    reasoning: ReasoningFormat | None, tools: ToolFormat | None, added: set[str]
) -> tuple[ReasoningFormat | None, ToolFormat | None]:
    """HY3 / HY4 for a tokenizer whose HY tags carry a suffix: the same formats with the
    suffixed tags (any other format, or none found, as given)."""
    if not any(f is not None and f.name in ("hy_v3", "hy_v4") for f in (reasoning, tools)):
        return reasoning, tools
    found = sorted(m.group(1) for m in map(_HY_SUFFIX.fullmatch, added) if m)
    if not found:
        return reasoning, tools
    suffix = found[0]
    if reasoning is not None and reasoning.name in ("hy_v3", "hy_v4"):
        reasoning = replace(reasoning, start=f"<think{suffix}>", end=f"</think{suffix}>")
    if tools is not None and tools.name in ("hy_v3", "hy_v4"):
        sep = tools.name == "hy_v3"
        tools = _hy_tools(tools.name, sep, tools.forced, suffix)
    return reasoning, tools


FAMILY_REASONING_FORMATS: dict[str, ReasoningFormat] = {
    "granite": GRANITE_REASONING,
    "olmo3": OLMO3_REASONING,
    "step3": STEP3_REASONING,
    "ernie45": ERNIE45_REASONING,
    "hunyuan_a13b": HUNYUAN_A13B_REASONING,
    "hy_v3": HY_V3_REASONING,
    "hy_v4": HY_V4_REASONING,
}
FAMILY_TOOL_FORMATS: dict[str, ToolFormat] = {
    "granite": GRANITE_TOOLS,
    "granite-20b-fc": GRANITE_20B_FC,
    "olmo3": OLMO3_TOOLS,
    "step3": STEP3_TOOLS,
    "ernie45": ERNIE45_TOOLS,
    "hunyuan_a13b": HUNYUAN_A13B_TOOLS,
    "hy_v3": HY_V3_TOOLS,
    "hy_v4": HY_V4_TOOLS,
}
