"""Pythonic call lists: `[f(a=1, b='x'), g()]` (Llama 3.2 / 4, vLLM's pythonic_tool_parser.py).

Each keyword value is converted to JSON when it completes (convert.python_literal); a
plain quoted string streams as a JSON string instead, so a long argument costs a record
its own length, not the value's. A value that is no literal drops the call when it is
the call's first, else just itself (test_tool_cases.py P09). A sniffed `[` that turns out to be
no call list is given back as content (calls.fall_back).
"""

from __future__ import annotations

import ast

from worker.core.parsers.arguments.calls import HEAD_MAX, fall_back, header, keep_raw
from worker.core.parsers.arguments.convert import dumps, escape, python_literal
from worker.core.parsers.language.events import send_args
from worker.core.parsers.language.scope import Scope
from worker.core.parsers.language.state import CallPythonic

# CallPythonic.phase
START = 0  # before the list's `[`
LIST = 1  # in the list, before a call
NAME = 2  # a call's name
KW = 3  # in a call's parentheses, before a keyword
KWNAME = 4  # a keyword
EQ = 5  # after a keyword, before its `=`
VALUE = 6  # a keyword's value (text in CallPythonic.held)
END = 7  # the list is done: the rest is ignored
QUOTE = 8  # a value opened with a quote: the next character says whether it streams
STR = 9  # inside a plain quoted string value: streamed as a JSON string
STR_END = 10  # after that string's closing quote: whitespace, then `,` or `)`
_OPEN_CALL = frozenset((KW, KWNAME, EQ, VALUE))

# CallPythonic.value: how the current value is sent
WHOLE = 0  # converted when it ends
STREAM = 1  # a plain string, sent as it arrives
REST = 2  # what follows a streamed string inside the same value (`'a' + x`): dropped

# A string escape (`\n`, `\x41`, `\u00e9`, `\N{…}`) longer than this is taken as text.
ESCAPE_MAX = 64
_OCTAL = frozenset("01234567")


def _ident_start(c: str) -> bool:
    return c.isalpha() or c == "_"


def _ident(c: str) -> bool:
    return c.isalnum() or c in "_."


def feed(scope: Scope, call: CallPythonic, text: str) -> int:
    """Scan list text; returns how much was used (less than all only when a sniffed
    block turned out not to be calls and fell back to content)."""
    base = call.raw if call.fallback else ""
    i, n = 0, len(text)
    while i < n and call.phase != END:
        phase = call.phase
        if phase in (STR, STR_END):
            i = _string(scope, call, text, i)
            continue
        if phase == QUOTE:
            _string_or_value(scope, call, text[i])
            continue  # the character is read again in the phase decided
        if phase == VALUE:
            c = text[i]
            if not call.held and c.isspace():
                i += 1  # before the value
                continue
            if call.value != REST and not call.held and c in "'\"":
                call.held, call.quote, call.phase = "", c, QUOTE
                i += 1
                continue
            end = _scan_value(call, text, i)
            if end != -2:
                stop = n if end < 0 else end
                call.held += text[i:stop]
                i = stop
                if end >= 0:
                    _kwarg_done(scope, call)
                    call.phase = KW
                continue
            ok = False
        else:
            ok = _structure(scope, call, text[i])
        if not ok:
            if call.fallback:
                fall_back(scope, base + text[:i])
                return i
            if phase in _OPEN_CALL and call.index >= 0 and not call.skip:
                # The list stops being Python inside a call (`[f(a='x']`): its arguments
                # are closed there, so what was sent stays JSON.
                send_args(scope.out, call, "}")
            call.phase = END
            break
        i += 1
    return keep_raw(scope, call, base, text)


def _structure(scope: Scope, call: CallPythonic, c: str) -> bool:
    """A character outside values; False when a call list cannot go on with it."""
    phase = call.phase
    if phase == START:
        if c == "[":
            call.phase = LIST
            return True
        return c.isspace()
    if phase == LIST:
        if c == "]":
            call.phase = END
            return True
        if _ident_start(c):
            call.head, call.phase = c, NAME
            return True
        return c.isspace() or c == ","
    if phase == NAME:
        if c == "(":
            call.name, call.index, call.skip, call.count = call.head, -1, False, 0
            call.phase = KW
            return True
        if _ident(c) and len(call.head) < HEAD_MAX:
            call.head += c
            return True
        return False
    if phase == KW:
        if c == ")":
            _call_end(scope, call)
            call.phase = LIST
            return True
        if _ident_start(c):
            call.key, call.phase = c, KWNAME
            return True
        return c.isspace() or c == ","
    # KWNAME, EQ
    if c == "=":
        call.held, call.depth, call.quote, call.esc = "", 0, "", False
        call.phase = VALUE
        return True
    if phase == KWNAME and _ident(c) and len(call.key) < HEAD_MAX:
        call.key += c
        return True
    if c.isspace():
        call.phase = EQ
        return True
    return False


def _scan_value(call: CallPythonic, text: str, i: int) -> int:
    """The index of the `,` or `)` that ends a keyword value, -1 if it goes on, -2 if
    a bracket closes that was not opened."""
    n = len(text)
    while i < n:
        c = text[i]
        if call.quote:
            if call.esc:
                call.esc = False
            elif c == "\\":
                call.esc = True
            elif c == call.quote:
                call.quote = ""
        elif c in "'\"":
            call.quote = c
        elif c in "([{":
            call.depth += 1
        elif c in ")]}":
            if call.depth == 0:
                return i if c == ")" else -2
            call.depth -= 1
        elif c == "," and call.depth == 0:
            return i
        i += 1
    return -1


