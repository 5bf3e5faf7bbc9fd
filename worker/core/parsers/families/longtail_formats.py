"""The long tail of vLLM 0.33's tool parsers (in vllm/tool_parsers/) whose calls are
JSON call lists (call_list.py reads the objects) or Python call lists (pythonic.py), as
entries of the one engine's table:
Phi-4-mini's `functools[…]`, InternLM2's `<|action_start|><|plugin|>{…}<|action_end|>`,
Jamba's `<tool_calls>[…]</tool_calls>`, GigaChat3's `function call<|role_sep|>\n{…}`, Apertus'
`<|tools_prefix|>[{"NAME": {…}}]<|tools_suffix|>`, LFM2's
`<|tool_call_start|>[f(a=1)]<|tool_call_end|>`.

None of them has a structural tag in vLLM 0.33, so `tool_choice` "required" / named
output is the bare JSON of constrained decoding (FORCED_JSON).
"""

from __future__ import annotations

from dataclasses import replace

from worker.core.parsers.families.markup_formats import MINIMAX_M2
from worker.core.parsers.language.grammar import (
    ARGS,
    BETWEEN,
    CALL_END,
    CALL_START,
    CONTENT,
    FORCED_JSON,
    FORCED_NATIVE,
    HEADER,
    NAME,
    PREAMBLE,
    SHAPE_ARRAY,
    SHAPE_SINGLE,
    CallShape,
    ReasoningFormat,
    ToolFormat,
    Transition,
)
from worker.core.parsers.language.markers import MINIMAX_TOOL_CALL
from worker.core.parsers.language.state import CallJson, CallList, CallPythonic

# Both spellings of a call's arguments key, as vLLM's parsers read them.
ARG_KEYS = ("arguments", "parameters")

# Phi-4-mini: the plain text `functools[` opens a JSON array of calls (vLLM's regex
# `functools\[(.*?)\]`); the marker's text goes to the scanner, which skips to the `[`.
# There is no closer: the array's `]` ends the block, and what follows is not content.
PHI4_MINI_JSON = ToolFormat(
    "phi4_mini_json",
    {(CONTENT, "functools["): Transition(ARGS, CALL_START, keep=True)},
    CallList,
    calls=CallShape(SHAPE_ARRAY, ARG_KEYS),
    forced=FORCED_JSON,
)

# InternLM2: one call object after `<|action_start|><|plugin|>` (special tokens in
# InternLM2's vocabulary), up to `<|action_end|>`. vLLM's parser reads the text (special
# tokens kept once tools are on), so the markers are matched on text, spelled in ordinary
# tokens too; another action (`<|action_start|><|interpreter|>`, code to run) is no call
# and stays text, as in vLLM.
_PLUGIN_CALL, _ACTION_END = "<|action_start|><|plugin|>", "<|action_end|>"
INTERNLM = ToolFormat(
    "internlm",
    {
        (CONTENT, _PLUGIN_CALL): Transition(ARGS, CALL_START),
        (ARGS, _ACTION_END): Transition(BETWEEN, CALL_END),
    },
    CallList,
    calls=CallShape(SHAPE_SINGLE, ARG_KEYS),
    forced=FORCED_JSON,
    text_markers=(_PLUGIN_CALL, _ACTION_END, "<|action_start|>", "<|plugin|>", "<|interpreter|>"),
)

# Jamba 1.5: a JSON array of call objects between `<tool_calls>` and `</tool_calls>` (added
# tokens of its vocabulary; vLLM finds them in the text, so do we). vLLM reads only the
# `arguments` key (a `parameters` object fails its whole call list); we read both.
JAMBA = ToolFormat(
    "jamba",
    {
        (CONTENT, "<tool_calls>"): Transition(ARGS, CALL_START),
        (ARGS, "</tool_calls>"): Transition(BETWEEN, CALL_END),
    },
    CallList,
    calls=CallShape(SHAPE_ARRAY, ARG_KEYS),
    forced=FORCED_JSON,
    text_markers=("<tool_calls>", "</tool_calls>"),
)

