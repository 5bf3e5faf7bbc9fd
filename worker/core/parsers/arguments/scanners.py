"""The argument scanners, chosen by the kind of call (the `Call` union's type).

A format's `ToolFormat.args` names the kind a CALL_START opens; sniffing opens a call
list (prose.py), a Harmony body or a named tool_choice a verbatim call. The call's type
then says which module reads it:

| kind | module | arguments |
|---|---|---|
| CallJson | json_args.py | JSON text, passed through |
| CallParams | params.py | key/value markup, converted per value |
| CallList | call_list.py | `{"name", "arguments"}` objects |
| CallPythonic | pythonic.py | `[f(a=1), …]` |
| CallGemma | gemma.py | `{key:value}` with `<|"|>` strings |
| CallElements | elements.py | MiniMax M3's parameter elements |
| CallHeld | held.py | a block read whole at its end (MiniCPM5, response templates) |
| CallVerbatim | (none) | every character, as written |

Each module has `feed(scope, call, text) -> used` for the text of the ARGS state and
`end(scope, call)`; the kinds with parameters also take the parameter actions and their
value text (PVALUE). Opening, closing, the header text and the parameter actions are
dispatched here. The text of ARGS and PVALUE, every record's path inside a call, is
matched on the call's type in engine.text itself: one function call less per record.
"""

from __future__ import annotations

from worker.core.parsers.arguments import (
    call_list,
    elements,
    gemma,
    held,
    json_args,
    params,
    pythonic,
)
from worker.core.parsers.arguments.calls import HEAD_MAX
from worker.core.parsers.language.scope import Scope
from worker.core.parsers.language.state import (
    Call,
    CallElements,
    CallGemma,
    CallHeld,
    CallJson,
    CallList,
    CallParams,
    CallPythonic,
    CallVerbatim,
)


def open_call(scope: Scope, kind: type[Call], fallback: bool = False) -> Call:
    """A new call of `kind` (the one before it is closed first); `fallback`: a sniffed
    call list, given back as content if it is none."""
    if scope.st.call is not None:
        close_call(scope)
    call = kind()
    if fallback and isinstance(call, CallList | CallPythonic):
        call.fallback = True
    if isinstance(call, CallPythonic) and scope.fmt is not None and scope.fmt.bare_list:
        call.phase = pythonic.LIST  # the marker was the list's opening
    elif isinstance(call, CallElements):
        call.hold = True  # converted whole at its end while it is short (elements.py)
    scope.st.call = call
    return call


def close_call(scope: Scope) -> None:
    """The call ends (its closing marker, the next call, or the end of the output)."""
    call = scope.st.call
    if call is None:
        return
    scope.st.call = None
    match call:
        case CallParams():
            params.end(scope, call)
        case CallJson():
            json_args.end(scope, call)
        case CallList():
            call_list.end(scope, call)
        case CallPythonic():
            pythonic.end(scope, call)
        case CallGemma():
            gemma.end(scope, call)
        case CallElements():
            elements.end(scope, call)
        case CallHeld():
            held.end(scope, call)
        case CallVerbatim():
            pass  # nothing to close: the text was the arguments


def name_text(call: Call, text: str) -> None:
    """Text of the call's header (NAME)."""
    call.head = (call.head + text)[:HEAD_MAX]


# -- parameters: the PARAM_START / VALUE_START / PARAM_END actions, PKEY / PTYPE / PVALUE
# text. Only the kinds whose formats have such markers take them.


def param_start(call: Call) -> None:
    if isinstance(call, CallParams):
        params.param_start(call)


def key_text(call: Call, text: str) -> None:
    """A parameter's name (PKEY)."""
    if isinstance(call, CallParams):
        call.key = (call.key + text)[:HEAD_MAX]


def flag_text(call: Call, text: str) -> None:
    """A DSML parameter's `string="…"` flag (PTYPE)."""
    if isinstance(call, CallParams):
        call.flag = (call.flag + text)[:HEAD_MAX]


def value_start(scope: Scope, call: Call) -> None:
    match call:
        case CallParams():
            params.value_start(scope, call)
        case CallGemma():
            gemma.string_start(scope, call)


def param_end(scope: Scope, call: Call) -> None:
    match call:
        case CallParams():
            params.param_end(scope, call)
        case CallGemma():
            gemma.string_end(scope, call)


def cut_value(scope: Scope, call: Call) -> None:
    """The output ended inside a parameter's value: it is closed where it stopped (a
    Gemma string is closed by the call's end)."""
    if isinstance(call, CallParams):
        params.param_end(scope, call)
