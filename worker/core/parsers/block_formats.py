"""Typed-block formats (vllm-parsers-0.33.md row 21): Thinking Machines Inkling.

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

from worker.core.parsers.grammar import (
    ARGS,
    CALL_END,
    CALL_START,
    CONTENT,
    FORCED_NATIVE,
    HEAD_FLUSH,
    HEADER,
    REASONING,
    SHAPE_SINGLE,
    CallShape,
    ReasoningFormat,
    Table,
    ToolFormat,
    Transition,
)
from worker.core.parsers.state import CallList

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


BLOCK_REASONING_FORMATS: dict[str, ReasoningFormat] = {"inkling": INKLING_REASONING}
BLOCK_TOOL_FORMATS: dict[str, ToolFormat] = {"inkling": _inkling_tools()}
