"""How the text inside a tool call becomes a name and JSON arguments.

Four kinds (formats.ARGS_*), each a small scanner whose position is kept in the `Call`
struct, so a chunk costs its own length whatever came before:

- JSON passthrough: the arguments are JSON text and are sent as the model writes them,
  from the first non-space character to the end of the top-level value.
- Parameters (XML, DSML): each `key → value` is turned into `"key": value` once the key
  is known; string values stream as escaped text as they arrive, other values are
  converted when the parameter closes. What is sent is therefore always final — the
  stable-prefix rule of reference/vllm-parsers.md §1.5 — and nothing is re-converted.
- JSON call lists (hermes, llama3_json, mistral pre-v11, tool_choice "required"):
  objects with a `name` and an `arguments`/`parameters` value; the header goes out as
  soon as the name is complete, the arguments stream raw after it. Arguments written
  before the name wait (bounded by that call).
- Pythonic: `[f(a=1, b='x'), g()]`; each keyword value is converted when it completes.

Nothing here keeps the output: `held` is one call's unsendable piece at most.
"""

from __future__ import annotations

import ast
import hashlib
import html
import json
import re
from typing import Any, Protocol

from worker.core.parsers import elements
from worker.core.parsers.convert import (
    STRING,
    UNKNOWN,
    dumps,
    escape,
    guessed_value,
    json_value,
    python_literal,
    typed_value,
)
from worker.core.parsers.events import Event, ToolCallStart, send_args
from worker.core.parsers.formats import (
    ARGS_JSON,
    ARGS_PARAMS,
    HEAD_ATTRS,
    HEAD_GEMMA,
    HEAD_KIMI,
    HEAD_MISTRAL,
    HEAD_PLAIN,
    ID_HASH,
    ID_MISTRAL,
    ID_NATIVE,
    SHAPE_ARRAY,
    SHAPE_SINGLE,
    CallShape,
    ToolFormat,
)
from worker.core.parsers.state import NO_TOOLS, SINGLE_CALL, TOOLS_SUPPRESS, Call, ParserState

# A call's name, a key, a DSML flag: longer text is cut (names are identifiers).
HEAD_MAX = 256

# A sniffed block (llama3_json "{", pythonic "[") is held back, to be given back as
# content if it is no call list, until its first call header; past this it is content.
RAW_MAX = 4096

TOOL_CALL_ID_PREFIX = "chatcmpl-tool-"  # vLLM's prefix (reference §1.1)
_ID_HEX = 32  # vLLM's ids carry uuid4().hex: 32 hex digits
_MISTRAL_ID_LEN = 9  # mistral-common requires exactly 9 alphanumerics
_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

# Value roles (Call.role)
ROLE_NONE = 0
ROLE_NAME = 1  # a JSON call's "name" string
ROLE_ARGS = 2  # a JSON call's arguments object/array: streamed raw
ROLE_ARGS_TEXT = 3  # arguments given as a string or scalar: converted when complete
ROLE_OTHER = 4  # a key that is neither: skipped
ROLE_STREAM = 5  # a parameter value that streams as a JSON string
ROLE_BUFFER = 6  # a parameter value converted when the parameter closes
ROLE_DEFER = 7  # Kimi call whose name is inferred from its arguments at the end

# JSON passthrough phases
J_BEFORE, J_IN, J_AFTER = 0, 1, 2
# JSON call-list phases
C_START, C_OBJ, C_KEY, C_COLON, C_VALUE, C_IN_VALUE, C_NEXT, C_BETWEEN, C_END = range(9)
# Pythonic phases
Y_START, Y_LIST, Y_NAME, Y_KW, Y_KWNAME, Y_EQ, Y_VALUE, Y_END = range(8)
Y_QUOTE = 8  # a value opened with a quote: the next character says whether it streams
Y_STR = 9  # inside a plain quoted string value: streamed as a JSON string
Y_STR_END = 10  # after that string's closing quote: whitespace, then `,` or `)`
# A string escape (`\n`, `\x41`, `\u00e9`, `\N{…}`) longer than this is taken as text.
ESCAPE_MAX = 64
_OCTAL = frozenset("01234567")
# Parameter value phases (XML): 1 = a leading newline may still be stripped
P_LEAD = 1

