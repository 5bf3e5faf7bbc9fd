"""The parser's state: plain data inside the request state (one per choice).

Bounded by construction: no copy of the output is kept. What is held is at most
- `held`: the text after the last decision that could still become a marker
  (shorter than the longest marker of the current state);
- `pending`: marker token ids whose text the detokenizer has not released yet
  (capped at `PENDING_MAX`);
- `ws`: whitespace-only content waiting to see whether a tool call follows (capped);
- `rws`: the reasoning's trailing whitespace, waiting to see whether reasoning goes on
  (capped);
- `head`: one message header (Harmony), capped;
- in `Call`: the piece of one tool call that is not final yet (a name, one parameter
  value that must be converted whole, the head of a call whose name comes after its
  arguments). That is bounded by one call, never by the generation.

Field order is the msgpack layout (`array_like`); new fields go at the end with
defaults (msgspec evolution rules), as in `core/state.py`.
"""

from __future__ import annotations

import msgspec

# Tool modes (ParserState.mode), decided once from the request (serving.tool_mode).
TOOLS_NONE = 0  # no tool parsing: reasoning split only
TOOLS_AUTO = 1  # the model's own tool-call format
TOOLS_REQUIRED = 2  # output is `[{"name": …, "parameters": {…}}, …]` (constrained decoding)
TOOLS_NAMED = 3  # output is the named function's arguments object itself
# tool_choice "none" or no tools: the model's format is still parsed, so its markup never
# reaches content, and the calls are dropped (vLLM 0.33's engine parsers do the same).
TOOLS_SUPPRESS = 4

# ParserState.flags
HIDE_REASONING = 1  # include_reasoning: false
SINGLE_CALL = 2  # parallel_tool_calls: false
# tool_choice named a function (whichever output shape is parsed): the finish reason
# stays the engine's, as OpenAI reports a forced named call.
NAMED_CHOICE = 4
# tool_choice "required" or named: a whole response's content is "" rather than null.
FORCED_CHOICE = 8
# TOOLS_SUPPRESS because the request has no tools: vLLM parses such calls and drops them
# afterwards, so whitespace before one goes as before a call; with tools and "none" the
# calls are never made and that whitespace stays content.
NO_TOOLS = 16
# chat_template_kwargs switched thinking off for a format whose think tags are then text
# (ReasoningFormat.off_is_plain): the request is parsed without the reasoning rules.
NO_REASONING = 32
# ReasoningFormat.append: the start marker the template wrote is still to be sent as the
# first content.
APPEND_THINK = 64
# The request asks for content even when the answer wrote only reasoning
# (ReasoningFormat.swap: `force_nonempty_content: true` or `enable_thinking: false`).
FORCE_CONTENT = 128


# ParserState.msg (message frames)
MSG_COUNTS = 1  # the current body's tokens are reasoning tokens
MSG_SEEN = 2  # a header was read: later headers name their role
MSG_REASONING = 4  # reasoning text was sent
MSG_CONTENT = 8  # content text was sent
MSG_JOIN = 16  # the current body continues earlier text of its kind: "\n" first
# (Also outside frames: MSG_CONTENT once content was written, even if it was dropped by
# ReasoningFormat.lstrip_newlines; MSG_BEGUN once content got past those newlines.)
MSG_BEGUN = 32
MSG_NAMED = 64  # the reasoning block's first line was read (ReasoningFormat.prefix)


class ToolSchema(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    """What the parser needs from one request tool: its name and parameter types.

    `types` maps a parameter to its JSON Schema type ("" when not declared), and is
    only filled for formats that convert arguments (XML, DSML) or infer names (Kimi).
    """

    name: str
    types: dict[str, str] = {}


class Call(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    """The tool call (or, for JSON and pythonic lists, the block of calls) being parsed."""

    kind: int  # how argument text becomes JSON (formats.ARGS_*)
    head: str = ""  # name / header text read so far
    index: int = -1  # OpenAI index once the header is out; -1 before
    skip: bool = False  # suppressed: parallel_tool_calls false, malformed header, bad value
    held: str = ""  # argument text not sendable yet
    phase: int = 0  # scanner phase (args.py: J_*, C_*, Y_*, or a parameter's P_LEAD)
    depth: int = 0  # bracket depth inside the current value
    quote: str = ""  # inside a string literal: its quote character
    esc: bool = False  # after a backslash inside a string
    key: str = ""  # JSON key / parameter name being read; Kimi: the deferred call's id
    role: int = 0  # what the current value is (args.ROLE_*); Kimi: name to infer
    count: int = 0  # parameters / fragments sent for the current call (separators, "{}")
    flag: str = ""  # a DSML parameter's `string="…"` text
    raw: str = ""  # block text kept for the content fallback (sniffed blocks only)
    name: str = ""  # the call's name once known
    args: bool = False  # an arguments key was seen (JSON lists)
    fallback: bool = False  # `raw` is kept: no header yet in a sniffed block
    required: bool = False  # the `[{"name", "parameters"}, …]` of tool_choice "required"


class ParserState(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    """Per-choice parser state; `serving.open_parser` builds it, `engine.feed` advances it."""

    state: int = 0  # engine state (formats.CONTENT, REASONING, …)
    mode: int = TOOLS_NONE
    flags: int = 0
    held: str = ""
    pending: list[int] = []
    started: bool = False  # non-whitespace content was seen (since reasoning ended)
    ws: str = ""
    calls: int = 0  # tool-call headers sent
    call: Call | None = None
    reasoned: bool = False  # the output was in reasoning at some point
    reasoning_tokens: int = 0
    request_id: str = ""
    choice: int = 0
    named: str = ""  # the named tool_choice function
    tools: list[ToolSchema] = []
    finished: bool = False
    # Trailing whitespace of the reasoning so far: sent only if more reasoning follows
    # (vLLM strips it from the end of the reasoning). Capped at engine.WS_HOLD_MAX.
    rws: str = ""
    # Message frames (Harmony): the header read so far (capped at engine.HEAD_MAX) and
    # what the messages so far said (MSG_* bits).
    head: str = ""
    msg: int = 0
