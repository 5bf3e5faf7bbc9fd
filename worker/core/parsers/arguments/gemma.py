"""Gemma 4's argument syntax as JSON, streamed (vLLM 0.33.0 vllm/parser/gemma4.py).

`call:NAME{key:value,…}` (or `(…)`): keys are bare words or strings, strings are written
between `<|"|>` tokens (the engine's PVALUE state, so the delimiter is found by token id
or on text like any marker), other values are bare (`42`, `true`, `3.14`) or nested
`{…}` / `[…]`. As vLLM reads it, a bare value is text until the tool's schema types it,
and only the top-level parameters are typed: nested bare values stay strings.

What is sent is always final: a string streams as it arrives; a bare value (and a typed
string, `n:<|"|>1e3<|"|>` → 1000) waits for its end, at most one value. The position is
kept in the `CallGemma` (phase, the open containers, the key, the value so far), so a
chunk costs its own length.
"""

from __future__ import annotations

from worker.core.parsers.arguments.convert import (
    STRING,
    UNKNOWN,
    dumps,
    escape,
    json_or_text,
    typed_value,
)
from worker.core.parsers.language.events import send_args
from worker.core.parsers.language.scope import Scope
from worker.core.parsers.language.state import CallGemma

# CallGemma.phase
START = 0  # before the opening `{` / `(`
KEY = 1  # reading an object key
VALUE = 2  # a value may start
BARE = 3  # inside a bare value (in CallGemma.held)
AFTER = 4  # after a value: `,` or a closer
DONE = 5  # the arguments are closed: the rest is ignored

# CallGemma.string while inside a `<|"|>` string
OUTSIDE = 0
STREAM = 1  # sent as it arrives
TYPED = 2  # a top-level parameter with a non-string type: converted at its end
KEY_STRING = 3  # a quoted key

# CallGemma.stack holds the open containers, innermost last: `{` / `[` before their
# first member, `o` / `a` after it. Deeper nesting than this is flattened into text.
DEPTH_MAX = 64


def _type(scope: Scope, call: CallGemma) -> str:
    """The schema type of the top-level parameter being read (UNKNOWN deeper down)."""
    if len(call.stack) != 1:
        return UNKNOWN
    return scope.tools.type_of(call.name, call.key.strip())


def _member(call: CallGemma) -> None:
    """An object key is complete (its `:` was read); it is sent with its value's start
    (`call.key_waits` says one waits), so a value that is dropped takes its key along."""
    call.key_waits = True
    call.phase = VALUE


def _element(call: CallGemma) -> str:
    """What goes before a value: its key (`"key": `, after a separator), or inside an
    array the separator."""
    top = call.stack[-1] if call.stack else ""
    if call.key_waits:
        call.key_waits = False
        lead = ", " if top == "o" else ("{" if len(call.stack) == 1 and not call.count else "")
        call.stack = call.stack[:-1] + "o"
        call.count += 1
        return lead + dumps(call.key.strip()) + ": "
    if top == "[":
        call.stack = call.stack[:-1] + "a"
        return ""
    return ", " if top == "a" else ""


def _open(scope: Scope, call: CallGemma, c: str) -> None:
    lead = _element(call)
    if len(call.stack) >= DEPTH_MAX:
        call.phase, call.held = BARE, c  # too deep: the rest of it is a string
        return
    call.stack += "{" if c == "{" else "["
    call.key = ""  # the parent's key is sent; the nested object reads its own
    send_args(scope.out, call, lead + c)
    call.phase = KEY if c == "{" else VALUE


def _close(scope: Scope, call: CallGemma) -> None:
    top = call.stack[-1]
    call.stack = call.stack[:-1]
    if not call.stack and not call.count:
        send_args(scope.out, call, "{}")  # the top level with no parameters
    else:
        send_args(scope.out, call, "}" if top in "{o" else "]")
    call.phase = AFTER if call.stack else DONE


def _bare_done(scope: Scope, call: CallGemma) -> None:
    raw = call.held.strip()
    call.held = ""
    call.phase = AFTER
    fmt = scope.fmt
    if fmt is not None and fmt.guess_types:
        # FunctionGemma reads only delimited values: a bare one is dropped, key and all.
        call.key_waits = False
        return
    lead = _element(call)
    type_name = _type(scope, call)
    value = typed_value(raw, type_name) if type_name != UNKNOWN else dumps(raw)
    send_args(scope.out, call, lead + value)
    call.phase = AFTER


def feed(scope: Scope, call: CallGemma, text: str) -> int:
    """Text outside strings: braces, keys, colons, commas, bare values."""
    for c in text:
        phase = call.phase
        if phase == DONE:
            break
        if phase == START:
            if c in "{(":
                call.stack, call.phase = "{", KEY
            continue
        if phase == BARE:
            if c not in ",}])":
                call.held += c
                continue
            _bare_done(scope, call)
            phase = AFTER
        if phase == KEY:
            if c == ":":
                _member(call)
            elif c in "})" and not call.key.strip():
                call.key = ""
                _close(scope, call)
            elif c != ",":
                call.key += c
        elif phase == VALUE:
            if c in "{[":
                _open(scope, call, c)
            elif (c == "]" and call.stack[-1:] in ("[", "a")) or (
                c in "})" and call.stack[-1:] in ("{", "o")
            ):
                _close(scope, call)
            elif not c.isspace() and c != ",":
                call.phase, call.held = BARE, c
        elif phase == AFTER:
            if c == ",":
                call.key = ""
                call.phase = KEY if call.stack[-1:] in ("{", "o") else VALUE
            elif c in "})]":
                _close(scope, call)
    return len(text)


def string_start(scope: Scope, call: CallGemma) -> None:
    """A `<|"|>` opened a string: a quoted key, or a value."""
    if call.phase == KEY:
        call.string = KEY_STRING
        return
    if call.phase not in (VALUE, BARE):
        call.string = OUTSIDE  # a string where none belongs (after the arguments): ignored
        return
    if call.phase == BARE:
        call.held = ""
    type_name = _type(scope, call)
    fmt = scope.fmt
    if type_name not in (STRING, UNKNOWN) or (fmt is not None and fmt.guess_types):
        call.string = TYPED
        return
    call.string = STREAM
    send_args(scope.out, call, _element(call) + '"')


def string(scope: Scope, call: CallGemma, text: str) -> None:
    """Text inside a `<|"|>` string."""
    kind = call.string
    if kind == STREAM:
        send_args(scope.out, call, escape(text))
    elif kind == TYPED:
        call.held += text
    elif kind == KEY_STRING:
        call.key += text


def string_end(scope: Scope, call: CallGemma) -> None:
    """A `<|"|>` closed the string."""
    kind, call.string = call.string, OUTSIDE
    if kind == STREAM:
        send_args(scope.out, call, '"')
        call.phase = AFTER
    elif kind == TYPED:
        raw, call.held = call.held, ""
        fmt = scope.fmt
        if fmt is not None and fmt.guess_types:  # FunctionGemma: JSON if it is JSON
            value = json_or_text(raw)
        else:
            value = typed_value(raw, _type(scope, call))
        send_args(scope.out, call, _element(call) + value)
        call.phase = AFTER


def end(scope: Scope, call: CallGemma) -> None:
    """The call ended (`<tool_call|>`, or the output did): close what is open, so the
    arguments are valid JSON (vLLM returns an unterminated call too)."""
    if call.string:
        string_end(scope, call)
    if call.phase == BARE:
        _bare_done(scope, call)
    if call.phase == START:
        send_args(scope.out, call, "{}")
    while call.stack:
        _close(scope, call)
