"""Text outside tool calls: content, reasoning, and the bodies of Harmony messages.

The engine routes here the text of the CONTENT, REASONING and FRAME states. What is
held, all bounded:

- whitespace-only content while a tool call may still follow (`ws`; vLLM drops it
  before a call), and the first character of the answer decides whether a call list
  opens (formats without an opening marker, tool_choice "required" / named);
- the reasoning's trailing whitespace (`rws`; vLLM strips it from the reasoning's end);
- the start of a reasoning block that may be its channel name (`head`, Gemma 4's
  `thought\\n`), and a message header until it is complete (`head`, Harmony).
"""

from __future__ import annotations

from worker.core.parsers.arguments import scanners
from worker.core.parsers.arguments.calls import header
from worker.core.parsers.families import frames
from worker.core.parsers.families.muse import MuseFrames
from worker.core.parsers.language.events import Content, Event, Reasoning, send_args
from worker.core.parsers.language.grammar import (
    ARGS,
    CONTENT,
    DROP,
    FRAME,
    GAP,
    PREAMBLE,
    REASONING,
    ReasoningFormat,
)
from worker.core.parsers.language.scope import Scope
from worker.core.parsers.language.state import (
    HIDE_REASONING,
    LEFT_TRIM,
    MSG_BEGUN,
    MSG_CONTENT,
    MSG_COUNTS,
    MSG_JOIN,
    MSG_NAMED,
    MSG_REASONING,
    MSG_SEEN,
    TOOLS_AUTO,
    TOOLS_NAMED,
    TOOLS_NONE,
    TOOLS_REQUIRED,
    Call,
    CallList,
    CallPythonic,
    CallVerbatim,
    ParserState,
)
from worker.core.parsers.machine import escapes

# Whitespace-only content is held while a tool call may follow (it is dropped then,
# as vLLM's engine drops the "\n\n" before a tool block); past this it is sent.
WS_HOLD_MAX = 256

# A message header (Harmony) longer than this is no header: its text becomes content.
# Real headers are a channel, a recipient and a content type (under 100 characters).
FRAME_MAX = 1024


# -- reasoning ----------------------------------------------------------------------------


def reasoning(scope: Scope, text: str) -> None:
    """Text in the REASONING state (outside message frames)."""
    st = scope.st
    rf = scope.spec.reasoning
    if rf is not None and rf.trim_segments:
        text = trimmed(scope, text)
        if text and not st.flags & HIDE_REASONING:
            scope.out.append(Reasoning(text))
        return
    if rf is not None and rf.prefix and not st.msg & MSG_NAMED:
        text = _prefix(scope, text, rf.prefix)
        if not text:
            return
    if st.flags & HIDE_REASONING:
        return
    if scope.spec.strip_reasoning and (st.rws or text[-1:].isspace()):
        _strip_trailing(scope, text)  # trailing whitespace to hold, or held to send
    else:
        scope.out.append(Reasoning(text))


def _prefix(scope: Scope, text: str, prefix: str) -> str:
    """The start of a reasoning block: its first line may name the channel
    (`thought\\n`), which is dropped. Held (in `head`) while it may still be that."""
    st = scope.st
    buf = st.head + text
    if len(buf) < len(prefix) and prefix.startswith(buf):
        st.head = buf
        return ""
    st.head = ""
    st.msg |= MSG_NAMED
    return buf[len(prefix) :] if buf.startswith(prefix) else buf


def prefix_done(scope: Scope) -> None:
    """The block ended while its start was held: the channel name alone (`thought`)
    is no reasoning, anything else is."""
    st = scope.st
    held, st.head = st.head, ""
    st.msg |= MSG_NAMED
    rf = scope.spec.reasoning
    if rf is not None and held != rf.prefix.rstrip("\n") and not st.flags & HIDE_REASONING:
        if scope.spec.strip_reasoning:
            _strip_trailing(scope, held)
        else:
            scope.out.append(Reasoning(held))


def _strip_trailing(scope: Scope, text: str) -> None:
    """Reasoning text, less its trailing whitespace, which waits in `rws` until more
    reasoning follows; the reasoning's end drops it (vLLM strips it)."""
    st = scope.st
    if not st.rws and not text[-1:].isspace():  # the common case: nothing to hold
        scope.out.append(Reasoning(text))
        return
    body = text.rstrip()
    if not body:
        st.rws += text
        if len(st.rws) > WS_HOLD_MAX:
            scope.out.append(Reasoning(st.rws))
            st.rws = ""
        return
    scope.out.append(Reasoning(st.rws + body if st.rws else body))
    st.rws = text[len(body) :]


