"""The one streaming engine every format configures (reference/vllm-parsers.md §1.5, §7).

Per `feed(spec, state, text, token_ids, final)`:

1. Markers that are single added tokens are found by token id. Their text is located
   in `text` (the detokenized delta of those ids, special tokens kept) to split it;
   a marker whose text has not been released yet (UTF-8 or stop-string hold-back)
   waits in `state.pending`. A marker literal written as ordinary tokens is plain
   text, so prose that mentions `</think>` does not end reasoning. Other special
   tokens (EOS, `<|im_end|>`) are removed.
2. Between those, a literal lexer finds the multi-token markers of the current state,
   holding back a suffix that could still become one (at most the longest marker).
3. Each marker looks up `(state, marker)` in the table: a new state, actions (open
   or close a call or a parameter), maybe re-acting in the new state. A marker with
   no transition is text of the current state.
4. Text goes where the state says: content, reasoning, a call's name, its arguments
   (args.py converts non-JSON syntaxes as values complete), or nowhere.
5. With `final`, everything held is released and open calls are closed.

Formats made of messages (gpt-oss Harmony) add one step: a message's header is read
whole (bounded) up to its body marker, and what it says — channel, recipient — picks the
body's state (reasoning, content, a call, or nothing); frames.py reads headers.

Work per call is proportional to the new text and ids plus the (bounded) held text,
never to the output so far.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from worker.core.parsers import args, elements, frames, gemma
from worker.core.parsers.events import Content, Event, Reasoning
from worker.core.parsers.formats import (
    ARGS,
    ARGS_CALLS,
    ARGS_ELEMENTS,
    ARGS_GEMMA,
    ARGS_JSON,
    ARGS_PYTHONIC,
    ARGS_VERBATIM,
    CALL_END,
    CALL_START,
    CONTENT,
    DROP,
    FRAME,
    GAP,
    HEAD_DONE,
    HEAD_OPEN,
    HEAD_TEXT,
    N_STATES,
    NAME,
    NAME_END,
    PARAM_END,
    PARAM_START,
    PKEY,
    PTYPE,
    PVALUE,
    REASONING,
    REQUIRED_CALLS,
    VALUE_START,
    CallShape,
    Frames,
    ReasoningFormat,
    Table,
    ToolFormat,
    Transition,
    tool_format,
)
from worker.core.parsers.formats import REASONING_FORMATS as REASONING_FORMATS
from worker.core.parsers.state import (
    APPEND_THINK,
    HIDE_REASONING,
    MSG_BEGUN,
    MSG_CONTENT,
    MSG_COUNTS,
    MSG_JOIN,
    MSG_NAMED,
    MSG_REASONING,
    MSG_SEEN,
    NO_REASONING,
    TOOLS_AUTO,
    TOOLS_NAMED,
    TOOLS_NONE,
    TOOLS_REQUIRED,
    Call,
    ParserState,
)

# Marker token ids whose text has not appeared yet. The detokenizer releases a
# marker's text within a record or two; more than this many outstanding means the
# text was cut (a stop string), and the oldest are forgotten.
PENDING_MAX = 8

# Whitespace-only content is held while a tool call may follow (it is dropped then,
# as vLLM's engine drops the "\n\n" before a tool block); past this it is sent.
WS_HOLD_MAX = 256


# States inside a call's markup (a name, a key, a flag, a value).
CALL_STATES = frozenset((NAME, PKEY, PTYPE, PVALUE))

# A message header (Harmony) longer than this is no header: its text becomes content.
# Real headers are a channel, a recipient and a content type (under 100 characters).
FRAME_MAX = 1024

# The states of a message body (frames): the body's tokens may count as reasoning.
BODY_STATES = frozenset((CONTENT, REASONING, ARGS, DROP))


class Lexer(NamedTuple):
    """The text markers of one state: a leftmost-longest regex and what to hold back."""

    pattern: re.Pattern[str]
    prefixes: frozenset[str]  # proper prefixes of the markers (hold-back candidates)
    firsts: frozenset[str]  # first characters of the markers (hold-back fast path)
    longest: int  # longest prefix that can be held
    extendable: frozenset[str]  # markers that are prefixes of longer ones: wait on them


def _lexer(literals: Iterable[str]) -> Lexer | None:
    lits = sorted(set(literals), key=lambda s: (-len(s), s))
    if not lits:
        return None
    return Lexer(
        re.compile("|".join(re.escape(s) for s in lits)),
        frozenset(s[:k] for s in lits for k in range(1, len(s))),
        frozenset(s[0] for s in lits),
        max(len(s) for s in lits) - 1,
        frozenset(s for s in lits if any(o != s and o.startswith(s) for o in lits)),
    )


@dataclass(frozen=True, slots=True)
class Machine:
    """One compiled transition table with its per-state lexers."""

    transitions: Table
    # Per state: the markers matched on text when token ids are known (markers that
    # are single tokens are matched by id instead), and when they are not.
    lex_ids: tuple[Lexer | None, ...]
    lex_text: tuple[Lexer | None, ...]


def _machine(table: Table, token_markers: set[str]) -> Machine:
    by_state: list[set[str]] = [set() for _ in range(N_STATES)]
    for state, marker in table:
        by_state[state].add(marker)
    return Machine(
        table,
        tuple(_lexer(m - token_markers) for m in by_state),
        tuple(_lexer(m) for m in by_state),
    )


class TokenizerLike(Protocol):
    def get_added_tokens_decoder(self) -> Mapping[int, object]: ...


@dataclass(frozen=True, slots=True)
class ParserSpec:
    """A model's parsers compiled against its tokenizer; built once per model.

    `plain` serves requests without tool parsing, `auto` those with it; `bare` and
    `tools_only` are the same without the reasoning rules.
    """

    reasoning: ReasoningFormat | None
    tools: ToolFormat | None
    plain: Machine
    auto: Machine
    # The same without the reasoning rules (thinking switched off, `off_is_plain`).
    bare: Machine
    tools_only: Machine
    strip_reasoning: bool  # the reasoning format's `strip_trailing`
    marker_text: dict[int, str]  # token id → text, for markers and dropped specials
    marker_ids: frozenset[int]
    drop_ids: frozenset[int]  # special tokens that are not markers: removed
    special_markers: frozenset[str]  # markers that are special tokens: never shown as text
    think_ids: tuple[int | None, int | None]  # (start, end) ids for the prompt scan
    prompt_stop_ids: frozenset[int]  # other added tokens: the prompt scan stops there
    frames: Frames | None = None  # the output is messages with headers (Harmony)


def compile_parser(
    reasoning_parser: str | None,
    tool_parser: str | None,
    tokenizer: TokenizerLike,
    reasoning: ReasoningFormat | None = None,
    tools: ToolFormat | None = None,
) -> ParserSpec:
    """Compile the named formats (or given ones) for a tokenizer.

    Raises KeyError for an unknown parser name (the registry should check at load).
    """
    added: dict[str, tuple[int, bool]] = {}
    for token_id, token in tokenizer.get_added_tokens_decoder().items():
        content = str(getattr(token, "content", token))
        added[content] = (int(token_id), bool(getattr(token, "special", False)))
    if reasoning is None and reasoning_parser is not None:
        reasoning = REASONING_FORMATS[reasoning_parser]
    if tools is None and tool_parser is not None:
        tools = tool_format(tool_parser, set(added))
    framed = (reasoning.frames if reasoning else None) or (tools.frames if tools else None)
    plain: Table = dict(reasoning.table()) if reasoning else {}
    if framed is not None:
        plain = framed.table()  # the messages are read even when only calls are kept
    auto: Table = dict(plain)
    tools_only: Table = dict(tools.transitions) if tools is not None else {}
    if tools is not None:
        auto.update(tools.transitions)
        if reasoning is not None:
            # A block opener that the reasoning format names as an implicit end
            # closes reasoning and opens the block in one step.
            for marker in tools.opens() & set(reasoning.implicit_end):
                auto[(REASONING, marker)] = Transition(CONTENT, keep=True)
    markers = {m for (_, m) in auto}
    # Markers matched by token id when they are single tokens; `text_markers` are
    # matched on text even then (vLLM finds Gemma's `<|"|>` in the text).
    shown = set(tools.text_markers) if tools is not None else set()
    if reasoning is not None and reasoning.text_match:
        shown |= {reasoning.start, reasoning.end}
    token_markers = {m for m in markers if m in added and m not in shown}
    marker_text = {added[m][0]: m for m in token_markers}
    special_markers = frozenset(m for m in token_markers if added[m][1])
    drop = {
        i: text
        for text, (i, special) in added.items()
        if special and text not in markers and text not in shown
    }
    marker_text.update(drop)
    if framed is not None:
        # openai-harmony decodes every other token of a message, special or not, as
        # its text (`<|endoftext|>` inside a final message is content in vLLM too).
        drop = {}
    think_ids: tuple[int | None, int | None] = (None, None)
    if reasoning is not None:
        think_ids = (
            added[reasoning.start][0] if reasoning.start in added else None,
            added[reasoning.end][0] if reasoning.end in added else None,
        )
    return ParserSpec(
        reasoning,
        tools,
        _machine(plain, token_markers),
        _machine(auto, token_markers),
        _machine({}, token_markers),
        _machine(tools_only, token_markers),
        reasoning is not None and reasoning.strip_trailing,
        marker_text,
        frozenset(marker_text),
        frozenset(drop),
        special_markers,
        think_ids,
        frozenset(i for i, _ in added.values()) - {i for i in think_ids if i is not None},
        framed,
    )


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
) -> Fed:
    """Advance the parser by one delta: `text` is the detokenized text of `token_ids`
    (special tokens kept). `token_ids=None` matches every marker on text alone.
    `final` releases everything held; later feeds return nothing."""
    out: list[Event] = []
    if st.finished:
        return Fed(out)
    if st.flags & APPEND_THINK and spec.reasoning is not None:
        st.flags &= ~APPEND_THINK
        st.started = True
        out.append(Content(spec.reasoning.start))
    run = _Run(spec, st, out, text_only=token_ids is None, final=final)
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
        if (before == REASONING or st.state == REASONING) and st.flags & HIDE_REASONING:
            hidden = [True] * len(token_ids)
    else:
        hidden = run.marked(text, token_ids, final)
    if final:
        run.finish()
    return Fed(out, hidden)


class _Run:
    """One feed's working set (not state: everything lasting is in `st`)."""

    __slots__ = ("final", "lexers", "machine", "out", "spec", "st")

    def __init__(
        self,
        spec: ParserSpec,
        st: ParserState,
        out: list[Event],
        text_only: bool,
        final: bool = False,
    ) -> None:
        self.final = final
        self.spec = spec
        self.st = st
        self.out = out
        # Every mode with tool parsing reads the model's own format: its markup never
        # reaches content (tool_choice none, or a forced choice written natively).
        if st.flags & NO_REASONING:
            self.machine = spec.bare if st.mode == TOOLS_NONE else spec.tools_only
        else:
            self.machine = spec.plain if st.mode == TOOLS_NONE else spec.auto
        self.lexers = self.machine.lex_text if text_only else self.machine.lex_ids

    @property
    def fmt(self) -> ToolFormat | None:
        return self.spec.tools

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
            at = _locate(buf, pos, literal, sum(1 for _, t in marks[n:] if t == token_id))
            if at < 0:
                st.pending = [t for _, t in marks[n:]][-PENDING_MAX:]
                break
            before = st.state
            self.lex(buf, pos, at, boundary=True)
            if k >= 0:
                touched |= self._account(hidden, first_id, k, before)
            before = st.state
            self.marker(token_id, literal)
            if k >= 0:
                if hidden is not None and REASONING in (before, st.state):
                    hidden[k] = touched = True
                first_id = k + 1
            pos = at + len(literal)
        before = st.state
        self.lex(buf, pos, len(buf), boundary=final)
        touched |= self._account(hidden, first_id, len(ids), before)
        return hidden if touched else None

    def _account(self, hidden: list[bool] | None, lo: int, hi: int, before: int) -> bool:
        """Tokens [lo, hi) were processed from state `before` to the current state."""
        if hi <= lo:
            return False
        st = self.st
        if before == REASONING or (st.msg & MSG_COUNTS and before in BODY_STATES):
            st.reasoning_tokens += hi - lo
        if hidden is None or REASONING not in (before, self.st.state):
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

    def lex(self, buf: str, i: int, end: int, boundary: bool) -> None:
        st = self.st
        while i < end:
            state = st.state
            lx = self.lexers[state]
            m = lx.pattern.search(buf, i, end) if lx is not None else None
            if m is None:
                if boundary and self.final and state in CALL_STATES:
                    # The output ends inside a call's markup: a marker's beginning there
                    # (a cut `</parameter>`) is markup, not value text.
                    end -= self._holdback(lx, buf, i, end)
                cut = end if boundary else end - self._holdback(lx, buf, i, end)
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

    def _holdback(self, lx: Lexer | None, buf: str, i: int, end: int) -> int:
        held = 0
        if lx is not None:
            lo = max(i, end - lx.longest)
            for first in lx.firsts:  # usually one or two characters, e.g. "<"
                k = buf.find(first, lo, end)
                while k >= 0 and end - k > held:
                    if buf[k:end] in lx.prefixes:
                        held = end - k  # the earliest start is the longest hold
                        break
                    k = buf.find(first, k + 1, end)
        for token_id in self.st.pending:  # a marker's text split by a hold-back upstream
            literal = self.spec.marker_text[token_id]
            for k in range(max(i, end - len(literal) + 1), end - held):
                if literal.startswith(buf[k:end]):
                    held = end - k
                    break
        return held

    # -- 3) the table ------------------------------------------------------------------

    def transition(self, tr: Transition, literal: str) -> None:
        st = self.st
        prev = st.state
        act = tr.act
        call = st.call
        if act & PARAM_END and call is not None:
            if call.kind == ARGS_GEMMA:
                gemma.string_end(self, call)
            else:
                args.param_end(self, call)
        if prev == NAME and call is not None and (not act & CALL_END or act & NAME_END):
            args.name_done(self, call)
        if act & CALL_END:
            self.close_call()
        if act & CALL_START:
            fmt = self.spec.tools
            if fmt is not None:
                self.open_call(fmt.args, fallback=fmt.fallback)
            else:
                self.open_call(ARGS_JSON)
        if act & PARAM_START and st.call is not None:
            st.call.key, st.call.flag = "", ""
        if act & VALUE_START and st.call is not None:
            if st.call.kind == ARGS_GEMMA:
                gemma.string_start(self, st.call)
            else:
                args.value_start(self, st.call)
        if act & (HEAD_OPEN | HEAD_TEXT):
            st.head = literal if act & HEAD_OPEN else (st.head + literal)[:FRAME_MAX]
        if prev == REASONING and tr.to != REASONING and st.head and not self.spec.frames:
            self.reasoning_prefix_done()
        st.state = tr.to
        if act & HEAD_DONE:
            self.body()
        elif tr.to == GAP:
            st.msg &= ~(MSG_COUNTS | MSG_JOIN)
        if tr.to == REASONING:
            st.reasoned = True
            if prev != REASONING and self.spec.reasoning and self.spec.reasoning.prefix:
                st.msg &= ~MSG_NAMED  # a new block: its first line may be its name
        elif prev == REASONING:
            st.started = False  # the answer starts now: sniff and whitespace rules apply
            st.rws = ""
        if tr.keep:
            again = self.machine.transitions.get((st.state, literal))
            if again is not None and not again.keep:
                self.transition(again, literal)
            elif again is None and literal not in self.spec.special_markers:
                self.text(literal)

    def open_call(self, kind: int, fallback: bool = False) -> Call:
        if self.st.call is not None:
            self.close_call()
        call = Call(kind=kind, fallback=fallback)
        self.st.call = call
        return call

    def close_call(self) -> None:
        call = self.st.call
        if call is None:
            return
        self.st.call = None
        if call.kind == ARGS_CALLS:
            args.calls_end(self, call, self.calls_shape(call))
        elif call.kind == ARGS_PYTHONIC:
            args.pythonic_end(self, call)
        elif call.kind == ARGS_GEMMA:
            gemma.call_end(self, call)
        elif call.kind == ARGS_ELEMENTS:
            args.elements_end(self, call)
        else:
            args.call_end(self, call)

    def calls_shape(self, call: Call) -> CallShape:
        if call.required or self.spec.tools is None:
            return REQUIRED_CALLS
        return self.spec.tools.calls or REQUIRED_CALLS

    # -- 4) text -----------------------------------------------------------------------

    def text(self, text: str) -> int:
        """Route text by state; returns how much was used (less than all when the
        state changed inside it, e.g. a sniffed call list opening or falling back)."""
        st = self.st
        state = st.state
        if self.spec.frames is not None and state in (CONTENT, REASONING, FRAME):
            return self.framed(text)
        if state == CONTENT:
            return self.content(text)
        if state == REASONING:
            rf = self.spec.reasoning
            if rf is not None and rf.prefix and not st.msg & MSG_NAMED:
                used = len(text)
                text = self.reasoning_prefix(text, rf.prefix)
                if not text:
                    return used
            if st.flags & HIDE_REASONING:
                pass
            elif self.spec.strip_reasoning:
                self.reasoning(text)
            else:
                self.out.append(Reasoning(text))
            return len(text)
        call = st.call
        if call is None:
            return len(text)
        if state == ARGS:
            if call.kind == ARGS_JSON:
                args.json_args(self, call, text)
            elif call.kind == ARGS_CALLS:
                return args.calls(self, call, text, self.calls_shape(call))
            elif call.kind == ARGS_PYTHONIC:
                return args.pythonic(self, call, text)
            elif call.kind == ARGS_VERBATIM:
                args.verbatim(self, call, text)
            elif call.kind == ARGS_GEMMA:
                gemma.structure(self, call, text)
            elif call.kind == ARGS_ELEMENTS:
                elements.feed(self, call, text)
            # ARGS_PARAMS: the whitespace between parameters
        elif state == NAME:
            call.head = (call.head + text)[: args.HEAD_MAX]
        elif state == PKEY:
            call.key = (call.key + text)[: args.HEAD_MAX]
        elif state == PTYPE:
            call.flag = (call.flag + text)[: args.HEAD_MAX]
        elif state == PVALUE:
            if call.kind == ARGS_GEMMA:
                gemma.string(self, call, text)
            else:
                args.value(self, call, text)
        return len(text)

    # -- 4b) message frames (Harmony) ----------------------------------------------------

    def body(self) -> None:
        """A header ended (`<|message|>`): its channel and recipient say what the body
        is. A header openai-harmony rejects drops the message, as its parser does."""
        st = self.st
        head, st.head = st.head, ""
        seen = bool(st.msg & MSG_SEEN)
        st.msg = (st.msg | MSG_SEEN) & ~(MSG_COUNTS | MSG_JOIN)
        header = frames.read_header(head, role_known=not seen)
        if header is None:
            st.state = GAP
            return
        if header.counts:
            st.msg |= MSG_COUNTS
        kind = header.kind
        if kind == frames.KIND_CALL and self.spec.tools is not None:
            call = self.open_call(ARGS_VERBATIM)
            args.header(self, call, header.name)
            st.state = ARGS
        elif kind == frames.KIND_REASONING and self.spec.reasoning is not None:
            st.state = REASONING
            st.reasoned = True
            if st.msg & MSG_REASONING:
                st.msg |= MSG_JOIN
        elif kind == frames.KIND_CONTENT:
            st.state = CONTENT
            if st.msg & MSG_CONTENT:
                st.msg |= MSG_JOIN
        else:
            st.state = DROP  # no parser keeps it (vLLM drops it too)

    def framed(self, text: str) -> int:
        """Text of a Harmony header, reasoning or content body. Bodies are sent as
        written; a body continuing earlier text of its kind starts with "\n" (vLLM
        joins a whole response's messages so)."""
        st = self.st
        if st.state == FRAME:
            st.head += text
            if len(st.head) > FRAME_MAX:  # no header: text after all
                self.unframe()
            return len(text)
        if not text:
            return 0
        if st.msg & MSG_JOIN:
            st.msg &= ~MSG_JOIN
            text = "\n" + text
        if st.state == REASONING:
            st.msg |= MSG_REASONING
            if not st.flags & HIDE_REASONING:
                self.out.append(Reasoning(text))
        else:
            st.msg |= MSG_CONTENT
            st.started = True
            self.out.append(Content(text))
        return len(text)

    def unframe(self) -> None:
        """The header read so far is no header: its raw text is a content message."""
        st = self.st
        head, st.head = st.head, ""
        st.state = CONTENT
        if st.msg & MSG_CONTENT:
            st.msg |= MSG_JOIN
        self.framed(head)

    def reasoning_prefix(self, text: str, prefix: str) -> str:
        """The start of a reasoning block: its first line may name the channel
        (`thought\n`), which is dropped. Held (in `head`) while it may still be that."""
        st = self.st
        buf = st.head + text
        if len(buf) < len(prefix) and prefix.startswith(buf):
            st.head = buf
            return ""
        st.head = ""
        st.msg |= MSG_NAMED
        return buf[len(prefix) :] if buf.startswith(prefix) else buf

    def reasoning_prefix_done(self) -> None:
        """The block ended while its start was held: the channel name alone (`thought`)
        is no reasoning, anything else is."""
        st = self.st
        held, st.head = st.head, ""
        st.msg |= MSG_NAMED
        rf = self.spec.reasoning
        if rf is not None and held != rf.prefix.rstrip("\n") and not st.flags & HIDE_REASONING:
            if self.spec.strip_reasoning:
                self.reasoning(held)
            else:
                self.out.append(Reasoning(held))

    def reasoning(self, text: str) -> None:
        """Reasoning text, less its trailing whitespace, which waits in `rws` until more
        reasoning follows; the reasoning's end drops it (vLLM strips it)."""
        st = self.st
        if not st.rws and not text[-1:].isspace():  # the common case: nothing to hold
            self.out.append(Reasoning(text))
            return
        body = text.rstrip()
        if not body:
            st.rws += text
            if len(st.rws) > WS_HOLD_MAX:
                self.out.append(Reasoning(st.rws))
                st.rws = ""
            return
        self.out.append(Reasoning(st.rws + body if st.rws else body))
        st.rws = text[len(body) :]

    def content(self, text: str) -> int:
        st = self.st
        rf = self.spec.reasoning
        if rf is not None and rf.lstrip_newlines and not st.msg & MSG_BEGUN:
            body = text.lstrip("\n")
            if len(body) < len(text):
                st.msg |= MSG_CONTENT  # written, even if dropped (the swap rule)
            if not body:
                return len(text)
            st.msg |= MSG_BEGUN
            return len(text) - len(body) + self._content(body)
        return self._content(text)

    def _content(self, text: str) -> int:
        st = self.st
        fmt = self.spec.tools
        keep = fmt is not None and fmt.keep_whitespace and st.mode == TOOLS_AUTO
        # Whitespace-only content is held while no other content was seen: it is dropped
        # if a call follows (or followed), as vLLM drops whitespace-only content with
        # tool calls; once there is real content, whitespace is content too.
        if st.mode != TOOLS_NONE and not keep and not st.started:
            stripped = text.lstrip()
            if not stripped:
                st.ws += text
                if len(st.ws) > WS_HOLD_MAX:
                    self.out.append(Content(st.ws))
                    st.ws = ""
                return len(text)
            at = len(text) - len(stripped)
            if not st.started and self._sniff(stripped[0], text[:at]):
                return at
            st.started = True
            if st.ws:
                text, st.ws = st.ws + text, ""
        else:
            st.started = True
        self.out.append(Content(text))
        return len(text)

    def _sniff(self, first: str, lead: str) -> bool:
        """The first character of the answer may open a call list (formats without an
        opening marker, and the constrained tool_choice modes); `lead` is the
        whitespace before it in this text."""
        st = self.st
        if st.mode == TOOLS_NAMED:
            if first != "{":
                return False  # prose is no arguments object: it stays content
            st.started = True
            call = self.open_call(ARGS_VERBATIM)
            args.header(self, call, st.named)
            held, st.ws = st.ws + lead, ""
            args.verbatim(self, call, held)  # vLLM's arguments keep the leading space
            st.state = ARGS
            return True
        if st.mode == TOOLS_REQUIRED:
            kind = ARGS_CALLS if first == "[" else -1
        elif self.spec.tools is not None and first in self.spec.tools.sniff:
            kind = self.spec.tools.args
        else:
            kind = -1
        if kind < 0:
            return False
        st.started = True
        call = self.open_call(kind, fallback=True)
        call.raw, st.ws = st.ws, ""
        call.required = st.mode == TOOLS_REQUIRED
        st.state = ARGS
        return True

    def fall_back(self, text: str) -> None:
        """A sniffed block was no call list: its text is content after all."""
        st = self.st
        st.call = None
        st.state = CONTENT
        st.started = True
        if text:
            self.out.append(Content(text))

    # -- 5) the end --------------------------------------------------------------------

    def finish(self) -> None:
        st = self.st
        st.pending = []
        st.rws = ""
        if st.held:  # (not reached: a final feed lexes with boundary=True)
            held, st.held = st.held, ""
            self.lex(held, 0, len(held), boundary=True)
        if st.state == FRAME and st.head:
            # The output ended inside a header: vLLM gives that message's raw text as
            # content (openai-harmony cannot end there).
            self.unframe()
        if st.state == REASONING and st.head and not self.spec.frames:
            self.reasoning_prefix_done()
        if st.call is not None:
            if st.state == PVALUE and st.call.kind != ARGS_GEMMA:
                args.param_end(self, st.call)
            elif st.state == NAME:
                st.call.skip = True  # a name that never ended is no call
            self.close_call()
        if st.ws:
            if not st.calls:
                self.out.append(Content(st.ws))
            st.ws = ""
        st.finished = True


def _locate(buf: str, pos: int, literal: str, need: int) -> int:
    """Where a marker token's text is: the first of the last `need` occurrences.

    Occurrences beyond what the marker ids account for are the same literal written as
    ordinary tokens (plain text); the real markers are taken to be the later ones.
    """
    at = buf.find(literal, pos)
    if at < 0:
        return -1
    surplus = buf.count(literal, pos) - need
    while surplus > 0:
        at = buf.find(literal, at + len(literal))
        surplus -= 1
    return at
