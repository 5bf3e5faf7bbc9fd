"""Reasoning and tool-call parsing as a pure, table-driven streaming engine.

Per model (once): `spec = compile_parser(model.reasoning_parser, model.tool_parser, tok)`.
Per request: `tpl = open_parser(spec, chat_request, prompt_token_ids, request_id)`; the
parser path applies when `uses_parser(spec, tpl)`. Per choice: `st = for_choice(tpl, i)`,
kept in the choice's state (a msgspec Struct, bounded). Per record:
`fed = feed(spec, st, text, token_ids, final)` → `to_delta(fed.events, field)`; at the
end `finish_reason(st, engine_reason)`. Non-streaming: `parse_whole(spec, st, text, ids)`.
`text` must be detokenized with special tokens kept, so markers appear in it.
"""

from __future__ import annotations

from worker.core.parsers.args import tool_call_id
from worker.core.parsers.engine import Fed, ParserSpec, compile_parser, feed
from worker.core.parsers.events import Content, Event, Reasoning, ToolCallArgs, ToolCallStart
from worker.core.parsers.formats import REASONING_FORMATS, SWAP_ABSENT, SWAP_BLANK, TOOL_FORMATS
from worker.core.parsers.render import (
    REASONING,
    REASONING_CONTENT,
    Parsed,
    collect,
    to_delta,
    to_message,
)
from worker.core.parsers.serving import finish_reason, for_choice, open_parser, uses_parser
from worker.core.parsers.state import (
    FORCE_CONTENT,
    FORCED_CHOICE,
    HIDE_REASONING,
    MSG_CONTENT,
    ParserState,
)


def parse_whole(
    spec: ParserSpec, st: ParserState, text: str, token_ids: list[int] | None
) -> Parsed:
    """A whole output (`type = "response"`): the same engine, fed once with `final`."""
    fed = feed(spec, st, text, token_ids, final=True)
    fmt = spec.reasoning
    parsed = collect(
        fed.events,
        empty="" if fmt is not None and fmt.empty_as_text and st.reasoned else None,
        hide_reasoning=bool(st.flags & HIDE_REASONING),
        # vLLM answers a forced call with `content: ""` rather than null (§3.6).
        content_default="" if st.flags & FORCED_CHOICE else None,
    )
    if st.flags & FORCE_CONTENT and fmt is not None and not parsed.tool_calls:
        # vLLM's nemotron_v3: an answer that wrote only reasoning is given as content.
        answer = parsed.content
        if (fmt.swap == SWAP_BLANK and (answer is None or not answer.strip())) or (
            fmt.swap == SWAP_ABSENT and answer is None and not st.msg & MSG_CONTENT
        ):
            parsed.reasoning, parsed.content = answer, parsed.reasoning
    parsed.reasoning_tokens = st.reasoning_tokens
    parsed.hidden = fed.hidden
    return parsed


__all__ = [
    "REASONING",
    "REASONING_CONTENT",
    "REASONING_FORMATS",
    "TOOL_FORMATS",
    "Content",
    "Event",
    "Fed",
    "Parsed",
    "ParserSpec",
    "ParserState",
    "Reasoning",
    "ToolCallArgs",
    "ToolCallStart",
    "compile_parser",
    "feed",
    "finish_reason",
    "for_choice",
    "open_parser",
    "parse_whole",
    "to_delta",
    "to_message",
    "tool_call_id",
    "uses_parser",
]
