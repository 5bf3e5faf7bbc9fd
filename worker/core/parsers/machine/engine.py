"""The one streaming engine every format configures (as vLLM's vllm/parser/engine/).

Per `feed(spec, state, text, token_ids, final)`:

1. Markers that are single added tokens are found by token id. Their text is located
   in `text` (the detokenized delta of those ids, special tokens kept) to split it;
   a marker whose text has not been released yet (UTF-8 or stop-string hold-back)
   waits in `state.pending`. A marker literal written as ordinary tokens is plain
   text, so prose that mentions `</think>` does not end reasoning. Other special
   tokens (EOS, `<|im_end|>`) are removed.
2. Between those, a literal lexer finds the multi-token markers of the current state,
   holding back a suffix that could still become one (lexer.py).
3. Each marker looks up `(state, marker)` in the table: a new state, actions (open
   or close a call or a parameter), maybe re-acting in the new state. A marker with
   no transition is text of the current state.
4. Text goes where the state says: content or reasoning (prose.py), a call's name or
   arguments (the call's scanner, scanners.py), or nowhere.
5. With `final`, everything held is released and open calls are closed.

Formats made of messages (gpt-oss Harmony) add one step: a message's header is read
whole (bounded) up to its body marker, and what it says — channel, recipient — picks the
body's state (reasoning, content, a call, or nothing); frames.py reads headers.

Work per call is proportional to the new text and ids plus the (bounded) held text,
never to the output so far.
"""

from __future__ import annotations

from typing import NamedTuple

from worker.core.parsers.arguments import (
    call_list,
    elements,
    gemma,
    held,
    json_args,
    params,
    pythonic,
    scanners,
)
from worker.core.parsers.arguments.calls import name_done
from worker.core.parsers.arguments.tools import NO_TOOLS, ToolTable
from worker.core.parsers.language.events import Content, Event, Reasoning, send_args
from worker.core.parsers.language.grammar import (
    ARGS,
    CALL_END,
    CALL_START,
    CONTENT,
    DROP,
    DROP_WS,
    FRAME,
    GAP,
    HEAD_DONE,
    HEAD_FLUSH,
    HEAD_OPEN,
    HEAD_TEXT,
    HEADER,
    HELD_WS,
    NAME,
    NAME_END,
    PARAM_END,
    PARAM_START,
    PKEY,
    PTYPE,
    PVALUE,
    REASONING,
    SEGMENT,
    TRIM_LEFT,
    VALUE_START,
    Transition,
)
from worker.core.parsers.language.scope import Scope
from worker.core.parsers.language.state import (
    ALT_TOOLS,
    APPEND_THINK,
    HIDE_REASONING,
    LEFT_TRIM,
    MSG_COUNTS,
    MSG_JOIN,
    MSG_NAMED,
    NO_REASONING,
    THINK_OFF,
    TOOLS_NONE,
    CallElements,
    CallGemma,
    CallHeld,
    CallJson,
    CallList,
    CallParams,
    CallPythonic,
    CallVerbatim,
    ParserState,
)
from worker.core.parsers.machine import prose
from worker.core.parsers.machine.lexer import holdback, locate
from worker.core.parsers.machine.spec import ParserSpec

# Marker token ids whose text has not appeared yet. The detokenizer releases a
# marker's text within a record or two; more than this many outstanding means the
# text was cut (a stop string), and the oldest are forgotten.
PENDING_MAX = 8

# States inside a call's markup (a name, a key, a flag, a value).
CALL_STATES = frozenset((NAME, PKEY, PTYPE, PVALUE))

# The states of a message body (frames): the body's tokens may count as reasoning.
BODY_STATES = frozenset((CONTENT, REASONING, ARGS, DROP))
# include_reasoning: false hides the logprobs of the tokens read in these states: the
# reasoning, and a message header (Harmony's `<|start|>assistant<|channel|>analysis…`,
# markup that is neither reasoning text nor the answer's).
_HIDDEN = frozenset((REASONING, FRAME))


class Fed(NamedTuple):
    """What one `feed` produced.

    `hidden` is set only when the request hides reasoning (include_reasoning: false)
    and some of this feed's tokens were reasoning: one flag per token id, True for
    tokens whose logprobs must not be sent.
    """

    events: list[Event]
    hidden: list[bool] | None = None


