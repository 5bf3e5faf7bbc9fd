"""Meta Muse's channel-scoped messages (vLLM 0.33.0 muse_* parsers): `muse` (and its
alias `musespark1x`) and `muse_glimmer`.

Output is a sequence of messages, as gpt-oss's is (frames.py), each a header and a body:
`<|start|>assistant to=RECIPIENT<|message|>BODY<|eom|>` (the first without
`<|start|>assistant`: the prompt ends with it; `<|eot|>` ends the turn). vLLM reads them
with regexes over the text, so here:

- a header is whatever precedes `<|message|>` since the last message ended (or since
  `<|start|>`): only a `to=NAME` right before `<|message|>` counts; text between
  messages is dropped;
- the recipient says what the body is. Muse Spark: none or `self` → reasoning, `user`
  or `commentary` → content, `developer` → nobody's, anything else → a tool channel;
  Glimmer: `self` → reasoning, `user` → content, none → nobody's, anything else a tool
  channel;
- a tool channel's body is ATEM markup, read by the table below:
  `<atem:function_calls><atem:invoke name="NAME"><atem:parameter name="K">V
  </atem:parameter>…</atem:invoke>…</atem:function_calls>`; a value is JSON when it
  parses, else text; a parameter the schema types `string` is text (as Spark keeps it;
  Glimmer would decode `"123"` to 123);
- a body ends at `<|eom|>`, `<|eot|>` or a `<|start|>` (the next header beginning);
- bodies of a kind are joined as written (Glimmer: reasoning bodies with "\n").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from worker.core.parsers.families.frames import (
    KIND_CALL,
    KIND_CONTENT,
    KIND_DROP,
    KIND_REASONING,
    Header,
)
from worker.core.parsers.language.grammar import (
    ARGS,
    CALL_END,
    CALL_START,
    CONTENT,
    DROP,
    FORCED_NATIVE,
    FRAME,
    HEAD_DONE,
    HEAD_DOUBLED,
    HEAD_OPEN,
    NAME,
    PARAM_END,
    PARAM_START,
    PKEY,
    PREAMBLE,
    PVALUE,
    REASONING,
    VALUE_START,
    Frames,
    ReasoningFormat,
    Table,
    ToolFormat,
    Transition,
)
from worker.core.parsers.language.state import CallParams

START, MESSAGE, EOM, EOT = "<|start|>", "<|message|>", "<|eom|>", "<|eot|>"
# A recipient right before `<|message|>` (vLLM's reasoning parser: `to=[^\s<]+`).
_RECIPIENT = re.compile(r"to=([^\s<]+)$")

# The states a body is read in: text, and a tool channel's ATEM markup.
_BODIES = (CONTENT, REASONING, DROP, PREAMBLE, NAME, ARGS, PKEY, PVALUE)


@dataclass(frozen=True)
class MuseFrames(Frames):
    """Muse's messages: the frames' markers, how a header is read, and the table."""

    glimmer: bool = False

    def read(self, head: str) -> Header:
        m = _RECIPIENT.search(head)
        recipient = m.group(1) if m else None
        reasoning: tuple[str | None, ...]
        content: tuple[str | None, ...]
        dropped: tuple[str | None, ...]
        if self.glimmer:
            reasoning, content, dropped = ("self",), ("user",), (None,)
        else:
            reasoning, content, dropped = (None, "self"), ("user", "commentary"), ("developer",)
        if recipient in reasoning:
            return Header(KIND_REASONING, "", True)
        if recipient in content:
            return Header(KIND_CONTENT, "", False)
        if recipient in dropped:
            return Header(KIND_DROP, "", False)
        return Header(KIND_CALL, "", False)

    def table(self) -> Table:
        t: Table = {
            # A header ends: its recipient picks the body's state (prose.body).
            (FRAME, self.body): Transition(CONTENT, HEAD_DONE),
            (FRAME, self.start): Transition(FRAME, HEAD_OPEN),  # what came before: dropped
        }
        for state in _BODIES:
            # A body ends at its end marker or where the next message starts; what is
            # open in a tool channel closes.
            act = CALL_END | (PARAM_END if state == PVALUE else 0)
            for marker in (*self.ends, self.start):
                t[(state, marker)] = Transition(FRAME, HEAD_OPEN | act)
            # `<|message|>` inside a body (a header whose `<|start|>` is missing, after an
            # unclosed body): not text.
            t[(state, self.body)] = Transition(state)
        return t


MUSE = MuseFrames(START, MESSAGE, (EOM, EOT), ())
MUSE_GLIMMER = MuseFrames(START, MESSAGE, (EOM, EOT), (), glimmer=True)


def _atem(frames: MuseFrames) -> ToolFormat:
    invoke, invoke_end = '<atem:invoke name="', "</atem:invoke>"
    param, param_end = '<atem:parameter name="', "</atem:parameter>"
    t: Table = frames.table()
    t.update(
        {
            (PREAMBLE, "<atem:function_calls>"): Transition(PREAMBLE),
            (PREAMBLE, "</atem:function_calls>"): Transition(PREAMBLE),
            (PREAMBLE, invoke): Transition(NAME, CALL_START),
            (NAME, '">'): Transition(ARGS),
            (ARGS, param): Transition(PKEY, PARAM_START),
            (PKEY, '">'): Transition(PVALUE, VALUE_START),
            (PVALUE, param_end): Transition(ARGS, PARAM_END),
            (ARGS, invoke_end): Transition(PREAMBLE, CALL_END),
        }
    )
    return ToolFormat(
        "muse_glimmer" if frames.glimmer else "muse",
        t,
        CallParams,
        header=HEAD_DOUBLED,
        schema=True,
        # A value is JSON when it parses, else text; a `string` parameter text.
        guess_types=True,
        # vLLM's Muse parser opts out of the JSON path: required / named choices are read
        # as the model writes them.
        forced=FORCED_NATIVE,
        frames=frames,
    )


def _reasoning(name: str, frames: MuseFrames) -> ReasoningFormat:
    return ReasoningFormat(
        name,
        "",
        "",
        thinking_default=False,
        from_prompt=False,
        from_kwargs=False,
        strip_trailing=False,
        frames=frames,
    )


_MUSE_REASONING = _reasoning("muse", MUSE)
MUSE_REASONING_FORMATS: dict[str, ReasoningFormat] = {
    "muse": _MUSE_REASONING,
    "musespark1x": _MUSE_REASONING,  # vLLM: the same class
    "muse_glimmer": _reasoning("muse_glimmer", MUSE_GLIMMER),
}
_MUSE = _atem(MUSE)
MUSE_TOOL_FORMATS: dict[str, ToolFormat] = {
    "muse": _MUSE,
    "musespark1x": _MUSE,
    "muse_glimmer": _atem(MUSE_GLIMMER),
}
