"""What one feed works with: the compiled spec, the choice's parser state, and the events
being produced.

The engine makes one per feed and hands it to the argument scanners and to prose.py;
they read the tool format from it and change the state in it. Nothing lasting lives
here: it is gone when the feed returns, and the state carries everything on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from worker.core.parsers.arguments.tools import ToolTable
    from worker.core.parsers.language.events import Event
    from worker.core.parsers.language.grammar import ToolFormat
    from worker.core.parsers.language.state import ParserState
    from worker.core.parsers.machine.spec import ParserSpec


class Scope:
    """The fields the scanners and prose.py read; the engine's per-feed object
    (engine._Run) is a Scope and sets them."""

    __slots__ = ("fmt", "out", "spec", "st", "tools")

    spec: ParserSpec
    st: ParserState
    out: list[Event]
    fmt: ToolFormat | None  # spec.tools
    tools: ToolTable  # the request's tools (names, parameter types)
