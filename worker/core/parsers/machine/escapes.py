"""Escaped newlines recovered (MiniCPM-V, `ReasoningFormat.escaped_newlines`).

MiniCPM-V's tokenizer decodes a newline as the two characters `\\` `n` (its id 1639), so
vLLM 0.33's minicpmv parser turns `\\n`, `\\r` and `\\r\\n` back into a newline in content
and reasoning, leaving alone what is code or math: a run of backslashes longer than one
(`\\\\n` is a written backslash), the insides of `` `…` `` / ```` ```…``` ````, `$…$` / `$$…$$`
and `\\(…\\)` / `\\[…\\]`. Tool-call arguments are not touched.

Content and reasoning are two streams, each with its own place (`Unescape`: the marker that
ends the code or math span it is in, and the end of its text that the next text may still
change: a lone backslash, a backtick, a dollar, a run of backslashes). The reasoning stream
is settled when its record also says something else (content or a call), as vLLM settles
it; content at the end of the output. What is held is a few characters, plus a run of
backslashes capped at `RUN_MAX` (past it the run is text: no parity question is left).
"""

from __future__ import annotations

from worker.core.parsers.language.events import Content, Event, Reasoning
from worker.core.parsers.language.state import ParserState, Unescape

RUN_MAX = 64


def recover(st: ParserState, events: list[Event], final: bool) -> list[Event]:
    """The record's events with content and reasoning text recovered (tool calls as
    they are); text that may still change is held in `st.unescape`."""
    if not st.unescape:
        st.unescape = [Unescape(), Unescape()]
    content, reasoning = st.unescape
    settle = final or any(not isinstance(e, Reasoning) for e in events)
    last_r = max((i for i, e in enumerate(events) if isinstance(e, Reasoning)), default=-1)
    last_c = max((i for i, e in enumerate(events) if isinstance(e, Content)), default=-1)
    out: list[Event] = []
    for i, e in enumerate(events):
        if isinstance(e, Reasoning):
            text = _feed(reasoning, e.text, final=settle and i == last_r)
            if text:
                out.append(Reasoning(text))
            continue
        # Content or a call ends the reasoning before it, and a call ends the content:
        # what they held can no longer change and goes out first (the model's order).
        if reasoning.pending:
            out.append(Reasoning(_feed(reasoning, "", final=True)))
        if isinstance(e, Content):
            text = _feed(content, e.text, final=final and i == last_c)
            if text:
                out.append(Content(text))
            continue
        if content.pending:
            out.append(Content(_feed(content, "", final=True)))
        out.append(e)
    if settle and last_r < 0 and reasoning.pending:
        out.append(Reasoning(_feed(reasoning, "", final=True)))
    if final and last_c < 0 and content.pending:
        out.append(Content(_feed(content, "", final=True)))
    return out


def _feed(u: Unescape, text: str, final: bool) -> str:
    """One stream's next text, recovered; the end that may still change is held."""
    text = u.pending + text
    u.pending = ""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        rest = text[i : i + 4]
        if u.closing:
            marker = u.closing
            if text.startswith(marker, i):
                out.append(marker)
                i += len(marker)
                u.closing = ""
            elif not final and marker.startswith(text[i:]):
                u.pending = text[i:]
                break
            else:
                out.append(text[i])
                i += 1
            continue
        c = text[i]
        if c == "`" or c == "$":
            # A span's opener may still grow (`` ` `` → ```` ``` ````, `$` → `$$`).
            if not final and text[i:] in (("`", "``") if c == "`" else ("$",)):
                u.pending = text[i:]
                break
            if c == "`":
                span = "```" if text.startswith("```", i) else "`"
            else:
                span = "$$" if text.startswith("$$", i) else "$"
            out.append(span)
            i += len(span)
            u.closing = span
            continue
        if c != "\\":
            j = i + 1
            while j < n and text[j] not in "`$\\":
                j += 1
            out.append(text[i:j])
            i = j
            continue
        j = i + 1
        while j < n and text[j] == "\\":
            j += 1
        if j - i > 1:
            if not final and j == n and j - i <= RUN_MAX:
                u.pending = text[i:j]  # the run may grow: its length decides a `n`
                break
            out.append(text[i:j])
            i = j
            continue
        if not final and text[i:] in ("\\", "\\r", "\\r\\"):
            u.pending = text[i:]
            break
        if rest == "\\r\\n":
            out.append("\n")
            i += 4
        elif rest[:2] in ("\\n", "\\r"):
            out.append("\n")
            i += 2
        elif rest[:2] in ("\\(", "\\["):
            out.append(rest[:2])
            u.closing = "\\)" if rest[:2] == "\\(" else "\\]"
            i += 2
        else:
            out.append("\\")
            i += 1
    if final and u.pending:
        out.append(u.pending)
        u.pending = ""
    return "".join(out)
