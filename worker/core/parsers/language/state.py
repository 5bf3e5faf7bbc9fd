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
- in `call`: the piece of one tool call that is not final yet (a name, one parameter
  value that must be converted whole, the head of a call whose name comes after its
  arguments). That is bounded by one call, never by the generation.

`call` is one small Struct per argument scanner (`Call`, a tagged union): each kind has
the fields its scanner reads, named for what they hold in it.

Field order is the msgpack layout (`array_like`); new fields go at the end with
defaults (msgspec evolution rules), as in `core/state.py`. Layout 2 (this one) replaced
the one 17-field `Call` of layout 1 by the union: that changed what `call` means, so a
layout-1 state with a call in progress no longer decodes (the tags see to it) and is
reported as a corrupt state; states without a call in progress decode as before.
"""

from __future__ import annotations

from typing import Any

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
# A TRIM_LEFT marker was read (Cohere's `<|START_THINKING|>`): leading whitespace is
# dropped until some text, content or reasoning, is sent (melody's left trim).
LEFT_TRIM = 256
# The request picked the tool format's variant (ToolFormat.variant): ParserSpec.variant
# parses it.
ALT_TOOLS = 512
# Thinking was switched off for a format that then hides what its think rules find
# (ReasoningFormat.off_hides): only then does a start marker in content open reasoning.
THINK_OFF = 1024


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
    `params` is each parameter's whole JSON Schema, for the format that types nested
    values by it (MiniMax M3: `ToolFormat.type_unions`). Both live in the request's
    tables (core/tables.py), stored once, not in the per-record state.
    """

    name: str
    types: dict[str, str] = {}
    params: dict[str, Any] = {}
    # The parameters the schema requires (ToolFormat.required_params: MiniCPM5).
    required: list[str] = []


