"""JSON call lists: objects with a `name` and an `arguments` (or `parameters`) value
(hermes, llama3_json, Mistral before v11, and the constrained output of tool_choice
"required").

The header goes out as soon as the name is complete; the arguments stream as written
after it, checked as JSON (json_check.py: they go out up to the last point where they can
still be closed, and are closed where they stop being JSON or the call ends before they
do). Arguments written before the name wait (bounded by that call). How the objects are laid
out — one per block, a sequence, an array — is the format's `CallShape`. A block that was
sniffed (no opening marker) keeps its text until its first header and gives it back as
content if it turns out to be no call list.
"""

from __future__ import annotations

from worker.core.parsers.arguments import json_check
from worker.core.parsers.arguments.calls import HEAD_MAX, fall_back, header, keep_raw
from worker.core.parsers.arguments.convert import loads
from worker.core.parsers.arguments.json_args import scan_json, value_opens
from worker.core.parsers.language.events import send_args
from worker.core.parsers.language.grammar import (
    REQUIRED_CALLS,
    SHAPE_ARRAY,
    SHAPE_SINGLE,
    CallShape,
)
from worker.core.parsers.language.scope import Scope
from worker.core.parsers.language.state import CallList, JsonCheck

# CallList.phase
START = 0  # before the first object (or the array's `[`)
OBJ = 1  # inside an object, before a key
KEY = 2  # inside a key (a JSON string, kept in CallList.key)
COLON = 3  # after a key
VALUE = 4  # after the colon, before the value
IN_VALUE = 5  # inside a value
NEXT = 6  # after a value: `,` or `}`
BETWEEN = 7  # between objects
END = 8  # the block is done: the rest is ignored
_IN_OBJECT = frozenset((OBJ, KEY, COLON, VALUE, IN_VALUE, NEXT))

# CallList.value: what the current value is
V_NONE = 0
V_NAME = 1  # the call's "name" string
V_ARGS = 2  # its arguments object/array: streamed raw
V_ARGS_TEXT = 3  # arguments given as a string or scalar: converted when complete
V_OTHER = 4  # a key that is neither: skipped


def shape_of(scope: Scope, call: CallList) -> CallShape:
    if call.required or scope.fmt is None:
        return REQUIRED_CALLS
    return scope.fmt.calls or REQUIRED_CALLS


def feed(scope: Scope, call: CallList, text: str) -> int:
    """Scan block text; returns how much was used (less than all only when a sniffed
    block turned out not to be calls and fell back to content)."""
    shape = shape_of(scope, call)
    base = call.raw if call.fallback else ""
    i, n = 0, len(text)
    while i < n and call.phase != END:
        phase = call.phase
        if phase in (KEY, IN_VALUE):
            end = scan_json(call, text, i)
            stop = n if end < 0 else end
            if phase == KEY:
                call.key = (call.key + text[i:stop])[: HEAD_MAX + 2]
            else:
                _value_piece(scope, call, text[i:stop])
            i = stop
            if end >= 0:
                if phase == KEY:
                    call.phase = COLON
                else:
                    _value_done(scope, call, shape)
                    call.phase = NEXT
            continue
        c = text[i]
        if not c.isspace() and not _structure(scope, call, c, shape):
            if call.fallback:
                fall_back(scope, base + text[:i])
                return i
            call.phase = END  # the rest of the block is not calls
            break
        i += 1
    return keep_raw(scope, call, base, text)


def _structure(scope: Scope, call: CallList, c: str, shape: CallShape) -> bool:
    """A character outside keys and values (not whitespace); False when a call list
    cannot go on with it."""
    phase = call.phase
    if phase == START:
        if shape.shape == SHAPE_ARRAY:
            if c == "[":
                call.phase = BETWEEN
            elif c == "{" and shape.keyed:
                _new_object(call)  # one call without its array (vLLM's Apertus takes it)
            return True  # anything else before the array is skipped (test_tool_cases.py MT08)
        if c == "{":
            _new_object(call)
            return True
        return False
    if phase == BETWEEN:
        if c == "{":
            _new_object(call)
            return True
        if c == "]" and shape.shape == SHAPE_ARRAY:
            call.phase = END
            return True
        return c in ",;"
    if phase == OBJ:
        if c == '"':
            call.key, call.quote, call.depth, call.esc = '"', True, 0, False
            call.phase = KEY
            return True
        if c == "}":
            _object_end(scope, call, shape)
            return True
        return c == ","
    if phase == COLON:
        call.phase = VALUE
        return c == ":"
    if phase == VALUE:
        _value_start(scope, call, c, shape)
        call.phase = IN_VALUE
        _value_piece(scope, call, c)
        return True
    # NEXT
    if c == ",":
        call.phase = OBJ
        return True
    if c == "}":
        _object_end(scope, call, shape)
        return True
    return False


def _new_object(call: CallList) -> None:
    call.phase = OBJ
    call.index, call.skip, call.name, call.args_seen = -1, False, "", False
    call.held, call.count, call.value, call.key = "", 0, V_NONE, ""
    call.check = None


def _key(call: CallList) -> str:
    try:
        key = loads(call.key)
    except ValueError:
        return ""
    return key if isinstance(key, str) else ""


