"""JSON arguments passed through as the model writes them (Kimi K2, Mistral v11,
DeepSeek V3): from the first non-space character to the end of the top-level value;
text after the value is ignored.

The scanner only tracks strings and bracket depth (`scan_json`, which call_list.py uses
too), so a chunk costs its own length. Kimi K2's bare-counter calls are the exception:
their name comes from the arguments, which wait (one call's worth) for the call's end.
"""

from __future__ import annotations

import re
from typing import Any

from worker.core.parsers.arguments.calls import header
from worker.core.parsers.arguments.convert import loads
from worker.core.parsers.arguments.tools import ToolTable
from worker.core.parsers.language.events import send_args
from worker.core.parsers.language.scope import Scope
from worker.core.parsers.language.state import CallJson, CallList

# CallJson.phase
BEFORE = 0  # leading space before the value
IN = 1  # inside the value
AFTER = 2  # after the value: the rest is ignored

_OUTSIDE = re.compile(r'["{}\[\]]')  # what matters in JSON outside strings
_INSIDE = re.compile(r'["\\]')  # … and inside them
_SCALAR_END = re.compile(r"[\s,}\]]")


def value_opens(call: CallJson | CallList, c: str) -> None:
    """A JSON value starts with `c`: a container, a string or a scalar."""
    call.esc = False
    if c in "{[":
        call.depth, call.quote = 1, False
    elif c == '"':
        call.depth, call.quote = 0, True
    else:
        call.depth, call.quote = -1, False


def scan_json(call: CallJson | CallList, text: str, i: int) -> int:
    """Advance through a JSON value from `i`; the index just past its end, or -1 if it
    goes on. `call.depth` > 0: inside a container; 0 with `quote`: a string; -1: a
    scalar (which ends before the delimiter that ends it)."""
    n = len(text)
    if call.depth < 0:
        m = _SCALAR_END.search(text, i)
        return -1 if m is None else m.start()
    while i < n:
        if call.quote:
            if call.esc:
                call.esc = False
                i += 1
                continue
            m = _INSIDE.search(text, i)
            if m is None:
                return -1
            i = m.end()
            if m.group() == "\\":
                call.esc = True
            else:
                call.quote = False
                if call.depth == 0:
                    return i
            continue
        m = _OUTSIDE.search(text, i)
        if m is None:
            return -1
        i = m.end()
        c = m.group()
        if c == '"':
            call.quote = True
        elif c in "{[":
            call.depth += 1
        else:
            call.depth -= 1
            if call.depth == 0:
                return i
    return -1


def feed(scope: Scope, call: CallJson, text: str) -> int:
    """Arguments text: sent from the value's first character to its end."""
    if call.phase == AFTER:
        return len(text)
    i = 0
    if call.phase == BEFORE:
        stripped = text.lstrip()
        if not stripped:
            return len(text)
        i = len(text) - len(stripped)
        call.phase = IN
        value_opens(call, text[i])
        end = scan_json(call, text, i + 1)
    else:
        end = scan_json(call, text, i)
    piece = text[i:] if end < 0 else text[i:end]
    if end >= 0:
        call.phase = AFTER
    if call.defer_id:
        call.deferred += piece  # the name comes from these arguments, at the end
    else:
        send_args(scope.out, call, piece)
    return len(text)


def end(scope: Scope, call: CallJson) -> None:
    """The call is closed: a deferred call gets its name now, one without arguments
    gets `{}`."""
    if call.defer_id:
        name = _infer_name(scope.tools, call.deferred)
        if name is not None and header(scope, call, name, native_id=call.defer_id):
            send_args(scope.out, call, call.deferred.strip() or "{}")
        return
    if call.phase == BEFORE:
        send_args(scope.out, call, "{}")


def _infer_name(tools: ToolTable, raw_args: str) -> str | None:
    """A bare-counter Kimi call: the one tool whose parameters take these arguments."""
    try:
        value: Any = loads(raw_args) if raw_args.strip() else {}
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    keys = set(value)
    fits = [t.name for t in tools.schemas if keys <= set(t.types)]
    return fits[0] if len(fits) == 1 else None