_OUTSIDE = re.compile(r'["{}\[\]]')  # what matters in JSON outside strings
_INSIDE = re.compile(r'["\\]')  # … and inside them
_SCALAR_END = re.compile(r"[\s,}\]]")
_KIMI_ID = re.compile(r"(.+):(\d+)")


class Run(Protocol):
    """What the handlers need from the engine's per-feed working set."""

    st: ParserState
    out: list[Event]

    @property
    def fmt(self) -> ToolFormat | None: ...

    def fall_back(self, text: str) -> None: ...


def tool_call_id(request_id: str, choice: int, index: int, style: int = ID_HASH) -> str:
    """Deterministic tool-call id from (request_id, choice index, tool index)
    (CONTRACT.md §3): the same input gives the same id on any worker and in replay."""
    digest = hashlib.sha256(f"{choice}:{index}:{request_id}".encode()).digest()
    if style == ID_MISTRAL:
        return "".join(_ALNUM[b % len(_ALNUM)] for b in digest[:_MISTRAL_ID_LEN])
    return TOOL_CALL_ID_PREFIX + digest.hex()[:_ID_HEX]


# -- headers and argument fragments -------------------------------------------------------


def header(run: Run, call: Call, name: str, native_id: str = "") -> bool:
    """Send a call's header once; False when the call is suppressed instead."""
    st = run.st
    if call.skip:
        return False
    if st.mode == TOOLS_SUPPRESS:  # tool_choice "none", or no tools: parsed, not sent
        if st.flags & NO_TOOLS:
            st.ws = ""
        call.skip = True
        return False
    if not name or (st.flags & SINGLE_CALL and st.calls >= 1) or not _known(run, name):
        # No name, parallel_tool_calls: false and one call was made, or a name the
        # format must find among the request's tools.
        call.skip = True
        return False
    index = st.calls
    st.calls += 1
    call.index, call.name = index, name
    fmt = run.fmt
    style = fmt.ids if fmt is not None else ID_HASH
    if style == ID_NATIVE and native_id:
        call_id = native_id
    else:
        call_id = tool_call_id(st.request_id, st.choice, index, style)
    run.out.append(ToolCallStart(index, call_id, name))
    st.ws = ""  # whitespace-only content before a call is not sent
    call.fallback, call.raw = False, ""
    return True


_ATTRIBUTE = re.compile(r'([\w:-]+)="([^"]*)"')


def attributes(text: str) -> dict[str, str]:
    """XML attributes (`tool="a&amp;b" index="1"`), values unescaped."""
    return {k: html.unescape(v) for k, v in _ATTRIBUTE.findall(text)}


def _known(run: Run, name: str) -> bool:
    fmt = run.fmt
    if fmt is None or not fmt.known_names or not run.st.tools:
        return True
    return any(t.name == name for t in run.st.tools)


def _send(run: Run, call: Call, text: str) -> None:
    send_args(run.out, call, text)


def name_done(run: Run, call: Call) -> None:
    """The name (header text) of a marker-delimited call is complete."""
    fmt = run.fmt
    style = fmt.header if fmt is not None else HEAD_PLAIN
    head = call.head.strip()
    if style == HEAD_MISTRAL:
        head = head.replace("[ARGS]", "").strip()
    elif style == HEAD_GEMMA:
        head = head.partition(":")[2].strip() if ":" in head else head
    elif style == HEAD_ATTRS:
        head = attributes(head).get("tool", "")
    if style != HEAD_KIMI:
        header(run, call, head)
        return
    # Kimi: the header is the call's id, `functions.NAME:IDX` (or `NAME:IDX`); newer
    # models may write a bare counter, and then the request's tools say the name.
    m = _KIMI_ID.fullmatch(head)
    if m is not None:
        header(run, call, m.group(1).rsplit(".", 1)[-1], native_id=head)
    elif head.isdigit():
        tools = run.st.tools
        if len(tools) == 1:
            header(run, call, tools[0].name, native_id=head)
        else:
            call.role, call.key = ROLE_DEFER, head
    else:
        call.skip = True  # malformed header, e.g. `functions.invalid.0` (reference K08)


