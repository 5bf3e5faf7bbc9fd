"""IBM Granite 3.x, OLMo 3, StepFun Step-3, Tencent Hunyuan and Baidu ERNIE 4.5
(vllm-parsers-0.33.md rows 12, 13, 15, 17, 18) as entries of the one engine's tables.

formats.py adds `FAMILY_REASONING_FORMATS` and `FAMILY_TOOL_FORMATS` to the registry.
"""

from __future__ import annotations

from worker.core.parsers.grammar import (
    ARGS,
    CALL_END,
    CALL_START,
    CONTENT,
    FORCED_JSON,
    SHAPE_ARRAY,
    SHAPE_SINGLE,
    CallShape,
    ReasoningFormat,
    ToolFormat,
    Transition,
)
from worker.core.parsers.state import CallList, CallPythonic

# -- IBM Granite 3.x (row 12) --------------------------------------------------------------

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

# -- OLMo 3 (row 13) -----------------------------------------------------------------------

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

FAMILY_REASONING_FORMATS: dict[str, ReasoningFormat] = {
    "granite": GRANITE_REASONING,
    "olmo3": OLMO3_REASONING,
}
FAMILY_TOOL_FORMATS: dict[str, ToolFormat] = {
    "granite": GRANITE_TOOLS,
    "granite-20b-fc": GRANITE_20B_FC,
    "olmo3": OLMO3_TOOLS,
}
