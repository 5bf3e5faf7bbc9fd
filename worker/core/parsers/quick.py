"""The common record's path: a few tokens of plain text in content or reasoning.

Nearly every streamed record of a parsed request is one or a few ordinary tokens in the
middle of the reasoning or the answer: no marker token among them, nothing held or
pending, and no character in the text that could begin a marker the current state looks
for on text. For such a record `engine.feed` builds its per-feed scope, lexes the text,
routes it to one `Reasoning` or `Content` event, and `to_delta` turns that one event into
a `Delta`: a few microseconds of Python for what is, in the end, "this text is the
reasoning". `Quick.delta` answers that case directly, with the very same result and the
same state changes, and says `MISS` for anything else, which then takes the engine.

It must stay exactly the engine's behaviour on the records it takes; each condition
below names the engine's branch it stands for (tests/core/parsers/test_quick.py feeds
the same chunks both ways over every format).
"""

from __future__ import annotations

import enum

from worker.core.parsers.language.grammar import CONTENT, REASONING
from worker.core.parsers.language.state import (
    ALT_TOOLS,
    APPEND_THINK,
    HIDE_REASONING,
    MSG_BEGUN,
    MSG_COUNTS,
    MSG_NAMED,
    TOOLS_NONE,
    ParserState,
)
from worker.core.parsers.machine.spec import ParserSpec
from worker.core.parsers.render import REASONING as REASONING_FIELD
from worker.core.parsers.render import REASONING_CONTENT
from worker.wire.outbound import Delta


class Miss(enum.Enum):
    """The record is not the common case: feed it to the engine."""

    MISS = 0


MISS = Miss.MISS

# Flags whose records the engine handles (hidden logprobs, the think start still to send,
# the tool format's variant): rare, and each changes what a feed does.
_SLOW_FLAGS = HIDE_REASONING | APPEND_THINK | ALT_TOOLS


class Quick:
    """One parser spec's common path (`plan` builds it; None where the spec has none)."""

    __slots__ = ("firsts", "lstrip", "marker_ids", "named", "reasoning_content", "strip")

    def __init__(self, spec: ParserSpec, reasoning_content: bool) -> None:
        rf = spec.reasoning
        self.marker_ids = spec.marker_ids
        self.reasoning_content = reasoning_content
        # (engine._Run.text: a reasoning block whose first line may name its channel, and
        # trailing whitespace the format strips, go through prose.reasoning.)
        self.named = rf is not None and bool(rf.prefix)
        self.strip = spec.strip_reasoning
        # (prose.content: leading newlines of the answer are dropped.)
        self.lstrip = rf is not None and rf.lstrip_newlines
        # The first characters of the markers found on text in content or reasoning, by
        # any of the machines (engine._Run.__init__ picks one by the request): a text
        # without any of them holds no marker and no beginning of one (lexer.holdback).
        firsts: set[str] = set()
        for machine in (spec.bare, spec.tools_only, spec.plain, spec.auto):
            for state in (CONTENT, REASONING):
                lx = machine.lex_ids[state]
                firsts |= lx.firsts if lx is not None else set()
        self.firsts = tuple(sorted(firsts))

    def delta(self, st: ParserState, text: str, token_ids: list[int]) -> Delta | Miss | None:
        """What `Parser.feed(st, text, token_ids)` (not final) returns as its delta, with
        the same changes to `st`; MISS (and `st` untouched) when the record is not the
        common case."""
        if st.finished or st.pending or st.held or st.flags & _SLOW_FLAGS:
            return MISS
        state = st.state
        if state == REASONING:
            if text and (
                (self.named and not st.msg & MSG_NAMED)
                or (self.strip and (st.rws or text[-1:].isspace()))
            ):
                return MISS
        elif state == CONTENT:
            # (prose._answer: before the first real content, whitespace is held and a
            # call list may be sniffed.)
            if text and (
                (self.lstrip and not st.msg & MSG_BEGUN)
                or (not st.started and st.mode != TOOLS_NONE)
            ):
                return MISS
        else:
            return MISS
        if not self.marker_ids.isdisjoint(token_ids):
            return MISS  # a marker by id (or a special token to drop)
        for first in self.firsts:
            if first in text:
                return MISS  # a marker on text, or the start of one to hold back
        # engine.feed's accounting of the record's tokens.
        if state == REASONING or st.msg & MSG_COUNTS:
            st.reasoning_tokens += len(token_ids)
        if not text:
            return None
        if state == CONTENT:
            st.started = True
            return Delta(content=text)
        if self.reasoning_content:
            return Delta(reasoning_content=text)
        return Delta(reasoning=text)


def plan(spec: ParserSpec, reasoning_field: str) -> Quick | None:
    """The spec's common path, or None when its records all need the engine: message
    frames, reasoning rewritten after the fact or cut into segments, whitespace that
    markers swallow (held at the end of content), an unknown reasoning field (the
    engine's `to_delta` raises for it)."""
    rf, fmt = spec.reasoning, spec.tools
    if spec.frames is not None or reasoning_field not in (REASONING_FIELD, REASONING_CONTENT):
        return None
    if rf is not None and (
        rf.escaped_newlines or rf.as_content or rf.trim_segments or rf.swallow_ws
    ):
        return None
    if fmt is not None and fmt.swallow_ws:
        return None
    return Quick(spec, reasoning_field == REASONING_CONTENT)