def call_end(run: Run, call: Call) -> None:
    """A marker-delimited call (JSON passthrough or parameters) is closed."""
    if call.role == ROLE_DEFER:
        name = _infer_name(run.st, call.held)
        if name is None or not header(run, call, name, native_id=call.key):
            return
        _send(run, call, call.held.strip() or "{}")
        return
    if call.index < 0 or call.skip:
        return
    if call.kind == ARGS_PARAMS:
        _send(run, call, "}" if call.count else "{}")
    elif call.kind == ARGS_JSON and call.phase == J_BEFORE:
        _send(run, call, "{}")


def elements_end(run: Run, call: Call) -> None:
    """A MiniMax M3 invoke ended: its parameter elements, typed, as one JSON object."""
    if call.index < 0 or call.skip:
        return
    elements.end(run, call)


def _infer_name(st: ParserState, raw_args: str) -> str | None:
    """A bare-counter Kimi call: the one tool whose parameters take these arguments."""
    try:
        value: Any = json.loads(raw_args) if raw_args.strip() else {}
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    keys = set(value)
    fits = [t.name for t in st.tools if keys <= set(t.types)]
    return fits[0] if len(fits) == 1 else None


# -- JSON passthrough -----------------------------------------------------------------------


def scan_json(call: Call, text: str, i: int) -> int:
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
                call.quote = ""
                if call.depth == 0:
                    return i
            continue
        m = _OUTSIDE.search(text, i)
        if m is None:
            return -1
        i = m.end()
        c = m.group()
        if c == '"':
            call.quote = '"'
        elif c in "{[":
            call.depth += 1
        else:
            call.depth -= 1
            if call.depth == 0:
                return i
    return -1


def verbatim(run: Run, call: Call, text: str) -> None:
    """A named tool_choice's output: all of it is the arguments, as vLLM returns it
    (constrained decoding makes it one JSON object; nothing after it is dropped)."""
    _send(run, call, text)


def _value_opens(call: Call, c: str) -> None:
    call.esc = False
    if c in "{[":
        call.depth, call.quote = 1, ""
    elif c == '"':
        call.depth, call.quote = 0, '"'
    else:
        call.depth, call.quote = -1, ""


def json_args(run: Run, call: Call, text: str) -> None:
    """Raw JSON arguments: leading space is dropped, text after the value ignored."""
    if call.phase == J_AFTER:
        return
    i = 0
    if call.phase == J_BEFORE:
        stripped = text.lstrip()
        if not stripped:
            return
        i = len(text) - len(stripped)
        call.phase = J_IN
        _value_opens(call, text[i])
        end = scan_json(call, text, i + 1)
    else:
        end = scan_json(call, text, i)
    piece = text[i:] if end < 0 else text[i:end]
    if end >= 0:
        call.phase = J_AFTER
    if call.role == ROLE_DEFER:
        call.held += piece  # the name comes from these arguments, at the end
    else:
        _send(run, call, piece)


# -- parameters (XML, DSML) -------------------------------------------------------------------


def _type_of(st: ParserState, tool: str, key: str) -> str:
    for schema in st.tools:
        if schema.name == tool:
            return schema.types.get(key, UNKNOWN)
    return UNKNOWN