def trimmed(scope: Scope, text: str) -> str:
    """melody's trimming (ReasoningFormat.trim_segments, Cohere): what of `text` goes
    out now. Trailing whitespace waits in `rws` (more text sends it, a SEGMENT marker or
    the end drops it, as melody trims each segment's end); after a TRIM_LEFT marker,
    leading whitespace is dropped until some text goes out."""
    st = scope.st
    buf = st.rws + text if st.rws else text
    st.rws = ""
    if st.flags & LEFT_TRIM:
        buf = buf.lstrip()
        if not buf:
            return ""
        st.flags &= ~LEFT_TRIM
    body = buf.rstrip()
    if len(buf) - len(body) > WS_HOLD_MAX:  # bounded: a long run goes out as it is
        return buf
    st.rws = buf[len(body) :]
    return body


def held_ws(scope: Scope, state: int) -> None:
    """The trailing whitespace held in `rws` is text of `state` after all (markup
    follows it: HELD_WS)."""
    st = scope.st
    ws, st.rws = st.rws, ""
    if state == CONTENT:
        _answer(scope, ws)
    elif state == REASONING and not st.flags & HIDE_REASONING:
        scope.out.append(Reasoning(ws))


# -- content ------------------------------------------------------------------------------


def content(scope: Scope, text: str) -> int:
    """Text in the CONTENT state; returns how much was used (less than all when a call
    list opened inside it: the rest is the list's)."""
    st = scope.st
    rf = scope.spec.reasoning
    if rf is not None and rf.trim_segments:
        body = trimmed(scope, text)
        if body:
            _answer(scope, body)  # (no sniffing format trims: all of it is used)
        return len(text)
    if rf is not None and rf.lstrip_newlines and not st.msg & MSG_BEGUN:
        body = text.lstrip("\n")
        if len(body) < len(text):
            st.msg |= MSG_CONTENT  # written, even if dropped (the swap rule)
        if not body:
            return len(text)
        st.msg |= MSG_BEGUN
        return len(text) - len(body) + _answer(scope, body)
    return _answer(scope, text)


def _answer(scope: Scope, text: str) -> int:
    st = scope.st
    fmt = scope.fmt
    keep = fmt is not None and fmt.keep_whitespace and st.mode == TOOLS_AUTO
    # Whitespace-only content is held while no other content was seen: it is dropped
    # if a call follows (or followed), as vLLM drops whitespace-only content with tool
    # calls; once there is real content, whitespace is content too.
    if st.mode != TOOLS_NONE and not keep and not st.started:
        stripped = text.lstrip()
        if not stripped:
            st.ws += text
            if len(st.ws) > WS_HOLD_MAX:
                scope.out.append(Content(st.ws))
                st.ws = ""
            return len(text)
        at = len(text) - len(stripped)
        if _sniff(scope, stripped[0], text[:at]):
            return at
        st.started = True
        if st.ws:
            text, st.ws = st.ws + text, ""
    else:
        st.started = True
    if swallows(scope):
        # The trailing whitespace waits: a marker that swallows it may follow.
        n = len(text)
        text, st.cws = st.cws + text, ""
        body = text.rstrip()
        if len(text) - len(body) <= WS_HOLD_MAX:
            text, st.cws = body, text[len(body) :]
        if text:
            scope.out.append(Content(text))
        return n
    scope.out.append(Content(text))
    return len(text)


def swallows(scope: Scope) -> bool:
    """Whether some marker of the format drops the whitespace before it."""
    rf, fmt = scope.spec.reasoning, scope.fmt
    return bool((rf is not None and rf.swallow_ws) or (fmt is not None and fmt.swallow_ws))


def held_cws(scope: Scope, literal: str, call_start: bool) -> None:
    """A marker ends the content: the whitespace held before it is dropped when the
    marker swallows it, else sent."""
    st = scope.st
    rf, fmt = scope.spec.reasoning, scope.fmt
    dropped = (rf is not None and literal in rf.swallow_ws) or (
        fmt is not None and literal in fmt.swallow_ws and (not call_start or st.mode == TOOLS_AUTO)
    )
    if not dropped:
        scope.out.append(Content(st.cws))
    st.cws = ""