def _maybe_header(scope: Scope, call: CallList, shape: CallShape) -> None:
    if call.index >= 0 or call.skip or not call.name:
        return
    if shape.need_args_key and not call.args_seen:
        return
    if header(scope, call, call.name) and call.held and call.value != V_ARGS_TEXT:
        send_args(scope.out, call, call.held)  # arguments that came before the name
        call.count += 1
        call.held = ""


def _value_start(scope: Scope, call: CallList, c: str, shape: CallShape) -> None:
    key = _key(call)
    if shape.keyed and not call.name and not call.args_seen:
        _keyed_start(scope, call, c, shape, key)
        return
    if key == shape.name_key and not call.name and c == '"':
        call.value, call.head = V_NAME, ""
    elif key in shape.arg_keys and not call.args_seen:
        call.args_seen = True
        call.value = V_ARGS if c in "{[" else V_ARGS_TEXT
        if call.value == V_ARGS:
            call.check = JsonCheck()
            _maybe_header(scope, call, shape)
    else:
        call.value = V_OTHER
    value_opens(call, c)


def _keyed_start(scope: Scope, call: CallList, c: str, shape: CallShape, key: str) -> None:
    """The first key of a keyed object names the function; its value is the arguments
    (later keys are skipped)."""
    call.args_seen = True
    if key:
        call.name = key[:HEAD_MAX]
    call.value = V_ARGS if c in "{[" else V_ARGS_TEXT
    if call.value == V_ARGS:
        call.check = JsonCheck()
    _maybe_header(scope, call, shape)
    value_opens(call, c)


def _value_piece(scope: Scope, call: CallList, piece: str) -> None:
    if call.value == V_NAME:
        call.head = (call.head + piece)[: HEAD_MAX + 2]
    elif call.value == V_ARGS:
        if call.check is not None:  # (None: a state written before the check)
            piece = json_check.feed(call.check, piece)
        _args_out(scope, call, piece)
    elif call.value == V_ARGS_TEXT:
        call.held += piece


def _args_out(scope: Scope, call: CallList, piece: str) -> None:
    if not piece:
        return
    if call.index >= 0:
        send_args(scope.out, call, piece)
        call.count += 1
    elif not call.skip:
        call.held += piece


def _args_end(scope: Scope, call: CallList) -> None:
    """The arguments value ended (or the call did before it): close what is open."""
    if call.check is not None:
        _args_out(scope, call, json_check.finish(call.check))
        call.check = None


def _value_done(scope: Scope, call: CallList, shape: CallShape) -> None:
    kind, call.value = call.value, V_NONE
    if kind == V_ARGS:
        _args_end(scope, call)
    elif kind == V_NAME:
        try:
            name = loads(call.head)
        except ValueError:
            name = None
        if isinstance(name, str) and name:
            call.name = name
            _maybe_header(scope, call, shape)
    elif kind == V_ARGS_TEXT:
        call.held = _text_arguments(call.held)
        if call.index >= 0:
            send_args(scope.out, call, call.held)
            call.count += 1
            call.held = ""
        else:
            _maybe_header(scope, call, shape)


def _text_arguments(raw: str) -> str:
    """Arguments given as a JSON string: a string holding a JSON object or array is
    passed through (not double-encoded); any other string stays a JSON string
    (test_tool_cases.py H11, H12). Scalars are kept as written."""
    raw = raw.strip()
    if not raw.startswith('"'):
        return raw
    try:
        inner = loads(raw)
        value = loads(inner)
    except ValueError:
        return raw
    if isinstance(value, dict | list):
        return str(inner)
    return raw


def _object_end(scope: Scope, call: CallList, shape: CallShape) -> None:
    _maybe_header(scope, call, shape)
    if call.index >= 0 and not call.skip:
        if call.held:
            send_args(scope.out, call, call.held)
            call.count += 1
        if not call.count:
            send_args(scope.out, call, "{}")
    call.phase = END if shape.shape == SHAPE_SINGLE else BETWEEN
    call.index, call.held, call.name, call.args_seen, call.count = -1, "", "", False, 0


def end(scope: Scope, call: CallList) -> None:
    """The block ends (closing marker or end of output)."""
    shape = shape_of(scope, call)
    if call.phase in _IN_OBJECT:
        if call.value == V_ARGS_TEXT:
            call.held = ""  # an unterminated string argument is no argument
        elif call.value == V_ARGS:
            _args_end(scope, call)
        _maybe_header(scope, call, shape)
        if call.index >= 0 and call.held and call.value != V_ARGS_TEXT:
            send_args(scope.out, call, call.held)
            call.count += 1
        if call.index >= 0 and not call.count:
            # Cut after its name, before any arguments: none, as JSON (`_object_end`'s
            # rule). Sent nothing, the stream's call had no arguments at all and the
            # whole response's `""` (found by the SDK oracle: neither parses).
            send_args(scope.out, call, "{}")
    # A closed, empty array (`[]`) is a list of no calls, not text.
    if call.fallback and not (call.phase == END and shape.shape == SHAPE_ARRAY):
        fall_back(scope, call.raw)