class CallBase(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    """What every kind of call has: its header once it is out, and the name text.

    Its fields come first in every kind's encoding, so none may be added here: a new
    field goes at the end of the kinds that need it.
    """

    index: int = -1  # OpenAI index once the header is out; -1 before
    skip: bool = False  # suppressed: parallel_tool_calls false, malformed header, bad value
    name: str = ""  # the call's name once known
    head: str = ""  # header / name text read so far (bounded by calls.HEAD_MAX)


# One Struct per argument scanner, a tagged union (`Call`): the tag is the first element
# of the array. Tags start at 16, past the 0-6 that the first field of the one earlier
# `Call` Struct held (its kind), so a blob written before the union (layout 1, with a
# call in progress) fails to decode rather than being read as a wrong kind.


class JsonCheck(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    """Where streamed JSON arguments are in their grammar (json_check.py)."""

    mode: int = 0  # json_check.VALUE … BAD
    stack: str = ""  # the open containers, `{` / `[`
    held: str = ""  # the text since the last safe point (not sent yet)
    key: bool = False  # the string being read is a key
    rest: str = ""  # a literal's letters still to come, or a `\u` escape's digits


class CallJson(CallBase, tag=16):
    """JSON arguments streamed as written (json_args.py: Kimi K2, Mistral v11, DeepSeek V3)."""

    phase: int = 0  # json_args.BEFORE / IN / AFTER the value
    depth: int = 0  # bracket depth inside the value; -1: a scalar
    quote: bool = False  # inside a string
    esc: bool = False  # after a backslash inside a string
    # Kimi K2: a bare-counter header (`0`) whose name the arguments must tell; its id,
    # and the arguments held until the call ends (bounded by that one call).
    defer_id: str = ""
    deferred: str = ""


class CallParams(CallBase, tag=17):
    """Key/value parameter markup turned into one JSON object (params.py: XML, DSML)."""

    key: str = ""  # the parameter's name as written (bounded by calls.HEAD_MAX)
    # The parameter's `string="…"` flag as written (DSML), or what its `type="…"` says
    # (Kimi K3: "true" for a string).
    flag: str = ""
    value: int = 0  # how the current value is sent: params.NONE / STREAM / BUFFER
    held: str = ""  # a value converted whole at its end; a streamed value's last "\n"
    lead: bool = False  # a leading newline of the value may still be dropped
    count: int = 0  # parameters sent (the separator before the next one)


class CallList(CallBase, tag=18):
    """A block of JSON call objects (call_list.py: hermes, llama3_json, "required")."""

    phase: int = 0  # call_list.START … END
    key: str = ""  # the JSON key being read, as JSON text
    value: int = 0  # what the current value is: call_list.V_NAME, V_ARGS, …
    depth: int = 0  # bracket depth inside the current value; -1: a scalar
    quote: bool = False
    esc: bool = False
    args_seen: bool = False  # an arguments key was seen in this object
    held: str = ""  # arguments written before the name, or given as a string
    count: int = 0  # argument fragments sent for the current call ("{}" if none)
    # A sniffed block keeps its text until its first header, to be given back as
    # content if it is no call list (bounded by calls.RAW_MAX).
    fallback: bool = False
    raw: str = ""
    required: bool = False  # tool_choice "required": `[{"name", "parameters"}, …]`
    check: JsonCheck | None = None  # the arguments object being streamed


class CallPythonic(CallBase, tag=19):
    """A Python list of calls with keyword arguments (pythonic.py)."""

    phase: int = 0  # pythonic.START … END
    key: str = ""  # the keyword being read
    held: str = ""  # the keyword's value text, converted whole when it ends
    value: int = 0  # pythonic.WHOLE / STREAM (a plain string) / REST (after that string)
    depth: int = 0  # bracket depth inside the value
    quote: str = ""  # inside a string literal: its quote character
    esc: bool = False  # after a backslash inside a string
    escape: str = ""  # an escape sequence being read inside a streamed string
    count: int = 0  # keyword arguments sent for the current call
    fallback: bool = False  # as CallList's
    raw: str = ""


class CallVerbatim(CallBase, tag=20):
    """Every later character is arguments (a Harmony call's body, a named tool_choice)."""


class CallGemma(CallBase, tag=21):
    """Gemma 4's `{key:value,…}` with `<|"|>` strings (gemma.py)."""

    phase: int = 0  # gemma.START … DONE
    # The open containers, innermost last: `{` / `[` before their first member, `o` /
    # `a` after it (bounded by gemma.DEPTH_MAX).
    stack: str = ""
    key: str = ""  # the object key being read
    key_waits: bool = False  # the key is read: it is sent with its value's start
    held: str = ""  # a bare value, or a typed string, converted at its end
    string: int = 0  # inside a `<|"|>` string: gemma.STREAM / TYPED / KEY_STRING, or OUTSIDE
    count: int = 0  # top-level parameters sent


class CallElements(CallBase, tag=22):
    """MiniMax M3's parameter elements (elements.py)."""

    part: int = 0  # where in the invoke's body: elements.BETWEEN, STREAM, …
    held: str = ""  # a tag or namespace prefix cut at the end of the text
    key: str = ""  # the parameter being read
    body: str = ""  # a buffered parameter's body, converted when it closes
    depth: int = 0  # child elements open inside it
    sent: str = ""  # the parameters sent, one per line (a repeat is left out)
    opened: bool = False  # a streamed string parameter's `"key": "` is out
    count: int = 0  # parameters sent
    # The body is held (in `body`) to be converted when the invoke ends; False once it
    # is streamed (elements.HOLD_MAX), and for a call opened before holding existed.
    hold: bool = False


class CallHeld(CallBase, tag=23):
    """A block read whole at its end (held.py: MiniCPM5's `<function>` elements, a response
    template's tool region); `head` is the marker that opened it."""

    body: str = ""  # the block's text so far (bounded by held.HOLD_MAX)
    close: str = ""  # the marker that closed it ("" while open, or cut by the end)


Call = (
    CallJson
    | CallParams
    | CallList
    | CallPythonic
    | CallVerbatim
    | CallGemma
    | CallElements
    | CallHeld
)


class Unescape(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    """Where one text stream is in the escaped-newline recovery (escapes.py)."""

    closing: str = ""  # inside code or math: the marker that ends it
    pending: str = ""  # the end of the text, which the next text may change


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
    call: Call | None = None  # the call (or block of calls) being parsed
    reasoned: bool = False  # the output was in reasoning at some point
    reasoning_tokens: int = 0
    request_id: str = ""
    choice: int = 0
    named: str = ""  # the named tool_choice function
    tools: list[ToolSchema] = []
    finished: bool = False
    # Trailing whitespace of the reasoning so far: sent only if more reasoning follows
    # (vLLM strips it from the end of the reasoning). Capped at prose.WS_HOLD_MAX.
    rws: str = ""
    # Message frames (Harmony): the header read so far (capped at prose.FRAME_MAX) and
    # what the messages so far said (MSG_* bits).
    head: str = ""
    msg: int = 0
    # Escaped-newline recovery of content and reasoning (ReasoningFormat.escaped_newlines).
    unescape: list[Unescape] = []
    # Content's trailing whitespace, held while a marker that swallows it may follow
    # (ReasoningFormat / ToolFormat.swallow_ws), capped at prose.WS_HOLD_MAX.
    cws: str = ""
