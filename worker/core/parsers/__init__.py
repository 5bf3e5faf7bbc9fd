"""Reasoning and tool-call parsing as a pure, table-driven streaming engine.

Callers use one object per model, `Parser` (parser.py):

    parser = Parser.compile(model.reasoning_parser, model.tool_parser, tok,
                            reasoning_field=…, strict=…)
    template = parser.open(chat_request, prompt_token_ids, request_id)  # None: no parser
    st = parser.for_choice(template, i)          # kept in the choice's state (bounded)
    parsed = parser.feed(st, text, token_ids, final)  # per record: .delta, .hidden
    reason = parser.finish(st, engine_reason)                           # at the end
    whole = parser.whole(template, i, text, token_ids, engine_reason)   # non-streaming

`text` must be detokenized with special tokens kept, so markers appear in it. The
functions behind it (`compile_parser`, `open_parser`, `uses_parser`, `for_choice`,
`feed`, `to_delta`, `finish_reason`, `parse_whole`, `to_message`) stay exported for the
callers that still run them one by one.

Where things are: formats.py names every format (the tables are in reasoning_formats.py,
json_formats.py, markup_formats.py; grammar.py says what a format holds); spec.py
compiles them for a tokenizer; engine.py runs one feed, lexer.py matches markers,
prose.py routes content and reasoning, scanners.py picks the argument scanner of a call
(json_args, params, call_list, pythonic, gemma, elements); state.py is what is kept
between records; render.py turns events into OpenAI deltas and messages.
"""

from __future__ import annotations

from worker.core.parsers.calls import tool_call_id
from worker.core.parsers.engine import Fed, feed
from worker.core.parsers.events import Content, Event, Reasoning, ToolCallArgs, ToolCallStart
from worker.core.parsers.formats import REASONING_FORMATS, TOOL_FORMATS
from worker.core.parsers.parser import ParsedDelta, ParsedMessage, Parser, parse_whole
from worker.core.parsers.render import (
    REASONING,
    REASONING_CONTENT,
    Parsed,
    collect,
    to_delta,
    to_message,
)
from worker.core.parsers.serving import finish_reason, for_choice, open_parser, uses_parser
from worker.core.parsers.spec import ParserSpec, compile_parser
from worker.core.parsers.state import ParserState

__all__ = [
    "REASONING",
    "REASONING_CONTENT",
    "REASONING_FORMATS",
    "TOOL_FORMATS",
    "Content",
    "Event",
    "Fed",
    "Parsed",
    "ParsedDelta",
    "ParsedMessage",
    "Parser",
    "ParserSpec",
    "ParserState",
    "Reasoning",
    "ToolCallArgs",
    "ToolCallStart",
    "collect",
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
