"""Gemma 4's argument syntax as JSON, streamed (vllm-parsers-0.33.md §3.2).

`call:NAME{key:value,…}` (or `(…)`): keys are bare words or strings, strings are written
between `<|"|>` tokens (the engine's PVALUE state, so the delimiter is found by token id
or on text like any marker), other values are bare (`42`, `true`, `3.14`) or nested
`{…}` / `[…]`. As vLLM reads it, a bare value is text until the tool's schema types it,
and only the top-level parameters are typed: nested bare values stay strings.

What is sent is always final: a string streams as it arrives; a bare value (and a typed
string, `n:<|"|>1e3<|"|>` → 1000) waits for its end, at most one value. The position is
kept in the `Call` (phase, the open containers in `flag`, the key, the value so far), so
a chunk costs its own length.
"""

from __future__ import annotations

from typing import Protocol

from worker.core.parsers.convert import (
    STRING,
    UNKNOWN,
    dumps,
    escape,
    json_or_text,
    typed_value,
)
from worker.core.parsers.events import Event, send_args
from worker.core.parsers.formats import ToolFormat
from worker.core.parsers.state import Call, ParserState

# Call.phase
G_START = 0  # before the opening `{` / `(`
G_KEY = 1  # reading an object key
G_VALUE = 2  # a value may start
G_BARE = 3  # inside a bare value (in Call.held)
G_AFTER = 4  # after a value: `,` or a closer
G_DONE = 5  # the arguments are closed: the rest is ignored

# Call.role while inside a `<|"|>` string
S_STREAM = 1  # sent as it arrives
S_TYPED = 2  # a top-level parameter with a non-string type: converted at its end
S_KEY = 3  # a quoted key

# Call.flag holds the open containers, innermost last: `{` / `[` before their first
# member, `o` / `a` after it. Deeper nesting than this is flattened into text.
DEPTH_MAX = 64


class Run(Protocol):
    st: ParserState
    out: list[Event]

    @property
    def fmt(self) -> ToolFormat | None: ...


def _send(run: Run, call: Call, text: str) -> None:
    send_args(run.out, call, text)


def _type(run: Run, call: Call) -> str:
    """The schema type of the top-level parameter being read (UNKNOWN deeper down)."""
    if len(call.flag) != 1:
        return UNKNOWN
    key = call.key.strip()
    for schema in run.st.tools:
        if schema.name == call.name:
            return schema.types.get(key, UNKNOWN)
    return UNKNOWN


def _member(call: Call) -> None:
    """An object key is complete (its `:` was read); it is sent with its value's start
    (`call.esc` says one waits), so a value that is dropped takes its key along."""
    call.esc = True
    call.phase = G_VALUE


def _element(call: Call) -> str:
    """What goes before a value: its key (`"key": `, after a separator), or inside an
    array the separator."""
    top = call.flag[-1] if call.flag else ""
    if call.esc:
        call.esc = False
        lead = ", " if top == "o" else ("{" if len(call.flag) == 1 and not call.count else "")
        call.flag = call.flag[:-1] + "o"
        call.count += 1
        return lead + dumps(call.key.strip()) + ": "
    if top == "[":
        call.flag = call.flag[:-1] + "a"
        return ""
    return ", " if top == "a" else ""


def _open(run: Run, call: Call, c: str) -> None:
    lead = _element(call)
    if len(call.flag) >= DEPTH_MAX:
        call.phase, call.held = G_BARE, c  # too deep: the rest of it is a string
        return
    call.flag += "{" if c == "{" else "["
    call.key = ""  # the parent's key is sent; the nested object reads its own
    _send(run, call, lead + c)
    call.phase = G_KEY if c == "{" else G_VALUE


def _close(run: Run, call: Call) -> None:
    top = call.flag[-1]
    call.flag = call.flag[:-1]
    if not call.flag and not call.count:
        _send(run, call, "{}")  # the top level with no parameters
    else:
        _send(run, call, "}" if top in "{o" else "]")
    call.phase = G_AFTER if call.flag else G_DONE


def _bare_done(run: Run, call: Call) -> None:
    raw = call.held.strip()
    call.held = ""
    call.phase = G_AFTER
    fmt = run.fmt
    if fmt is not None and fmt.guess_types:
        call.esc = False  # FunctionGemma reads only delimited values: a bare one is dropped
        return
    lead = _element(call)
    type_name = _type(run, call)
    _send(run, call, lead + (typed_value(raw, type_name) if type_name != UNKNOWN else dumps(raw)))
    call.phase = G_AFTER


def structure(run: Run, call: Call, text: str) -> None:
    """Text outside strings: braces, keys, colons, commas, bare values."""
    for c in text:
        phase = call.phase
        if phase == G_DONE:
            return
        if phase == G_START:
            if c in "{(":
                call.flag, call.phase = "{", G_KEY
            continue
        if phase == G_BARE:
            if c not in ",}])":
                call.held += c
                continue
            _bare_done(run, call)
            phase = G_AFTER
        if phase == G_KEY:
            if c == ":":
                _member(call)
            elif c in "})" and not call.key.strip():
                call.key = ""
                _close(run, call)
            elif c != ",":
                call.key += c
        elif phase == G_VALUE:
            if c in "{[":
                _open(run, call, c)
            elif (c == "]" and call.flag[-1:] in ("[", "a")) or (
                c in "})" and call.flag[-1:] in ("{", "o")
            ):
                _close(run, call)
            elif not c.isspace() and c != ",":
                call.phase, call.held = G_BARE, c
        elif phase == G_AFTER:
            if c == ",":
                call.key = ""
                call.phase = G_KEY if call.flag[-1:] in ("{", "o") else G_VALUE
            elif c in "})]":
                _close(run, call)


def string_start(run: Run, call: Call) -> None:
    """A `<|"|>` opened a string: a quoted key, or a value."""
    if call.phase == G_KEY:
        call.role = S_KEY
        return
    if call.phase not in (G_VALUE, G_BARE):
        call.role = 0  # a string where none belongs (after the arguments): ignored
        return
    if call.phase == G_BARE:
        call.held = ""
    type_name = _type(run, call)
    fmt = run.fmt
    if type_name not in (STRING, UNKNOWN) or (fmt is not None and fmt.guess_types):
        call.role = S_TYPED
        return
    call.role = S_STREAM
    _send(run, call, _element(call) + '"')


def string(run: Run, call: Call, text: str) -> None:
    role = call.role
    if role == S_STREAM:
        _send(run, call, escape(text))
    elif role == S_TYPED:
        call.held += text
    elif role == S_KEY:
        call.key += text


def string_end(run: Run, call: Call) -> None:
    role, call.role = call.role, 0
    if role == S_STREAM:
        _send(run, call, '"')
        call.phase = G_AFTER
    elif role == S_TYPED:
        raw, call.held = call.held, ""
        fmt = run.fmt
        if fmt is not None and fmt.guess_types:  # FunctionGemma: JSON if it is JSON
            value = json_or_text(raw)
        else:
            value = typed_value(raw, _type(run, call))
        _send(run, call, _element(call) + value)
        call.phase = G_AFTER


def call_end(run: Run, call: Call) -> None:
    """The call ended (`<tool_call|>`, or the output did): close what is open, so the
    arguments are valid JSON (vLLM returns an unterminated call too)."""
    if call.role:
        string_end(run, call)
    if call.phase == G_BARE:
        _bare_done(run, call)
    if call.phase == G_START:
        _send(run, call, "{}")
    while call.flag:
        _close(run, call)