def value_start(run: Run, call: Call) -> None:
    """A parameter's key (and DSML flag) are complete; its value begins."""
    fmt = run.fmt
    key = call.key.strip()
    if fmt is not None and fmt.attrs:
        # Kimi K3: `key="K" type="T"`; a string (or untyped) value is raw text.
        found = attributes(key)
        key = found.get("key", "")
        call.flag = "true" if found.get("type", "string") == "string" else "false"
    if len(key) >= 2 and key[0] == key[-1] and key[0] in "\"'":
        key = key[1:-1]  # MiniMax `<parameter name="city">`
    call.key = key
    type_name = _type_of(run.st, call.name, key)
    string = type_name == STRING or (type_name == UNKNOWN and not (fmt and fmt.guess_types))
    if fmt is not None and fmt.typed_flag:
        # DSML: only `string="true"` is raw text; a missing flag means JSON (vLLM).
        string = string and call.flag.strip() == "true"
    call.held = ""
    call.phase = P_LEAD if fmt is not None and fmt.value_newlines else 0
    if string:
        call.role = ROLE_STREAM
        _send(run, call, ("{" if not call.count else ", ") + dumps(key) + ': "')
        call.count += 1
    else:
        call.role = ROLE_BUFFER


def value(run: Run, call: Call, text: str) -> None:
    if call.role == ROLE_BUFFER:
        call.held += text  # converted whole when the parameter closes
        return
    if call.role != ROLE_STREAM:
        return
    if call.phase == P_LEAD:
        if not text:
            return
        call.phase = 0
        if text[0] == "\n":
            text = text[1:]
    fmt = run.fmt
    if fmt is not None and fmt.value_newlines:
        # One trailing newline is formatting: hold a final "\n" until more follows.
        text, call.held = call.held + text, ""
        if text.endswith("\n"):
            text, call.held = text[:-1], "\n"
    if text:
        _send(run, call, escape(text))


def param_end(run: Run, call: Call) -> None:
    fmt = run.fmt
    if call.role == ROLE_STREAM:
        _send(run, call, '"')
    elif call.role == ROLE_BUFFER:
        raw = call.held
        if fmt is not None and fmt.value_newlines:
            raw = raw[1:] if raw.startswith("\n") else raw
            raw = raw[:-1] if raw.endswith("\n") else raw
        type_name = _type_of(run.st, call.name, call.key)
        if fmt is not None and fmt.typed_flag and call.flag.strip() != "true":
            converted = json_value(raw, type_name)
        elif fmt is not None and fmt.guess_types:  # (poolside_v1: whatever the schema says)
            converted = guessed_value(raw)
        else:
            converted = typed_value(raw, type_name)
        _send(run, call, ("{" if not call.count else ", ") + dumps(call.key) + ": " + converted)
        call.count += 1
    call.role, call.held, call.key, call.flag, call.phase = ROLE_NONE, "", "", "", 0


# -- JSON call lists --------------------------------------------------------------------------


def _new_object(call: Call) -> None:
    call.phase = C_OBJ
    call.index, call.skip, call.name, call.args = -1, False, "", False
    call.held, call.count, call.role, call.key = "", 0, ROLE_NONE, ""


def _key(call: Call) -> str:
    try:
        key = json.loads(call.key)
    except ValueError:
        return ""
    return key if isinstance(key, str) else ""


def _maybe_header(run: Run, call: Call, shape: CallShape) -> None:
    if call.index >= 0 or call.skip or not call.name:
        return
    if shape.need_args_key and not call.args:
        return
    if header(run, call, call.name) and call.held and call.role != ROLE_ARGS_TEXT:
        _send(run, call, call.held)  # arguments that came before the name
        call.count += 1
        call.held = ""


def _value_start_json(run: Run, call: Call, c: str, shape: CallShape) -> None:
    key = _key(call)
    if key == "name" and not call.name and c == '"':
        call.role, call.head = ROLE_NAME, ""
    elif key in shape.arg_keys and not call.args:
        call.args = True
        call.role = ROLE_ARGS if c in "{[" else ROLE_ARGS_TEXT
        if call.role == ROLE_ARGS:
            _maybe_header(run, call, shape)
    else:
        call.role = ROLE_OTHER
    _value_opens(call, c)


def _value_piece(run: Run, call: Call, piece: str) -> None:
    if call.role == ROLE_NAME:
        call.head = (call.head + piece)[: HEAD_MAX + 2]
    elif call.role == ROLE_ARGS:
        if call.index >= 0:
            _send(run, call, piece)
            call.count += 1
        elif not call.skip:
            call.held += piece
    elif call.role == ROLE_ARGS_TEXT:
        call.held += piece


