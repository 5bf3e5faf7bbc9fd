"""What every argument scanner shares: a call's header (its name, id and index), the
header styles that say where the name is, and giving a sniffed block back as content.

A call's header goes out once (`ToolCallStart`), before any of its arguments; a call
that is suppressed (tool_choice none, parallel_tool_calls false, an unknown or missing
name) gets no header and so sends nothing (events.send_args).
"""

from __future__ import annotations

import hashlib
import html
import re

from worker.core.parsers.language.events import Content, ToolCallStart
from worker.core.parsers.language.grammar import (
    CONTENT,
    HEAD_ATTRS,
    HEAD_DOUBLED,
    HEAD_GEMMA,
    HEAD_KIMI,
    HEAD_MISTRAL,
    HEAD_PLAIN,
    ID_HASH,
    ID_MISTRAL,
    ID_NATIVE,
)
from worker.core.parsers.language.scope import Scope
from worker.core.parsers.language.state import (
    NO_TOOLS,
    SINGLE_CALL,
    TOOLS_SUPPRESS,
    CallBase,
    CallJson,
    CallList,
    CallPythonic,
)

# A call's name, a key, a DSML flag: longer text is cut (names are identifiers).
HEAD_MAX = 256

# A sniffed block (llama3_json "{", pythonic "[") is held back, to be given back as
# content if it is no call list, until its first call header; past this it is content.
RAW_MAX = 4096

# vLLM's prefix (`make_tool_call_id`, vllm/renderers/chat_utils/tool_call.py)
TOOL_CALL_ID_PREFIX = "chatcmpl-tool-"
_ID_HEX = 32  # vLLM's ids carry uuid4().hex: 32 hex digits
_MISTRAL_ID_LEN = 9  # mistral-common requires exactly 9 alphanumerics
_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

_KIMI_ID = re.compile(r"(.+):(\d+)")
_ATTRIBUTE = re.compile(r'([\w:-]+)="([^"]*)"')


def tool_call_id(request_id: str, choice: int, index: int, style: int = ID_HASH) -> str:
    """Deterministic tool-call id from (request_id, choice index, tool index)
    (docs/integrate/contract.md, "Guarantees"): the same input gives the same id on any
    worker and in replay."""
    digest = hashlib.sha256(f"{choice}:{index}:{request_id}".encode()).digest()
    if style == ID_MISTRAL:
        return "".join(_ALNUM[b % len(_ALNUM)] for b in digest[:_MISTRAL_ID_LEN])
    return TOOL_CALL_ID_PREFIX + digest.hex()[:_ID_HEX]


def header(scope: Scope, call: CallBase, name: str, native_id: str = "") -> bool:
    """Send a call's header once; False when the call is suppressed instead."""
    st = scope.st
    if call.skip:
        return False
    if st.mode == TOOLS_SUPPRESS:  # tool_choice "none", or no tools: parsed, not sent
        if st.flags & NO_TOOLS:
            st.ws = ""
        call.skip = True
        return False
    if not name or (st.flags & SINGLE_CALL and st.calls >= 1) or not _known(scope, name):
        # No name, parallel_tool_calls: false and one call was made, or a name the
        # format must find among the request's tools.
        call.skip = True
        return False
    index = st.calls
    st.calls += 1
    call.index, call.name = index, name
    fmt = scope.fmt
    style = fmt.ids if fmt is not None else ID_HASH
    if style == ID_NATIVE and native_id:
        call_id = native_id
    else:
        call_id = tool_call_id(st.request_id, st.choice, index, style)
    scope.out.append(ToolCallStart(index, call_id, name))
    st.ws = ""  # whitespace-only content before a call is not sent
    if isinstance(call, CallList | CallPythonic):
        call.fallback, call.raw = False, ""  # a call list after all: nothing to give back
    return True


def _known(scope: Scope, name: str) -> bool:
    fmt = scope.fmt
    if fmt is None or not fmt.known_names or not scope.tools:
        return True
    return scope.tools.known(name)


def attributes(text: str) -> dict[str, str]:
    """XML attributes (`tool="a&amp;b" index="1"`), values unescaped."""
    return {k: html.unescape(v) for k, v in _ATTRIBUTE.findall(text)}


def name_done(scope: Scope, call: CallBase) -> None:
    """The name (header text) of a marker-delimited call is complete: the format's
    header style says where the name is in it."""
    fmt = scope.fmt
    style = fmt.header if fmt is not None else HEAD_PLAIN
    head = call.head.strip()
    if style == HEAD_MISTRAL:
        head = head.replace("[ARGS]", "").strip()
    elif style == HEAD_GEMMA:
        head = head.partition(":")[2].strip() if ":" in head else head
    elif style == HEAD_ATTRS:
        head = attributes(head).get("tool", "")
    elif style == HEAD_DOUBLED:
        # A bare tool name `x` is offered to Muse as `x.*`, and it writes `x.x`.
        first, dot, rest = head.partition(".")
        if dot and first == rest and scope.tools.known(first):
            head = first
    if style != HEAD_KIMI:
        header(scope, call, head)
        return
    # Kimi: the header is the call's id, `functions.NAME:IDX` (or `NAME:IDX`); newer
    # models may write a bare counter, and then the request's tools say the name.
    m = _KIMI_ID.fullmatch(head)
    if m is not None:
        header(scope, call, m.group(1).rsplit(".", 1)[-1], native_id=head)
    elif head.isdigit():
        tools = scope.tools
        if len(tools) == 1:
            header(scope, call, tools.schemas[0].name, native_id=head)
        elif isinstance(call, CallJson):
            call.defer_id = head  # the arguments will say which tool (json_args.end)
        else:
            call.skip = True
    else:
        # A malformed header, e.g. `functions.invalid.0` (test_tool_cases_markers.py K08).
        call.skip = True


# -- sniffed blocks (call lists without an opening marker) ---------------------------------


def fall_back(scope: Scope, text: str) -> None:
    """A sniffed block was no call list: its text is content after all (after the
    whitespace held before it, when its opening was a marker)."""
    st = scope.st
    st.call = None
    st.state = CONTENT
    st.started = True
    text, st.ws = st.ws + text, ""
    if text:
        scope.out.append(Content(text))


def keep_raw(scope: Scope, call: CallList | CallPythonic, base: str, text: str) -> int:
    """All of `text` was read: a sniffed block keeps it until its first header (or gives
    it all back once that is too long to wait for)."""
    if call.fallback:
        call.raw = base + text
        if len(call.raw) > RAW_MAX:
            fall_back(scope, call.raw)
    return len(text)