def _lead(scope: Scope, call: CallPythonic) -> str | None:
    """What goes before the next argument: `{` with the call's header first, or `, `;
    None when the call is not sent."""
    if call.skip:
        return None
    if call.index >= 0:
        return ", "
    return "{" if header(scope, call, call.name) else None


def _kwarg_done(scope: Scope, call: CallPythonic) -> None:
    if call.value == REST:  # the rest of a value whose string was sent
        call.held, call.value = "", WHOLE
        return
    converted = python_literal(call.held)
    call.held = ""
    if call.skip:
        return
    if converted is None:
        if call.index < 0:
            call.skip = True  # the call's first value cannot be JSON: drop the call (P09)
        return  # a later one is left out
    lead = _lead(scope, call)
    if lead is not None:
        send_args(scope.out, call, lead + dumps(call.key) + ": " + converted)
        call.count += 1


def _call_end(scope: Scope, call: CallPythonic) -> None:
    if not call.skip:
        if call.index < 0:
            if header(scope, call, call.name):
                send_args(scope.out, call, "{}")
        else:
            send_args(scope.out, call, "}")
    call.index, call.skip, call.count, call.head = -1, False, 0, ""


def _string_or_value(scope: Scope, call: CallPythonic, c: str) -> None:
    """After a value's opening quote: a plain string streams as a JSON string; an empty
    or triple-quoted one is read whole like any other value."""
    q = call.quote
    if c == q:
        call.held, call.phase = q, VALUE  # inside the string, as _scan_value sees it
        return
    call.phase = STR
    lead = _lead(scope, call)
    if lead is not None:
        send_args(scope.out, call, lead + dumps(call.key) + ': "')
        call.count += 1
        call.value = STREAM


def _string(scope: Scope, call: CallPythonic, text: str, i: int) -> int:
    """Inside a streamed string value (STR) or right after it (STR_END); returns where
    reading goes on."""
    n = len(text)
    out: list[str] = []
    while i < n:
        c = text[i]
        if call.phase == STR_END:
            if c.isspace():
                i += 1
                continue
            if c in "'\"":  # `'a' 'b'`: Python joins adjacent strings into one
                call.quote, call.phase = c, STR
                i += 1
                continue
            _string_done(scope, call, "".join(out))
            if c in ",)":
                call.phase = KW  # the `,` / `)` is read again there
            else:
                # `'a' + x`: not a literal; the string is the value, the rest of the
                # value is read and left out.
                call.phase, call.held, call.value = VALUE, "", REST
                call.depth, call.quote, call.esc = 0, "", False
            return i
        if call.escape:  # inside an escape sequence
            if call.escape[1:2] in _OCTAL and c not in _OCTAL:
                out.append(_escape_text(call.escape))  # an octal escape ends before `c`
                call.escape = ""
                continue
            call.escape += c
            i += 1
            done = _escape_done(call.escape)
            if done is not None or len(call.escape) > ESCAPE_MAX:
                out.append(done if done is not None else call.escape)
                call.escape = ""
            continue
        if c == "\\":
            call.escape = c
        elif c == call.quote:
            call.phase = STR_END
        else:
            out.append(c)
        i += 1
    if out and call.value == STREAM and not call.skip:
        send_args(scope.out, call, escape("".join(out)))
    return i


def _string_done(scope: Scope, call: CallPythonic, tail: str) -> None:
    if call.value == STREAM and not call.skip:
        send_args(scope.out, call, escape(tail) + '"')
    call.value, call.quote, call.escape = WHOLE, "", ""


def _escape_done(seq: str) -> str | None:
    """The text of a complete Python escape sequence (backslash + `n`, `x41`, `u00e9`,
    `N{…}`, up to three octal digits), None while it may still go on."""
    if len(seq) < 2:
        return None
    kind = seq[1]
    need = {"x": 4, "u": 6, "U": 10}.get(kind)
    if need is not None and len(seq) < need:
        return None
    if kind == "N" and (len(seq) == 2 or (seq[2] == "{" and not seq.endswith("}"))):
        return None  # `\N{NAME}`
    if kind in _OCTAL and len(seq) < 4:
        return None  # up to three digits (a non-digit ends it: _string)
    return _escape_text(seq)


def _escape_text(seq: str) -> str:
    try:
        value = ast.literal_eval("'" + seq + "'")
    except (SyntaxError, ValueError):
        return seq  # not an escape Python knows: its text, as Python keeps it
    return value if isinstance(value, str) else seq


def end(scope: Scope, call: CallPythonic) -> None:
    """The list ends (closing marker or end of output): a call cut short is closed."""
    if call.phase == QUOTE:
        call.phase = VALUE  # a lone opening quote: no value
    if call.phase in (STR, STR_END):
        _string_done(scope, call, _escape_text(call.escape) if call.escape else "")
        call.phase = KW
    if call.phase in _OPEN_CALL and call.index >= 0 and not call.skip:
        send_args(scope.out, call, "}")  # a truncated call still gets valid JSON
    if call.fallback:
        fall_back(scope, call.raw)
