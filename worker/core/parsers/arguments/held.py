"""Tool blocks read whole when they end (`CallHeld`): MiniCPM5's `<function …>` elements and
a response template's tool region (vLLM 0.33 parses both only once their closer is there).

The block's text is kept in the call (`body`) and, at its end, the format's reader
(`ToolFormat.held`) gives its calls, each sent at once: header, then the arguments in one
piece. A block that is no call is content again, markers included, where the format says
so (`give_back`: MiniCPM5), else dropped (a malformed template region, as vLLM drops it).
With tool parsing off (tool_choice "none", no tools) a template's block is content as
written (`suppressed_as_text`), as vLLM passes the region through.

The body is bounded: a block longer than `HOLD_MAX` is no call (no real call is that long
before its closer); what was held is given back or dropped then, and the rest of the block
is text of the state it falls back to.
"""

from __future__ import annotations

from worker.core.parsers.arguments.calls import header
from worker.core.parsers.language.events import Content, send_args
from worker.core.parsers.language.grammar import CONTENT
from worker.core.parsers.language.scope import Scope
from worker.core.parsers.language.state import TOOLS_SUPPRESS, CallBase, CallHeld

# The longest block held to be read whole (a state write of at most this much per record
# while the block lasts).
HOLD_MAX = 16384


def feed(scope: Scope, call: CallHeld, text: str) -> int:
    """Text inside the block: held. Returns how much was used (all of it, or up to the
    point where the block got too long and was given up)."""
    room = HOLD_MAX - len(call.body)
    if len(text) <= room:
        call.body += text
        return len(text)
    # Less than all is used: the engine reads the rest in the state given up to.
    call.body += text[:room]
    _give_up(scope, call)
    return room


def _give_up(scope: Scope, call: CallHeld) -> None:
    """The block is too long to be a call: its text so far is content (or dropped), and
    what follows is content."""
    st = scope.st
    st.call = None
    st.state = CONTENT
    if _gives_back(scope):
        _text(scope, call.head + call.body)


def _text(scope: Scope, text: str) -> None:
    """The block's text is content: after the whitespace held before it."""
    st = scope.st
    text, st.ws = st.ws + text, ""
    if text:
        st.started = True
        scope.out.append(Content(text))


def _gives_back(scope: Scope) -> bool:
    fmt = scope.fmt
    if fmt is None:
        return False
    return fmt.give_back or (fmt.suppressed_as_text and scope.st.mode == TOOLS_SUPPRESS)


def end(scope: Scope, call: CallHeld) -> None:
    """The block ended (its closer, or the end of the output): its calls go out, or its
    text is content again, or it is dropped."""
    fmt = scope.fmt
    st = scope.st
    if fmt is None or fmt.held is None:
        return
    if fmt.suppressed_as_text and st.mode == TOOLS_SUPPRESS:
        _text(scope, call.head + call.body + call.close)
        return
    if fmt.give_back and not call.close:
        # Cut by the end of the output: vLLM's MiniCPM5 parser sees no block there.
        _text(scope, call.head + call.body)
        return
    calls = fmt.held(call.body, scope.tools)
    if calls is None:
        if fmt.give_back:
            _text(scope, call.head + call.body + call.close)
        return
    for name, arguments in calls:
        one = CallBase()
        if header(scope, one, name):
            send_args(scope.out, one, arguments)