def _value_done(run: Run, call: Call, shape: CallShape) -> None:
    role, call.role = call.role, ROLE_NONE
    if role == ROLE_NAME:
        try:
            name = json.loads(call.head)
        except ValueError:
            name = None
        if isinstance(name, str) and name:
            call.name = name
            _maybe_header(run, call, shape)
    elif role == ROLE_ARGS_TEXT:
        call.held = _text_arguments(call.held)
        if call.index >= 0:
            _send(run, call, call.held)
            call.count += 1
            call.held = ""
        else:
            _maybe_header(run, call, shape)


def _text_arguments(raw: str) -> str:
    """Arguments given as a JSON string: a string holding a JSON object or array is
    passed through (not double-encoded); any other string stays a JSON string
    (reference H11-H13). Scalars are kept as written."""
    raw = raw.strip()
    if not raw.startswith('"'):
        return raw
    try:
        inner = json.loads(raw)
        value = json.loads(inner)
    except ValueError:
        return raw
    if isinstance(value, dict | list):
        return str(inner)
    return raw


def _object_end(run: Run, call: Call, shape: CallShape) -> None:
    _maybe_header(run, call, shape)
    if call.index >= 0 and not call.skip:
        if call.held:
            _send(run, call, call.held)
            call.count += 1
        if not call.count:
            _send(run, call, "{}")
    call.phase = C_END if shape.shape == SHAPE_SINGLE else C_BETWEEN
    call.index, call.held, call.name, call.args, call.count = -1, "", "", False, 0


def calls(run: Run, call: Call, text: str, shape: CallShape) -> int:
    """Scan a JSON call list; returns how much text was used (less than all only when
    a sniffed block turned out not to be calls and fell back to content)."""
    base = call.raw if call.fallback else ""
    i, n = 0, len(text)
    while i < n:
        phase = call.phase
        if phase == C_END:
            break
        if phase in (C_IN_VALUE, C_KEY):
            end = scan_json(call, text, i)
            stop = n if end < 0 else end
            if phase == C_KEY:
                call.key = (call.key + text[i:stop])[: HEAD_MAX + 2]
            else:
                _value_piece(run, call, text[i:stop])
            i = stop
            if end >= 0:
                if phase == C_KEY:
                    call.phase = C_COLON
                else:
                    _value_done(run, call, shape)
                    call.phase = C_NEXT
            continue
        c = text[i]
        ok = True
        if c.isspace():
            pass
        elif phase == C_START:
            if shape.shape == SHAPE_ARRAY:
                if c == "[":
                    call.phase = C_BETWEEN
                # Anything else before the array is skipped (reference MT08).
            elif c == "{":
                _new_object(call)
            else:
                ok = False
        elif phase == C_BETWEEN:
            if c == "{":
                _new_object(call)
            elif c == "]" and shape.shape == SHAPE_ARRAY:
                call.phase = C_END
            else:
                ok = c in ",;"
        elif phase == C_OBJ:
            if c == '"':
                call.key, call.quote, call.depth, call.esc = '"', '"', 0, False
                call.phase = C_KEY
            elif c == "}":
                _object_end(run, call, shape)
            else:
                ok = c == ","
        elif phase == C_COLON:
            ok = c == ":"
            call.phase = C_VALUE
        elif phase == C_VALUE:
            _value_start_json(run, call, c, shape)
            call.phase = C_IN_VALUE
            _value_piece(run, call, c)
            if call.depth < 0:  # a scalar: look for its end from here
                i += 1
                continue
        elif phase == C_NEXT:
            if c == ",":
                call.phase = C_OBJ
            elif c == "}":
                _object_end(run, call, shape)
            else:
                ok = False
        if not ok:
            if call.fallback:
                run.fall_back(base + text[:i])
                return i
            call.phase = C_END  # the rest of the block is not calls
            break
        i += 1
    return _keep_raw(run, call, base, text)


def _keep_raw(run: Run, call: Call, base: str, text: str) -> int:
    if call.fallback:
        call.raw = base + text
        if len(call.raw) > RAW_MAX:
            run.fall_back(call.raw)
    return len(text)