# GigaChat3: a call is a message from `function call` (`function call<|role_sep|>\n{json}`,
# after the answer's `<|message_sep|>\n\n` when there is one) or follows `<|function_call|>`;
# one `{"name", "arguments"}` object, no closer. vLLM's parser reads the text (special tokens
# kept once tools are on), so the markers are matched on text. A `<|message_sep|>` that
# opens no call stays in the content, as in vLLM's answer.
_MSG, _FC, _FCT = "<|message_sep|>", "function call<|role_sep|>\n", "<|function_call|>"
_GIGA_CALLS = (_MSG + "\n\n" + _FC, _FC, _FCT)
GIGACHAT3 = ToolFormat(
    "gigachat3",
    {
        **{(CONTENT, m): Transition(ARGS, CALL_START) for m in _GIGA_CALLS},
        # Another call message after the first (vLLM reads none of them then).
        **{(ARGS, m): Transition(ARGS, CALL_END | CALL_START) for m in _GIGA_CALLS},
        (ARGS, _MSG): Transition(BETWEEN, CALL_END),
        **{(BETWEEN, m): Transition(ARGS, CALL_START) for m in _GIGA_CALLS},
    },
    CallList,
    calls=CallShape(SHAPE_SINGLE, ("arguments",)),
    forced=FORCED_JSON,
    text_markers=(*_GIGA_CALLS, _MSG, "<|role_sep|>"),
)

# Apertus: `<|tools_prefix|>[{"NAME": {args}}, …]<|tools_suffix|>` (special tokens; vLLM
# matches them on text, holding back a partial one). Each object's key is the function's
# name. vLLM keeps the text after the block as content (joined to the text before).
_TOOLS_PREFIX, _TOOLS_SUFFIX = "<|tools_prefix|>", "<|tools_suffix|>"
APERTUS = ToolFormat(
    "apertus",
    {
        (CONTENT, _TOOLS_PREFIX): Transition(ARGS, CALL_START),
        (ARGS, _TOOLS_SUFFIX): Transition(CONTENT, CALL_END),
    },
    CallList,
    calls=CallShape(SHAPE_ARRAY, keyed=True),
    forced=FORCED_JSON,
    text_markers=(_TOOLS_PREFIX, _TOOLS_SUFFIX),
)

# LiquidAI LFM2 / LFM2.5: a Python list of calls, `<|tool_call_start|>[f(a=1)]<|tool_call_end|>`
# (pythonic.py reads it); the text after the block is content again, as in vLLM. vLLM finds
# the markers in the text (special tokens kept once tools are on).
_LFM2_START, _LFM2_END = "<|tool_call_start|>", "<|tool_call_end|>"
LFM2 = ToolFormat(
    "lfm2",
    {
        (CONTENT, _LFM2_START): Transition(ARGS, CALL_START),
        (ARGS, _LFM2_END): Transition(CONTENT, CALL_END),
        # An orphan end (LFM2 sometimes echoes the call after the block) is markup.
        (CONTENT, _LFM2_END): Transition(CONTENT),
    },
    CallPythonic,
    forced=FORCED_JSON,
    text_markers=(_LFM2_START, _LFM2_END),
)

