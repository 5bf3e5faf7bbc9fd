"""Key/value parameter markup turned into one JSON object (Qwen3 XML, DSML, GLM, MiniMax
M2, Kimi K3).

The format's table finds the markers; the engine hands this module a parameter's key
(PKEY text), its DSML flag (PTYPE) and its value (PVALUE). Each `key → value` becomes
`"key": value` once the key is known: string values stream as escaped text as they
arrive, other values are converted when the parameter closes. What is sent is therefore
always final — the stable-prefix rule of vLLM's `ParserEngine._safe_arg_prefix`
(vllm/parser/engine/parser_engine.py) — and nothing is re-converted.
"""

from __future__ import annotations

from worker.core.parsers.arguments.calls import attributes
from worker.core.parsers.arguments.convert import (
    STRING,
    UNKNOWN,
    dumps,
    escape,
    guessed_value,
    json_value,
    typed_value,
)
from worker.core.parsers.language.events import send_args
from worker.core.parsers.language.scope import Scope
from worker.core.parsers.language.state import CallParams

# CallParams.value: how the current value is sent
NONE = 0  # no value open
STREAM = 1  # as a JSON string, piece by piece
BUFFER = 2  # converted whole when the parameter closes

# A stripped value's trailing whitespace waits for more text up to this many characters.
STRIP_HOLD_MAX = 256


def param_start(call: CallParams) -> None:
    """A parameter's key begins."""
    call.key, call.flag = "", ""


def value_start(scope: Scope, call: CallParams) -> None:
    """A parameter's key (and DSML flag) are complete; its value begins."""
    fmt = scope.fmt
    key = call.key.strip()
    if fmt is not None and fmt.attrs:
        # Kimi K3: `key="K" type="T"`; a string (or untyped) value is raw text.
        found = attributes(key)
        key = found.get("key", "")
        call.flag = "true" if found.get("type", "string") == "string" else "false"
    if len(key) >= 2 and key[0] == key[-1] and key[0] in "\"'":
        key = key[1:-1]  # MiniMax `<parameter name="city">`
    call.key = key
    type_name = scope.tools.type_of(call.name, key)
    string = type_name == STRING or (type_name == UNKNOWN and not (fmt and fmt.guess_types))
    if fmt is not None and fmt.typed_flag:
        # DSML: only `string="true"` is raw text; a missing flag means JSON (vLLM).
        string = string and call.flag.strip() == "true"
    call.held = ""
    call.lead = fmt is not None and (fmt.value_newlines or fmt.strip_values)
    if string:
        call.value = STREAM
        send_args(scope.out, call, ("{" if not call.count else ", ") + dumps(key) + ': "')
        call.count += 1
    else:
        call.value = BUFFER


def value(scope: Scope, call: CallParams, text: str) -> None:
    """Value text."""
    if call.value == BUFFER:
        call.held += text  # converted whole when the parameter closes
        return
    if call.value != STREAM:
        return
    fmt = scope.fmt
    if fmt is not None and fmt.strip_values:
        _stripped(scope, call, text)
        return
    if call.lead:
        if not text:
            return
        call.lead = False
        if text[0] == "\n":
            text = text[1:]
    if fmt is not None and fmt.value_newlines:
        # One trailing newline is formatting: hold a final "\n" until more follows.
        text, call.held = call.held + text, ""
        if text.endswith("\n"):
            text, call.held = text[:-1], "\n"
    if text:
        send_args(scope.out, call, escape(text))


def _stripped(scope: Scope, call: CallParams, text: str) -> None:
    """A string value without its surrounding whitespace (Step-3: vLLM strips every
    value): leading whitespace is dropped, trailing whitespace held until more text
    follows (past STRIP_HOLD_MAX it is sent: the state stays bounded)."""
    if call.lead:
        text = text.lstrip()
        if not text:
            return
        call.lead = False
    text, call.held = call.held + text, ""
    body = text.rstrip()
    call.held = text[len(body) :]
    if len(call.held) > STRIP_HOLD_MAX:
        body, call.held = text, ""
    if body:
        send_args(scope.out, call, escape(body))


def param_end(scope: Scope, call: CallParams) -> None:
    """The parameter closed: a streamed string is closed, a held value converted."""
    fmt = scope.fmt
    if call.value == STREAM:
        send_args(scope.out, call, '"')
    elif call.value == BUFFER:
        raw = call.held
        if fmt is not None and fmt.strip_values:
            raw = raw.strip()
        if fmt is not None and fmt.value_newlines:
            raw = raw[1:] if raw.startswith("\n") else raw
            raw = raw[:-1] if raw.endswith("\n") else raw
        type_name = scope.tools.type_of(call.name, call.key)
        if fmt is not None and fmt.typed_flag and call.flag.strip() != "true":
            converted = json_value(raw, type_name)
        elif fmt is not None and fmt.guess_types:  # (poolside_v1: whatever the schema says)
            converted = guessed_value(raw)
        else:
            converted = typed_value(raw, type_name)
        lead = "{" if not call.count else ", "
        send_args(scope.out, call, lead + dumps(call.key) + ": " + converted)
        call.count += 1
    call.value, call.held, call.key, call.flag, call.lead = NONE, "", "", "", False


def end(scope: Scope, call: CallParams) -> None:
    """The call is closed: the object too (`{}` when no parameter was sent)."""
    send_args(scope.out, call, "}" if call.count else "{}")
