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

Where things are: the entry points stay here (parser.py, serving.py for what a request
decides, quick.py for the common record's short path, render.py for events → OpenAI
deltas and messages); below them, by role: machine/ compiles a model's formats (spec.py)
and runs them (engine.py, lexer.py, prose.py); families/ holds every format's table and
the registry naming them (families/formats.py); arguments/ holds the tool calls'
argument scanners (scanners.py picks one by the kind of call); language/ is what all of
them share (grammar.py: what a format holds; state.py: what is kept between records;
events.py: what a feed says). At run time each sub-package imports only the ones listed
after it.
"""

from __future__ import annotations

from worker.core.parsers.arguments.calls import tool_call_id
from worker.core.parsers.families.formats import REASONING_FORMATS, TOOL_FORMATS
from worker.core.parsers.language.events import (
    Content,
    Event,
    Reasoning,
    ToolCallArgs,
    ToolCallStart,
)
from worker.core.parsers.language.state import ParserState
from worker.core.parsers.machine.engine import Fed, feed
from worker.core.parsers.machine.spec import ParserSpec, compile_parser
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