# PLaMo 3 (vLLM's plamo3 engine config): reasoning from the start (the template opens
# `<|plamo:begin_think:plamo|>`) up to `<|plamo:end_think:plamo|>`, unless
# `enable_thinking` is false, and then the think markers are text; a tool block also ends
# it. Calls: `begin_tool_requests`, per call `begin_tool_request`, the name between
# `begin_tool_name` / `end_tool_name`, JSON arguments after
# `begin_tool_arguments<|plamo:constrain|>json<|plamo:msg|>` up to `end_tool_arguments`.
# vLLM matches the think markers by id and the tool markers on text (other special tokens,
# `<|plamo:msg|>` among them, it drops from the text).
_P = "<|plamo:{}:plamo|>"
_P_REQS, _P_REQS_END = _P.format("begin_tool_requests"), _P.format("end_tool_requests")
_P_REQ, _P_REQ_END = _P.format("begin_tool_request"), _P.format("end_tool_request")
_P_NAME, _P_NAME_END = _P.format("begin_tool_name"), _P.format("end_tool_name")
_P_ARGS = _P.format("begin_tool_arguments")
_P_ARGS_END = _P.format("end_tool_arguments")
PLAMO3 = ToolFormat(
    "plamo3",
    {
        (CONTENT, _P_REQS): Transition(PREAMBLE),
        (PREAMBLE, _P_REQ): Transition(PREAMBLE),
        (PREAMBLE, _P_NAME): Transition(NAME, CALL_START),
        (NAME, _P_NAME_END): Transition(PREAMBLE),
        # `<|plamo:constrain|>json` between them is dropped (a special token, a header).
        (PREAMBLE, _P_ARGS): Transition(HEADER),
        (HEADER, "<|plamo:msg|>"): Transition(ARGS),
        (ARGS, _P_ARGS_END): Transition(BETWEEN),
        (BETWEEN, _P_REQ_END): Transition(PREAMBLE, CALL_END),
        (PREAMBLE, _P_REQS_END): Transition(CONTENT),
    },
    CallJson,
    forced=FORCED_NATIVE,  # vLLM: supports_required_and_named = False
    text_markers=(
        _P_REQS,
        _P_REQS_END,
        _P_REQ,
        _P_REQ_END,
        _P_NAME,
        _P_NAME_END,
        _P_ARGS,
        _P_ARGS_END,
    ),
)
PLAMO3_REASONING = ReasoningFormat(
    "plamo3",
    _P.format("begin_think"),
    _P.format("end_think"),
    thinking_default=True,
    kwargs_keys=("enable_thinking",),
    implicit_end=(_P_REQS,),
    off_is_plain=True,
    strip_trailing=False,
)

# rednote dots.llm1: MiniMax M2's invoke / parameter elements in `<dots_function_call>` blocks
# (vLLM's dots parser reads the same elements with regexes over the text: its wrappers are
# matched on text); calls to functions the request does not offer are dropped, values
# stripped and typed by the schema. The JSON object vLLM also accepts in a block is not
# read (differences.md dots-json-block).
_DOTS_RENAME = {
    MINIMAX_TOOL_CALL: "<dots_function_call>",
    "</minimax:tool_call>": "</dots_function_call>",
}
DOTS = replace(
    MINIMAX_M2,
    name="dots",
    transitions={(s, _DOTS_RENAME.get(m, m)): t for (s, m), t in MINIMAX_M2.transitions.items()},
    forced=FORCED_NATIVE,  # vLLM: supports_required_and_named = False
    text_markers=tuple(_DOTS_RENAME.values()),
    strip_values=True,  # vLLM strips every value
)

# Salesforce xLAM: the answer is a JSON array of `{"name", "arguments"}` objects when it opens
# with `[` (sniffed; an array that is no call list is content again), or the array in one of
# the blocks vLLM's parser also looks for: Qwen's `<tool_call>` … `</tool_call>` (added,
# non-special tokens: matched on text, as vLLM reads them), a fenced json block, after
# `[TOOL_CALLS]`, or right after `</think>` (its think block is content: xlam has no
# reasoning parser). vLLM reads only the `arguments` key; we read `parameters` too
# (docs/reference/differences.md, xlam-parameters).
XLAM = ToolFormat(
    "xlam",
    {
        (CONTENT, "<tool_call>"): Transition(ARGS, CALL_START),
        (ARGS, "</tool_call>"): Transition(CONTENT, CALL_END),
        (CONTENT, "```json"): Transition(ARGS, CALL_START),
        (ARGS, "```"): Transition(CONTENT, CALL_END),
        (CONTENT, "[TOOL_CALLS]"): Transition(ARGS, CALL_START),
        (CONTENT, "</think>["): Transition(ARGS, CALL_START, keep=True),
    },
    CallList,
    sniff="[",
    calls=CallShape(SHAPE_ARRAY, ARG_KEYS),
    fallback=True,
    forced=FORCED_JSON,
    text_markers=("<tool_call>", "</tool_call>"),
)

LONGTAIL_REASONING_FORMATS: dict[str, ReasoningFormat] = {"plamo3": PLAMO3_REASONING}

LONGTAIL_TOOL_FORMATS: dict[str, ToolFormat] = {
    "phi4_mini_json": PHI4_MINI_JSON,
    "internlm": INTERNLM,
    "jamba": JAMBA,
    "gigachat3": GIGACHAT3,
    "apertus": APERTUS,
    "lfm2": LFM2,
    "plamo3": PLAMO3,
    "dots": DOTS,
    "xlam": XLAM,
}
