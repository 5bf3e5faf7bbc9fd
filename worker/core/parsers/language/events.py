"""What the parser engine says about a piece of output: neutral events, no wire shapes.

`render.py` turns them into OpenAI deltas and messages. Events are tiny frozen Structs
(`gc=False`: they hold only strings and ints) so a chunk's list costs little.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from worker.core.parsers.language.state import CallBase


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


def send_args(out: list[Event], call: CallBase, text: str) -> None:
    """A fragment of `call`'s arguments, unless the call is not out (no header yet, or
    suppressed) or there is nothing to send. Every argument scanner sends through this."""
    if text and call.index >= 0 and not call.skip:
        out.append(ToolCallArgs(call.index, text))
