"""What the parser engine says about a piece of output: neutral events, no wire shapes.

`render.py` turns them into OpenAI deltas and messages. Events are tiny frozen Structs
(`gc=False`: they hold only strings and ints) so a chunk's list costs little.
"""

from __future__ import annotations

import msgspec


class Reasoning(msgspec.Struct, frozen=True, gc=False):
    """Reasoning text (the `reasoning` / `reasoning_content` field)."""

    text: str


class Content(msgspec.Struct, frozen=True, gc=False):
    """Answer text (the `content` field)."""

    text: str


class ToolCallStart(msgspec.Struct, frozen=True, gc=False):
    """A call's header: sent once per call, before any of its arguments."""

    index: int
    id: str
    name: str


class ToolCallArgs(msgspec.Struct, frozen=True, gc=False):
    """A fragment of a call's arguments; a call's fragments concatenate to JSON text."""

    index: int
    text: str


Event = Reasoning | Content | ToolCallStart | ToolCallArgs