def feed(
    spec: ParserSpec,
    st: ParserState,
    text: str,
    token_ids: list[int] | None,
    final: bool = False,
    tools: ToolTable | None = None,
) -> Fed:
    """Advance the parser by one delta: `text` is the detokenized text of `token_ids`
    (special tokens kept). `token_ids=None` matches every marker on text alone.
    `final` releases everything held; later feeds return nothing. `tools` is the
    request's tool table (the core's request tables); None reads `st.tools`, for a state
    that still carries them (one opened by `Parser.open` and fed directly)."""
    out: list[Event] = []
    if st.finished:
        return Fed(out)
    if st.flags & ALT_TOOLS and spec.variant is not None:
        spec = spec.variant  # the request picked the tool format's variant
    if st.flags & APPEND_THINK and spec.reasoning is not None:
        st.flags &= ~APPEND_THINK
        st.started = True
        out.append(Content(spec.reasoning.start))
    if tools is None:
        tools = ToolTable(st.tools) if st.tools else NO_TOOLS
    run = _Run(spec, st, out, tools, text_only=token_ids is None, final=final)
    hidden: list[bool] | None = None
    if token_ids is None:
        buf = st.held + text if st.held else text
        st.held = ""
        run.lex(buf, 0, len(buf), boundary=final)
    elif not st.pending and spec.marker_ids.isdisjoint(token_ids):
        before = st.state
        buf = st.held + text if st.held else text
        st.held = ""
        run.lex(buf, 0, len(buf), boundary=final)
        if before == REASONING or (st.msg & MSG_COUNTS and before in BODY_STATES):
            st.reasoning_tokens += len(token_ids)
        if st.flags & HIDE_REASONING and (before in _HIDDEN or st.state in _HIDDEN):
            hidden = [True] * len(token_ids)
    else:
        hidden = run.marked(text, token_ids, final)
    if final:
        run.finish()
    rf = spec.reasoning
    if rf is not None and (rf.escaped_newlines or rf.as_content):
        out[:] = prose.rewritten(rf, st, out, final)
    return Fed(out, hidden)