def calls_end(run: Run, call: Call, shape: CallShape) -> None:
    """The block ends (closing marker or end of output)."""
    if call.phase in (C_OBJ, C_KEY, C_COLON, C_VALUE, C_IN_VALUE, C_NEXT):
        if call.role == ROLE_ARGS_TEXT:
            call.held = ""  # an unterminated string argument is no argument
        _maybe_header(run, call, shape)
        if call.index >= 0 and call.held and call.role != ROLE_ARGS_TEXT:
            _send(run, call, call.held)
    # A closed, empty array (`[]`) is a list of no calls, not text.
    if call.fallback and not (call.phase == C_END and shape.shape == SHAPE_ARRAY):
        run.fall_back(call.raw)


# -- pythonic ---------------------------------------------------------------------------------


def _ident_start(c: str) -> bool:
    return c.isalpha() or c == "_"


def _ident(c: str) -> bool:
    return c.isalnum() or c in "_."


def _scan_python(call: Call, text: str, i: int) -> int:
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


def _kwarg_done(run: Run, call: Call) -> None:
    if call.role == ROLE_OTHER:  # the rest of a value whose string was sent
        call.held, call.role = "", ROLE_NONE
        return
    converted = python_literal(call.held)
    call.held = ""
    if call.skip:
        return
    if converted is None:
        if call.index < 0:
            call.skip = True  # the call's first value cannot be JSON: drop the call (P09)
        return  # a later one is left out
    if call.index < 0:
        if not header(run, call, call.name):
            return
        prefix = "{"
    else:
        prefix = ", "
    _send(run, call, prefix + dumps(call.key) + ": " + converted)
    call.count += 1


def _python_call_end(run: Run, call: Call) -> None:
    if not call.skip:
        if call.index < 0:
            if header(run, call, call.name):
                _send(run, call, "{}")
        else:
            _send(run, call, "}")
    call.index, call.skip, call.count, call.head = -1, False, 0, ""


def pythonic(run: Run, call: Call, text: str) -> int:
    base = call.raw if call.fallback else ""
    i, n = 0, len(text)
    while i < n:
        phase = call.phase
        if phase == Y_END:
            break
        if phase in (Y_STR, Y_STR_END):
            i = _python_string(run, call, text, i)
            continue
        if phase == Y_QUOTE:
            _string_or_value(run, call, text[i])
            continue  # the character is read again in the phase decided
        if phase == Y_VALUE and not call.held and text[i].isspace():
            i += 1  # before the value
            continue
        if phase == Y_VALUE and call.role != ROLE_OTHER and not call.held and text[i] in "'\"":
            call.held, call.quote, call.phase = "", text[i], Y_QUOTE
            i += 1
            continue
        if phase == Y_VALUE:
            end = _scan_python(call, text, i)
            if end == -2:
                ok = False
            else:
                stop = n if end < 0 else end
                call.held += text[i:stop]
                i = stop
                if end >= 0:
                    _kwarg_done(run, call)
                    call.phase = Y_KW
                continue
        else:
            c = text[i]
            ok = True
            if phase == Y_START:
                if c == "[":
                    call.phase = Y_LIST
                else:
                    ok = c.isspace()
            elif phase == Y_LIST:
                if c == "]":
                    call.phase = Y_END
                elif _ident_start(c):
                    call.head, call.phase = c, Y_NAME
                else:
                    ok = c.isspace() or c == ","
            elif phase == Y_NAME:
                if c == "(":
                    call.name, call.index, call.skip, call.count = call.head, -1, False, 0
                    call.phase = Y_KW
                elif _ident(c) and len(call.head) < HEAD_MAX:
                    call.head += c
                else:
                    ok = False
            elif phase == Y_KW:
                if c == ")":
                    _python_call_end(run, call)
                    call.phase = Y_LIST
                elif _ident_start(c):
                    call.key, call.phase = c, Y_KWNAME
                else:
                    ok = c.isspace() or c == ","
            elif phase in (Y_KWNAME, Y_EQ):
                if c == "=":
                    call.held, call.depth, call.quote, call.esc = "", 0, "", False
                    call.phase = Y_VALUE
                elif phase == Y_KWNAME and _ident(c) and len(call.key) < HEAD_MAX:
                    call.key += c
                elif c.isspace():
                    call.phase = Y_EQ
                else:
                    ok = False
        if not ok:
            if call.fallback:
                run.fall_back(base + text[:i])
                return i
            call.phase = Y_END
            break
        i += 1
    return _keep_raw(run, call, base, text)


