"""Typed-block formats (vLLM 0.33.0 vllm/parser/inkling.py, the k2_horizon parsers):
Thinking Machines Inkling and MBZUAI K2 Horizon's `<ifm|…>` markup.

Inkling's output is a sequence of blocks, every marker a special token:
`<|message_model|>` opens a message header, a block kind ends it — `<|content_thinking|>`
(reasoning), `<|content_text|>` (content), `<|content_invoke_tool_json|>` (a call:
`{"name": …, "args": {…}}`), `<|content_invoke_tool_text|>` / `<|content_tool_error|>`
(shown as content) — and `<|end_message|>` or `<|content_model_end_sampling|>` ends the
block. Blocks come in any order and repeat. A header's text (an optional function name)
is not content, unless no block kind follows it: then vLLM gives it as content (HEAD_FLUSH,
and at the output's end).

The grammar is vLLM's `inkling_config()` (vllm/parser/inkling.py) as one table. Its
reasoning format has no start / end pair of its own: `start` and `end` name the block
kinds the prompt scan reads (the prompt's last thinking block → reasoning, text block →
content; a model header or nothing → the header state).
"""

from __future__ import annotations

from dataclasses import dataclass

from worker.core.parsers.families.muse import MUSE_REASONING_FORMATS, MUSE_TOOL_FORMATS
from worker.core.parsers.language.grammar import (
    ARGS,
    CALL_END,
    CALL_START,
    CONTENT,
    FORCED_NATIVE,
    HEAD_FLUSH,
    HEADER,
    NAME,
    NAME_END,
    PARAM_END,
    PARAM_START,
    PKEY,
    PREAMBLE,
    PVALUE,
    REASONING,
    SHAPE_SINGLE,
    VALUE_START,
    CallShape,
    ReasoningFormat,
    Table,
    ToolFormat,
    Transition,
)
from worker.core.parsers.language.state import CallList, CallParams

MESSAGE_MODEL = "<|message_model|>"
CONTENT_TEXT = "<|content_text|>"
CONTENT_THINKING = "<|content_thinking|>"
INVOKE_JSON = "<|content_invoke_tool_json|>"
INVOKE_TEXT = "<|content_invoke_tool_text|>"
TOOL_ERROR = "<|content_tool_error|>"
END_SAMPLING = "<|content_model_end_sampling|>"
END_MESSAGE = "<|end_message|>"
ENDS = (END_MESSAGE, END_SAMPLING)


@dataclass(frozen=True)
class BlockFormat(ReasoningFormat):
    """A reasoning format given as its whole table (`blocks`), not built from a marker
    pair."""

    blocks: tuple[tuple[tuple[int, str], Transition], ...] = ()

    def table(self) -> Table:
        return dict(self.blocks)


def _inkling_blocks() -> Table:
    t: Table = {}
    for state in (CONTENT, HEADER):
        t[(state, MESSAGE_MODEL)] = Transition(HEADER)
        t[(state, CONTENT_THINKING)] = Transition(REASONING)
        # Text-like blocks; a call block too when no tool parser reads it.
        for kind in (CONTENT_TEXT, INVOKE_TEXT, TOOL_ERROR, INVOKE_JSON):
            t[(state, kind)] = Transition(CONTENT)
    for end in ENDS:
        t[(CONTENT, end)] = Transition(CONTENT)
        t[(REASONING, end)] = Transition(CONTENT)
        # A header no block kind followed: its text is content after all.
        t[(HEADER, end)] = Transition(CONTENT, HEAD_FLUSH)
    t[(REASONING, CONTENT_THINKING)] = Transition(REASONING)
    # A thinking block left open: the next header or block kind ends it (vLLM has no
    # such rule and shows these markers as reasoning text; a special token is never text).
    t[(REASONING, MESSAGE_MODEL)] = Transition(HEADER)
    for kind in (CONTENT_TEXT, INVOKE_TEXT, TOOL_ERROR, INVOKE_JSON):
        t[(REASONING, kind)] = Transition(CONTENT)
    return t


INKLING_REASONING = BlockFormat(
    "inkling",
    CONTENT_THINKING,
    CONTENT_TEXT,
    thinking_default=False,
    initial=HEADER,
    from_kwargs=False,
    blocks=tuple(_inkling_blocks().items()),
)


def _inkling_tools() -> ToolFormat:
    t: Table = {}
    for state in (CONTENT, HEADER, REASONING):
        t[(state, INVOKE_JSON)] = Transition(ARGS, CALL_START)
    for end in ENDS:
        t[(ARGS, end)] = Transition(CONTENT, CALL_END)
    return ToolFormat(
        "inkling",
        t,
        CallList,
        # Only `args` holds the arguments (vLLM carves that member out of the object).
        calls=CallShape(SHAPE_SINGLE, ("args",)),
        # vLLM's Inkling parser has no structural tag: required / named choices are
        # read as the model writes them.
        forced=FORCED_NATIVE,
    )