class _Run(Scope):
    """One feed's working set (not state: everything lasting is in `st`)."""

    __slots__ = ("final", "lexers", "machine")

    def __init__(
        self,
        spec: ParserSpec,
        st: ParserState,
        out: list[Event],
        tools: ToolTable,
        text_only: bool,
        final: bool = False,
    ) -> None:
        self.spec = spec
        self.st = st
        self.out = out
        self.tools = tools
        self.fmt = spec.tools
        self.final = final
        # Every mode with tool parsing reads the model's own format: its markup never
        # reaches content (tool_choice none, or a forced choice written natively).
        if st.flags & NO_REASONING:
            self.machine = spec.bare if st.mode == TOOLS_NONE else spec.tools_only
        else:
            self.machine = spec.plain if st.mode == TOOLS_NONE else spec.auto
        self.lexers = self.machine.lex_text if text_only else self.machine.lex_ids

    # -- 1) markers by token id --------------------------------------------------------

    def marked(self, text: str, ids: list[int], final: bool) -> list[bool] | None:
        spec, st = self.spec, self.st
        marks = [(-1, t) for t in st.pending]
        marks += [(k, t) for k, t in enumerate(ids) if t in spec.marker_ids]
        st.pending = []
        buf = st.held + text if st.held else text
        st.held = ""
        hide = bool(st.flags & HIDE_REASONING)
        hidden = [False] * len(ids) if hide else None
        touched = False
        pos = 0
        first_id = 0  # first id of the current segment
        for n, (k, token_id) in enumerate(marks):
            literal = spec.marker_text[token_id]
            at = locate(buf, pos, literal, sum(1 for _, t in marks[n:] if t == token_id))
            if at < 0:
                st.pending = [t for _, t in marks[n:]][-PENDING_MAX:]
                break
            before = st.state
            self.lex(
                buf, pos, at, boundary=True, last=final and self._only_drops(buf, at, marks[n:])
            )
            if k >= 0:
                touched |= self._account(hidden, first_id, k, before)
            before = st.state
            self.marker(token_id, literal)
            if k >= 0:
                if hidden is not None and (before in _HIDDEN or st.state in _HIDDEN):
                    hidden[k] = touched = True
                first_id = k + 1
            pos = at + len(literal)
        before = st.state
        self.lex(buf, pos, len(buf), boundary=final)
        touched |= self._account(hidden, first_id, len(ids), before)
        return hidden if touched else None

    def _only_drops(self, buf: str, at: int, rest: list[tuple[int, int]]) -> bool:
        """Whether only dropped specials (EOS, …) follow `at` to the end of the text: the
        text before them is then where the output ends."""
        spec = self.spec
        for _, token_id in rest:
            literal = spec.marker_text[token_id]
            if token_id not in spec.drop_ids or not buf.startswith(literal, at):
                return False
            at += len(literal)
        return at == len(buf)

    def _account(self, hidden: list[bool] | None, lo: int, hi: int, before: int) -> bool:
        """Tokens [lo, hi) were processed from state `before` to the current state."""
        if hi <= lo:
            return False
        st = self.st
        if before == REASONING or (st.msg & MSG_COUNTS and before in BODY_STATES):
            st.reasoning_tokens += hi - lo
        if hidden is None or not (before in _HIDDEN or self.st.state in _HIDDEN):
            return False
        hidden[lo:hi] = [True] * (hi - lo)
        return True

    def marker(self, token_id: int, literal: str) -> None:
        if token_id in self.spec.drop_ids:
            return
        tr = self.machine.transitions.get((self.st.state, literal))
        if tr is not None:
            self.transition(tr, literal)
        elif literal not in self.spec.special_markers or self.spec.frames is not None:
            # (In a Harmony body every token but its end is text, special or not.)
            self.text(literal)

    # -- 2) markers on text ------------------------------------------------------------

    def lex(self, buf: str, i: int, end: int, boundary: bool, last: bool | None = None) -> None:
        """Text `buf[i:end]`: `boundary`, nothing after it can extend a marker in it (a
        marker id or the output's end follows); `last` (default: `boundary` in a final
        feed), the output ends there."""
        st = self.st
        if last is None:
            last = boundary and self.final
        while i < end:
            state = st.state
            lx = self.lexers[state]
            m = lx.pattern.search(buf, i, end) if lx is not None else None
            if m is None:
                if last and state in CALL_STATES:
                    # The output ends inside a call's markup: a marker's beginning there
                    # (a cut `</parameter>`) is markup, not value text.
                    end -= holdback(lx, buf, i, end, st.pending, self.spec.marker_text)
                cut = end
                if not boundary:
                    cut -= holdback(lx, buf, i, end, st.pending, self.spec.marker_text)
                used = self.text(buf[i:cut]) if cut > i else 0
                if i + used < cut and st.state != state:
                    i += used  # the state changed inside the text: lex the rest anew
                    continue
                if cut < end:
                    st.held = buf[cut:end]
                return
            at = m.start()
            literal = m.group()
            used = self.text(buf[i:at]) if at > i else 0
            if i + used < at and st.state != state:
                i += used
                continue
            if not boundary and m.end() == end and lx is not None and literal in lx.extendable:
                st.held = buf[at:end]  # a longer marker may still follow
                return
            tr = self.machine.transitions[(st.state, literal)]
            self.transition(tr, literal)
            i = m.end()

    # -- 3) the table ------------------------------------------------------------------

    def transition(self, tr: Transition, literal: str) -> None:
        st = self.st
        prev = st.state
        if prev == CONTENT and tr.to == REASONING:
            rf = self.spec.reasoning
            if rf is not None and (
                (rf.opens_once and st.reasoned) or (rf.off_hides and not st.flags & THINK_OFF)
            ):
                # The one block is over (or, MiniCPM-V thinking, the grammar has no way
                # back into reasoning): the marker is text.
                self.text(literal)
                return
        act = tr.act
        call = st.call
        if st.cws and prev == CONTENT:
            prose.held_cws(self, literal, bool(act & CALL_START))
        if act & PARAM_END and call is not None:
            scanners.param_end(self, call)
        if prev == NAME and call is not None and (not act & CALL_END or act & NAME_END):
            name_done(self, call)
        if act & CALL_END:
            if isinstance(call, CallHeld):
                call.close = literal  # (given back with the block if it is no call)
            scanners.close_call(self)
        if act & SEGMENT:
            st.rws = ""  # melody drops a segment's trailing whitespace (Cohere)
        elif act & HELD_WS:
            st.flags &= ~LEFT_TRIM  # (markup is text to melody's trims: the left one ends)
            if st.rws:
                prose.held_ws(self, prev)
        if act & TRIM_LEFT:
            st.flags |= LEFT_TRIM
        if act & DROP_WS:
            st.ws = ""  # the held whitespace-only content before a wrapper is not content
        if act & CALL_START:
            # (Only tool tables start calls, so the format is there.)
            fmt = self.fmt
            kind = fmt.args if fmt is not None else CallJson
            opened = scanners.open_call(self, kind, fallback=fmt is not None and fmt.fallback)
            if isinstance(opened, CallHeld):
                opened.head = literal
        if act & PARAM_START and st.call is not None:
            scanners.param_start(st.call)
        if act & VALUE_START and st.call is not None:
            scanners.value_start(self, st.call)
        if act & (HEAD_OPEN | HEAD_TEXT):
            st.head = literal if act & HEAD_OPEN else (st.head + literal)[: prose.FRAME_MAX]
        if prev == REASONING and tr.to != REASONING and st.head and not self.spec.frames:
            prose.prefix_done(self)
        st.state = tr.to
        if prev == HEADER and st.head and self._keeps_header():
            head, st.head = st.head, ""
            if act & HEAD_FLUSH:
                self.text(head)
        if act & HEAD_DONE:
            prose.body(self)
        elif tr.to == GAP:
            st.msg &= ~(MSG_COUNTS | MSG_JOIN)
        if tr.to == REASONING:
            st.reasoned = True
            if prev != REASONING and self.spec.reasoning and self.spec.reasoning.prefix:
                st.msg &= ~MSG_NAMED  # a new block: its first line may be its name
        elif prev == REASONING:
            st.started = False  # the answer starts now: sniff and whitespace rules apply
            rf = self.spec.reasoning
            if rf is None or not rf.trim_segments:  # (those drop it at SEGMENT markers)
                st.rws = ""
        if tr.keep:
            again = self.machine.transitions.get((st.state, literal))
            if again is not None and not again.keep:
                self.transition(again, literal)
            elif again is None and literal not in self.spec.special_markers:
                self.text(literal)

    # -- 4) text -----------------------------------------------------------------------

    def text(self, text: str) -> int:
        """Route text by state; returns how much was used (less than all when the
        state changed inside it, e.g. a sniffed call list opening or falling back)."""
        st = self.st
        state = st.state
        if self.spec.frames is not None and state in (CONTENT, REASONING, FRAME):
            return prose.framed(self, text)
        if state == CONTENT:
            return prose.content(self, text)
        if state == REASONING:
            rf = self.spec.reasoning
            if (
                rf is not None and ((rf.prefix and not st.msg & MSG_NAMED) or rf.trim_segments)
            ) or (self.spec.strip_reasoning and (st.rws or text[-1:].isspace())):
                prose.reasoning(self, text)  # a channel name to drop, or whitespace to hold
            elif not st.flags & HIDE_REASONING:
                self.out.append(Reasoning(text))  # the common case, kept inline
            return len(text)
        call = st.call
        if call is None:
            if state == HEADER and self._keeps_header():
                st.head += text
                if len(st.head) > prose.FRAME_MAX:
                    # No function name is this long: the header is content after all
                    # (held no longer, so the state stays bounded).
                    head, st.head = st.head, ""
                    st.state = CONTENT
                    prose.content(self, head)
            return len(text)
        if state == ARGS:
            # The call's own scanner (scanners.py lists them), chosen by the call's kind:
            # matched here, as this is the path of every record inside a call.
            match call:
                case CallList():
                    return call_list.feed(self, call, text)
                case CallVerbatim():
                    # A Harmony call's body or a named tool_choice's output: all of it
                    # is the arguments, as vLLM returns it (constrained decoding makes it
                    # one JSON object; nothing after it is dropped).
                    send_args(self.out, call, text)
                case CallJson():
                    return json_args.feed(self, call, text)
                case CallPythonic():
                    return pythonic.feed(self, call, text)
                case CallElements():
                    return elements.feed(self, call, text)
                case CallGemma():
                    return gemma.feed(self, call, text)
                case CallHeld():
                    return held.feed(self, call, text)
                case CallParams():
                    pass  # the whitespace between parameters
            return len(text)
        if state == PVALUE:
            match call:
                case CallParams():
                    params.value(self, call, text)
                case CallGemma():
                    gemma.string(self, call, text)
        elif state == NAME:
            scanners.name_text(call, text)
        elif state == PKEY:
            scanners.key_text(call, text)
        elif state == PTYPE:
            scanners.flag_text(call, text)
        return len(text)

    def _keeps_header(self) -> bool:
        """Formats whose output starts in a message header (Inkling) keep its text: it
        is content if no block kind follows it."""
        rf = self.spec.reasoning
        return rf is not None and rf.initial == HEADER

    # -- 5) the end --------------------------------------------------------------------

    def finish(self) -> None:
        st = self.st
        st.pending = []
        st.rws = ""
        if st.held:  # (not reached: a final feed lexes with boundary=True)
            held, st.held = st.held, ""
            self.lex(held, 0, len(held), boundary=True)
        if st.state == FRAME and st.head and not prose.between_messages(self):
            # The output ended inside a header: vLLM gives that message's raw text as
            # content (openai-harmony cannot end there; Muse output without messages).
            prose.unframe(self)
        if st.state == REASONING and st.head and not self.spec.frames:
            prose.prefix_done(self)
        if st.state == HEADER and st.head and self._keeps_header():
            head, st.head = st.head, ""
            st.state = CONTENT
            self.text(head)  # a header no block kind followed is content (Inkling)
        if st.call is not None:
            if st.state == PVALUE:
                scanners.cut_value(self, st.call)
            elif st.state == NAME:
                st.call.skip = True  # a name that never ended is no call
            scanners.close_call(self)
        if st.cws:  # (vLLM's output ends without the EOS text: nothing swallows it)
            self.out.append(Content(st.cws))
            st.cws = ""
        if st.ws:
            if not st.calls:
                self.out.append(Content(st.ws))
            st.ws = ""
        st.finished = True