def _sniff(scope: Scope, first: str, lead: str) -> bool:
    """The first character of the answer may open a call list (formats without an
    opening marker, and the constrained tool_choice modes); `lead` is the whitespace
    before it in this text."""
    st = scope.st
    if st.mode == TOOLS_NAMED:
        if first != "{":
            return False  # prose is no arguments object: it stays content
        st.started = True
        held, st.ws = st.ws + lead, ""  # (before the header, which drops `ws`)
        call = scanners.open_call(scope, CallVerbatim)
        header(scope, call, st.named)
        send_args(scope.out, call, held)  # vLLM's arguments keep the leading space
        st.state = ARGS
        return True
    kind: type[Call] | None = None
    if st.mode == TOOLS_REQUIRED:
        kind = CallList if first == "[" else None
    elif scope.fmt is not None and first in scope.fmt.sniff:
        kind = scope.fmt.args
    if kind is None:
        return False
    st.started = True
    call = scanners.open_call(scope, kind, fallback=True)
    # What it gives back if it is no call list: the whitespace before it too, whether it
    # was held from earlier records (`ws`) or came in this one (`lead`).
    if isinstance(call, CallList):
        call.raw, call.required = st.ws + lead, st.mode == TOOLS_REQUIRED
    elif isinstance(call, CallPythonic):
        call.raw = st.ws + lead
    st.ws = ""
    st.state = ARGS
    return True


# -- message frames (Harmony) ------------------------------------------------------------


def body(scope: Scope) -> None:
    """A header ended (`<|message|>`): its channel and recipient say what the body
    is. A header openai-harmony rejects drops the message, as its parser does."""
    st = scope.st
    head, st.head = st.head, ""
    seen = bool(st.msg & MSG_SEEN)
    st.msg = (st.msg | MSG_SEEN) & ~(MSG_COUNTS | MSG_JOIN)
    fr = scope.spec.frames
    muse = isinstance(fr, MuseFrames)
    glimmer = isinstance(fr, MuseFrames) and fr.glimmer
    if isinstance(fr, MuseFrames):
        found: frames.Header | None = fr.read(head)
    else:
        found = frames.read_header(head, role_known=not seen)
    if found is None:
        st.state = GAP
        return
    if found.counts:
        st.msg |= MSG_COUNTS
    kind = found.kind
    if kind == frames.KIND_CALL and scope.fmt is not None and muse:
        st.state = PREAMBLE  # a tool channel: its ATEM markup opens the calls
    elif kind == frames.KIND_CALL and scope.fmt is not None:
        call = scanners.open_call(scope, CallVerbatim)
        header(scope, call, found.name)
        st.state = ARGS
    elif kind == frames.KIND_REASONING and scope.spec.reasoning is not None:
        st.state = REASONING
        st.reasoned = True
        if st.msg & MSG_REASONING and (glimmer or not muse):  # Spark: as written
            st.msg |= MSG_JOIN
    elif kind == frames.KIND_CONTENT:
        st.state = CONTENT
        if st.msg & MSG_CONTENT and not muse:
            st.msg |= MSG_JOIN
    else:
        st.state = DROP  # no parser keeps it (vLLM drops it too)


def framed(scope: Scope, text: str) -> int:
    """Text of a Harmony header, reasoning or content body. Bodies are sent as
    written; a body continuing earlier text of its kind starts with "\\n" (vLLM
    joins a whole response's messages so)."""
    st = scope.st
    if st.state == FRAME:
        st.head += text
        if len(st.head) > FRAME_MAX:
            if between_messages(scope):
                st.head = st.head[-FRAME_MAX:]  # only a header's end counts (`to=NAME`)
            else:
                unframe(scope)  # no header: text after all
        return len(text)
    if not text:
        return 0
    if st.msg & MSG_JOIN:
        st.msg &= ~MSG_JOIN
        text = "\n" + text
    if st.state == REASONING:
        st.msg |= MSG_REASONING
        if not st.flags & HIDE_REASONING:
            scope.out.append(Reasoning(text))
    else:
        st.msg |= MSG_CONTENT
        st.started = True
        scope.out.append(Content(text))
    return len(text)


def between_messages(scope: Scope) -> bool:
    """Muse: text after a message and before the next header is nobody's (vLLM reads
    only messages, once there is one)."""
    return isinstance(scope.spec.frames, MuseFrames) and bool(scope.st.msg & MSG_SEEN)


def unframe(scope: Scope) -> None:
    """The header read so far is no header: its raw text is a content message."""
    st = scope.st
    head, st.head = st.head, ""
    st.state = CONTENT
    if st.msg & MSG_CONTENT:
        st.msg |= MSG_JOIN
    framed(scope, head)


# -- a feed's events rewritten --------------------------------------------------------------


def rewritten(rf: ReasoningFormat, st: ParserState, out: list[Event], final: bool) -> list[Event]:
    """A record's events as the reasoning format rewrites them: escaped newlines recovered
    (MiniCPM-V), reasoning given as content (a template's thinking region without its
    reasoning parser)."""
    if rf.escaped_newlines:
        out = escapes.recover(st, out, final)
    if rf.as_content:
        out = [Content(e.text) if isinstance(e, Reasoning) else e for e in out]
    return out