# -- K2 Horizon (vLLM's vllm/reasoning/k2_horizon_reasoning_parser.py, its tool parser) ----
# vLLM's K2 Horizon parsers: DeepSeek R1's reasoning (the output starts inside it; after
# its end everything is content, markers included) whose end marker is the pair that
# `chat_template_kwargs.reasoning_effort` picks — all three pairs are read here — and
# which a tool-call group also ends; calls are GLM-like elements in that group:
# `<ifm|tool_calls><ifm|tool_call>NAME<ifm|arg_key>K</ifm|arg_key>[<ifm|arg_type>T
# </ifm|arg_type>]<ifm|arg_value>V</ifm|arg_value>…</ifm|tool_call>…</ifm|tool_calls>`.
IFM_GROUP, IFM_GROUP_END = "<ifm|tool_calls>", "</ifm|tool_calls>"
_IFM_THINK = (
    ("<ifm|think>", "</ifm|think>"),
    ("<ifm|think_fast>", "</ifm|think_fast>"),
    ("<ifm|think_faster>", "</ifm|think_faster>"),
)


def _k2_horizon_reasoning() -> BlockFormat:
    t: Table = {}
    for start, end in _IFM_THINK:
        t[(REASONING, start)] = Transition(REASONING)  # a generated opener is no text
        t[(REASONING, end)] = Transition(CONTENT)
    # The group ends reasoning and opens (its markup, with no tool parser, is content).
    t[(REASONING, IFM_GROUP)] = Transition(CONTENT, keep=True)
    return BlockFormat(
        "k2_horizon",
        _IFM_THINK[0][0],
        _IFM_THINK[0][1],
        thinking_default=True,
        from_kwargs=False,
        strip_trailing=False,
        empty_as_text=True,
        once=True,
        implicit_end=(IFM_GROUP,),
        blocks=tuple(t.items()),
    )


def _k2_horizon_tools() -> ToolFormat:
    call, call_end = "<ifm|tool_call>", "</ifm|tool_call>"
    key, key_end = "<ifm|arg_key>", "</ifm|arg_key>"
    typ, typ_end = "<ifm|arg_type>", "</ifm|arg_type>"
    value, value_end = "<ifm|arg_value>", "</ifm|arg_value>"
    t: Table = {
        (CONTENT, IFM_GROUP): Transition(PREAMBLE),
        (PREAMBLE, call): Transition(NAME, CALL_START),
        (PREAMBLE, IFM_GROUP_END): Transition(CONTENT),  # text after the group is content
        (NAME, key): Transition(PKEY, PARAM_START),
        (NAME, call_end): Transition(PREAMBLE, NAME_END | CALL_END),  # no arguments
        (PKEY, key_end): Transition(ARGS),  # the key waits for its value
        # `xml_typed`'s type tag: the schema types the value (HEADER text is dropped).
        (ARGS, typ): Transition(HEADER),
        (HEADER, typ_end): Transition(ARGS),
        (ARGS, value): Transition(PVALUE, VALUE_START),
        (PVALUE, value_end): Transition(ARGS, PARAM_END),
        (ARGS, key): Transition(PKEY, PARAM_START),
        (ARGS, call_end): Transition(PREAMBLE, CALL_END),
        # A group or call left open: its end closes what is open.
        (ARGS, IFM_GROUP_END): Transition(CONTENT, CALL_END),
        (PVALUE, call_end): Transition(PREAMBLE, PARAM_END | CALL_END),
        (PVALUE, IFM_GROUP_END): Transition(CONTENT, PARAM_END | CALL_END),
    }
    # `chat_template_kwargs.tool_call_format: "json"`: each call is a JSON object,
    # `<ifm|tool_call>{"name": …, "arguments": {…}}</ifm|tool_call>`.
    json_calls = ToolFormat(
        "k2_horizon",
        {
            (CONTENT, IFM_GROUP): Transition(PREAMBLE),
            (PREAMBLE, call): Transition(ARGS, CALL_START),
            (ARGS, call_end): Transition(PREAMBLE, CALL_END),
            (PREAMBLE, IFM_GROUP_END): Transition(CONTENT),
            (ARGS, IFM_GROUP_END): Transition(CONTENT, CALL_END),
        },
        CallList,
        calls=CallShape(SHAPE_SINGLE),
        known_names=True,
        forced=FORCED_NATIVE,
    )
    return ToolFormat(
        "k2_horizon",
        t,
        CallParams,
        schema=True,
        known_names=True,  # vLLM refuses a call to a tool the request does not offer
        # No structural tag: required / named choices are read as the model writes them.
        forced=FORCED_NATIVE,
        variant=("tool_call_format", "json", json_calls),
    )


BLOCK_REASONING_FORMATS: dict[str, ReasoningFormat] = {
    "inkling": INKLING_REASONING,
    "k2_horizon": _k2_horizon_reasoning(),
    **MUSE_REASONING_FORMATS,  # Muse's messages (muse.py)
}
BLOCK_TOOL_FORMATS: dict[str, ToolFormat] = {
    "inkling": _inkling_tools(),
    "k2_horizon": _k2_horizon_tools(),
    **MUSE_TOOL_FORMATS,
}