def _string_or_value(run: Run, call: Call, c: str) -> None:
    """After a value's opening quote: a plain string streams as a JSON string (a long
    argument then costs its own length per record, not the whole value's); an empty or
    triple-quoted one is read whole like any other value."""
    q = call.quote
    if c == q:
        call.held, call.phase = q, Y_VALUE  # inside the string, as _scan_python sees it
        return
    call.phase = Y_STR
    if call.skip:
        return
    if call.index < 0:
        if not header(run, call, call.name):
            return
        prefix = "{"
    else:
        prefix = ", "
    _send(run, call, prefix + dumps(call.key) + ': "')
    call.count += 1
    call.role = ROLE_STREAM


def _python_string(run: Run, call: Call, text: str, i: int) -> int:
    """Inside a streamed string value (Y_STR) or right after it (Y_STR_END); returns
    where reading goes on."""
    n = len(text)
    out: list[str] = []
    while i < n:
        c = text[i]
        if call.phase == Y_STR_END:
            if c.isspace():
                i += 1
                continue
            if c in "'\"":  # `'a' 'b'`: Python joins adjacent strings into one
                call.quote, call.phase = c, Y_STR
                i += 1
                continue
            _string_done(run, call, "".join(out))
            if c in ",)":
                call.phase = Y_KW  # the `,` / `)` is read again there
            else:
                # `'a' + x`: not a literal; the string is the value, the rest of the
                # value is read and left out.
                call.phase, call.held, call.role = Y_VALUE, "", ROLE_OTHER
                call.depth, call.quote, call.esc = 0, "", False
            return i
        if call.flag:  # inside an escape sequence
            if call.flag[1:2] in _OCTAL and c not in _OCTAL:
                out.append(_escape_text(call.flag))  # an octal escape ends before `c`
                call.flag = ""
                continue
            call.flag += c
            i += 1
            done = _escape_done(call.flag)
            if done is not None or len(call.flag) > ESCAPE_MAX:
                out.append(done if done is not None else call.flag)
                call.flag = ""
            continue
        if c == "\\":
            call.flag = c
        elif c == call.quote:
            call.phase = Y_STR_END
        else:
            out.append(c)
        i += 1
    if out and call.role == ROLE_STREAM and not call.skip:
        _send(run, call, escape("".join(out)))
    return i


def _string_done(run: Run, call: Call, tail: str) -> None:
    if call.role == ROLE_STREAM and not call.skip:
        _send(run, call, escape(tail) + '"')
    call.role, call.quote, call.flag = ROLE_NONE, "", ""


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
        return None  # up to three digits (a non-digit ends it: _python_string)
    return _escape_text(seq)


def _escape_text(seq: str) -> str:
    try:
        value = ast.literal_eval("'" + seq + "'")
    except (SyntaxError, ValueError):
        return seq  # not an escape Python knows: its text, as Python keeps it
    return value if isinstance(value, str) else seq


def pythonic_end(run: Run, call: Call) -> None:
    if call.phase == Y_QUOTE:
        call.phase = Y_VALUE  # a lone opening quote: no value
    if call.phase in (Y_STR, Y_STR_END):
        _string_done(run, call, _escape_text(call.flag) if call.flag else "")
        call.phase = Y_KW
    if call.phase in (Y_KW, Y_KWNAME, Y_EQ, Y_VALUE) and call.index >= 0 and not call.skip:
        _send(run, call, "}")  # a truncated call still gets valid JSON
    if call.fallback:
        run.fall_back(call.raw)
