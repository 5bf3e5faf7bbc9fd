"""Cohere Command A (vLLM 0.33.0 vllm/parser/cohere_command.py): `cohere_command3` and
`cohere_command4`, reasoning and tools.

vLLM 0.33 hands the whole output to the `cohere_melody` library (presets `cmd3` /
`cmd4`): a filter whose special tokens switch between text modes from any mode —
`<|START_THINKING|>` reasoning, `<|END_THINKING|>` and `<|START_RESPONSE|>` (cmd4 also
`<|START_TEXT|>`) the answer, `<|END_RESPONSE|>` / `<|END_TEXT|>` / `<|END_ACTION|>`
nothing (the text after them is dropped until the next marker), `<|START_ACTION|>` a JSON
list of `{"tool_call_id", "tool_name", "parameters"}` calls. cmd3 starts in the answer,
cmd4 in reasoning (its prompts open the thinking block); neither reads the prompt or
the request's switches. melody matches the markers on text, so we do too.

Its text rules, as table entries and `trim_segments` (prose.trimmed): each segment of
answer or reasoning text between markers loses its trailing whitespace (`SEGMENT`),
the text after `<|START_THINKING|>` its leading whitespace (`TRIM_LEFT`, up to the first
text sent), and grounded citations lose their markup: `<co>` goes, and `</co: 0:[1]>`
from `</co: ` to the next `>` (dropped in PREAMBLE / BETWEEN, which hold no call here).
"""

from __future__ import annotations

from worker.core.parsers.language.grammar import (
    ARGS,
    BETWEEN,
    CALL_END,
    CALL_START,
    CONTENT,
    DROP,
    FORCED_NATIVE,
    HELD_WS,
    PREAMBLE,
    REASONING,
    SEGMENT,
    SHAPE_ARRAY,
    TRIM_LEFT,
    CallShape,
    ReasoningFormat,
    Table,
    ToolFormat,
    Transition,
)
from worker.core.parsers.language.state import CallList

START_THINKING, END_THINKING = "<|START_THINKING|>", "<|END_THINKING|>"
START_ACTION, END_ACTION = "<|START_ACTION|>", "<|END_ACTION|>"
# Where a citation's closing tag is dropped, in the answer and in reasoning.
_CITE_CLOSE = {CONTENT: PREAMBLE, REASONING: BETWEEN}
_TEXT_STATES = (CONTENT, REASONING, DROP, PREAMBLE, BETWEEN)

# melody's special tokens per preset: marker → the mode it switches to.
_CMD3: dict[str, int] = {
    "<|START_RESPONSE|>": CONTENT,
    "<|END_RESPONSE|>": DROP,
    START_THINKING: REASONING,
    END_THINKING: CONTENT,
    START_ACTION: DROP,  # calls are read only with tool parsing (the tool table)
    END_ACTION: DROP,
}
_CMD4 = {**_CMD3, "<|START_TEXT|>": CONTENT, "<|END_TEXT|>": DROP}


def _switch(to: int, act: int = 0) -> Transition:
    return Transition(to, act | SEGMENT | (TRIM_LEFT if to == REASONING else 0))


def _modes(markers: dict[str, int]) -> Table:
    """The markers from every text state, and the citation markup."""
    t: Table = {}
    for state in _TEXT_STATES:
        for marker, to in markers.items():
            t[(state, marker)] = _switch(to)
    for state, close in _CITE_CLOSE.items():
        # Whitespace before citation markup is no segment's end: it stays text.
        t[(state, "<co>")] = Transition(state, HELD_WS)
        t[(state, "</co: ")] = Transition(close, HELD_WS)
        t[(close, ">")] = Transition(state)
    return t


def _reasoning(name: str, markers: dict[str, int], thinking: bool) -> ReasoningFormat:
    return ReasoningFormat(
        name,
        START_THINKING,
        END_THINKING,
        thinking_default=thinking,
        from_prompt=False,
        from_kwargs=False,
        text_match=True,
        more=tuple(_modes(markers).items()),
        trim_segments=True,
    )


def _tools(name: str, markers: dict[str, int]) -> ToolFormat:
    t = _modes(markers)
    for state in _TEXT_STATES:
        t[(state, START_ACTION)] = _switch(ARGS, CALL_START)
    for marker, to in markers.items():
        t[(ARGS, marker)] = _switch(to, CALL_END)
    # Another action block goes on with the calls (melody keeps one action state).
    t[(ARGS, START_ACTION)] = _switch(ARGS, CALL_END | CALL_START)
    return ToolFormat(
        name,
        t,
        CallList,
        calls=CallShape(SHAPE_ARRAY, ("parameters",), name_key="tool_name"),
        # vLLM constrains required / named choices to the action block (structural tag).
        forced=FORCED_NATIVE,
        text_markers=tuple(markers),
    )


REASONING_FORMATS: dict[str, ReasoningFormat] = {
    "cohere_command3": _reasoning("cohere_command3", _CMD3, thinking=False),
    "cohere_command4": _reasoning("cohere_command4", _CMD4, thinking=True),
}
TOOL_FORMATS: dict[str, ToolFormat] = {
    "cohere_command3": _tools("cohere_command3", _CMD3),
    "cohere_command4": _tools("cohere_command4", _CMD4),
}
