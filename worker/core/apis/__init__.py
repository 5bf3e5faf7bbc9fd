"""Output formats over the chat semantics: the OpenAI Responses API (`responses.py`) and
the Anthropic Messages API (`messages.py`).

A record with `api: "responses"` or `"messages"` runs exactly as a chat request: the
format's `chat_request` turns the API's request into a `ChatRequest`, and from there the
same tokenizer, stop strings, reasoning / tool-call parsers and finish reasons apply
(logprobs off, `n` = 1). Where the chat path would render a `chat.completion.chunk`, the
request's format turns what the chat path produced for choice 0 (a `Part`: reasoning
text, content text, tool-call starts and argument fragments, finish and stop reason)
into that API's events, one `Output` per event.

The interface: each format is a module with these functions (`Format` below; the
core calls them only through this package's dispatch functions):

- `chat_request(record) -> ChatRequest | None`: the seq-0 record's request as a chat
  request (tools, tool choice, stop strings, thinking switches in chat's shape).
  Raise `DerenderError` for a request the format refuses.
- `open_format(record, req) -> FormatState`: the format's state at the request's
  start (`state.fmt`; `echo` holds any request fields the API's objects repeat). The
  state is `worker.core.state.FormatState`, stored in Redis with the rest of the
  request's state: keep what goes in it small (see its docstring).
- `start(state, request_id) -> list[Output]`: the stream's opening events
  (`response.created`, `response.in_progress`; `message_start`). Called once, before
  the first `piece`, or at `end` when no piece came; set `state.fmt.opened`.
- `piece(state, request_id, part) -> list[Output]`: one record's events for choice 0
  (`Part`, parts.py). `part.finish_reason` is set on the choice's last piece; keep it
  (`fmt.finish`, `fmt.stop`) for `end`.
- `end(state, request_id, usage, abort) -> list[Output]`: the stream's last events:
  close what is open, then the terminal event with `usage` (the request's, counted as
  chat counts it). `abort`: an `abort` record ended the request; `fmt.finish` is ""
  when the choice had not finished. The dispatch adds the request-end marker (`[DONE]`,
  kind `done`) after it: every streamed request ends with one on the output topic,
  whatever its API (a gateway ends the SSE stream there and writes no `[DONE]` line
  for an API that has none).
- `whole(state, request_id, parts, usage) -> Output`: a `response` record's one output
  (kind `response`): the API's whole object, as `stream: false` returns it, from the
  parts a stream of the same output reads (in the model's order; the finish on the
  last). Build it with the same code the stream uses, so stream equals whole.
- `failed(state, request_id, exc, whole) -> list[Output]`: the request failed with
  `exc` (`whole`: a `response` record). Must not raise. The error itself has kind
  `error`; events before it (a stream not yet opened) have kind `chunk`.

Streamed events have kind `chunk`; each Output's value is exactly the JSON the API's
SSE `data:` line carries, beginning with `{"type":"<event name>"`, so a gateway writes
the `event:` line without parsing the rest. Ids, `sequence_number` and indices are
functions of the request id and the stream so far (`parts.item_id`): replay gives the
same bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from msgspec import UNSET

from worker.core import render
from worker.core.apis import messages, responses
from worker.core.apis.parts import Part
from worker.core.errors import DerenderError
from worker.core.parsers.language.events import (
    Content,
    Event,
    Reasoning,
    ToolCallArgs,
    ToolCallStart,
)
from worker.core.parsers.render import FUNCTION
from worker.core.render import Output, Piece
from worker.core.state import RequestState
from worker.wire import outbound as out
from worker.wire.inbound import ChatRequest as ChatRequest
from worker.wire.inbound import ChunkRecord


class Format(NamedTuple):
    chat_request: Callable[[ChunkRecord], ChatRequest | None]
    open_format: Callable[..., object]
    start: Callable[[RequestState, str], list[Output]]
    piece: Callable[[RequestState, str, Part], list[Output]]
    end: Callable[[RequestState, str, out.UsageInfo, bool], list[Output]]
    whole: Callable[[RequestState, str, list[Part], out.UsageInfo], Output]
    failed: Callable[[RequestState, str, DerenderError, bool], list[Output]]


def _format(module: object) -> Format:
    return Format(*(getattr(module, name) for name in Format._fields))


FORMATS: dict[str, Format] = {"responses": _format(responses), "messages": _format(messages)}


def chat_request(record: ChunkRecord, api: str) -> ChatRequest | None:
    return FORMATS[api].chat_request(record)


def open_format(state: RequestState, record: ChunkRecord, req: ChatRequest | None) -> None:
    if req is not None and req.n != 1:
        raise DerenderError(f"the {state.api} API takes n = 1, got {req.n}", param="n")
    state.fmt = FORMATS[state.api].open_format(record, req)  # type: ignore[assignment]


def on_piece(state: RequestState, request_id: str, piece: Piece | None) -> list[Output]:
    """A streamed record's events: the opening ones first (once), then the piece's."""
    assert state.fmt is not None
    fmt = FORMATS[state.api]
    outputs = [] if state.fmt.opened else fmt.start(state, request_id)
    if piece is not None:
        for part in parts_of(piece):
            outputs += fmt.piece(state, request_id, part)
    return outputs


def on_end(
    state: RequestState,
    request_id: str,
    pieces: list[Piece],
    usage: out.UsageInfo,
    abort: bool,
) -> list[Output]:
    """`end` / `abort`: what the choice still held, the terminal events, `[DONE]`."""
    assert state.fmt is not None
    fmt = FORMATS[state.api]
    outputs = [] if state.fmt.opened else fmt.start(state, request_id)
    for p in pieces:
        for part in parts_of(p):
            outputs += fmt.piece(state, request_id, part)
    outputs += fmt.end(state, request_id, usage, abort)
    outputs.append(render.DONE)
    return outputs


def on_whole(
    state: RequestState,
    request_id: str,
    message: out.ChatMessage,
    events: list[Event] | None,
    finish_reason: str | None,
    stop_reason: int | str | None,
    usage: out.UsageInfo,
) -> Output:
    """A `response` record's one output, from the chat path's whole message: as the
    parts a stream of it gives, in the model's order (`events`, the parser's), then its
    finish. (A message the whole path changed after parsing — a format that swaps
    reasoning and content, hidden reasoning — is taken as it is, in one part.)"""
    calls = []
    if message.tool_calls is not UNSET:
        for i, call in enumerate(message.tool_calls):
            function = out.FunctionDelta(name=call.function.name, arguments=call.function.arguments)
            calls.append(out.ToolCallDelta(index=i, id=call.id, type=call.type, function=function))
    reasoning = message.reasoning or message.reasoning_content or ""
    parts = [Part(reasoning, message.content or "", calls)]
    if events is not None:
        ordered = in_order(events)
        if _merged(ordered) == _merged(parts):
            parts = ordered
    parts.append(Part(finish_reason=finish_reason, stop_reason=stop_reason))
    return FORMATS[state.api].whole(state, request_id, parts, usage)


def on_failure(
    state: RequestState, request_id: str, exc: DerenderError, whole: bool
) -> list[Output]:
    return FORMATS[state.api].failed(state, request_id, exc, whole)


def parts_of(piece: Piece) -> list[Part]:
    """A chat piece of choice 0 as the parts a format reads, in the model's order: one
    per run of reasoning, of text, of calls (a record may hold a call's last
    arguments and the text after it); the piece's finish on the last."""
    if piece.events is None:
        return [part_of(piece)]
    _one_choice(piece)
    parts = in_order(piece.events) or [Part()]
    parts[-1].finish_reason, parts[-1].stop_reason = piece.finish_reason, piece.stop_reason
    return parts


def in_order(events: list[Event]) -> list[Part]:
    """The parser's events as parts: consecutive events of one kind (reasoning, text,
    calls) in one part."""
    parts: list[Part] = []
    last: type | None = None
    for ev in events:
        kind = ToolCallStart if type(ev) is ToolCallArgs else type(ev)
        if kind is not last:
            parts.append(Part())
            last = kind
        part = parts[-1]
        if isinstance(ev, Reasoning):
            part.reasoning += ev.text
        elif isinstance(ev, Content):
            part.content += ev.text
        elif isinstance(ev, ToolCallStart):
            function = out.FunctionDelta(name=ev.name)
            part.calls.append(out.ToolCallDelta(ev.index, ev.id, FUNCTION, function))
        else:
            function = out.FunctionDelta(arguments=ev.text)
            part.calls.append(out.ToolCallDelta(ev.index, function=function))
    return parts


def _merged(parts: list[Part]) -> tuple[str, str, dict[int, tuple[str, str, str]]]:
    """What parts say once merged: reasoning, text, and per call its id, name and
    arguments."""
    calls: dict[int, tuple[str, str, str]] = {}
    for call in (c for p in parts for c in p.calls):
        cid, name, args = calls.get(call.index, ("", "", ""))
        function = call.function
        if call.id:
            cid = call.id
        if function and function.name:
            name = function.name
        if function and function.arguments:
            args += function.arguments
        calls[call.index] = (cid, name, args)
    return "".join(p.reasoning for p in parts), "".join(p.content for p in parts), calls


def part_of(piece: Piece) -> Part:
    """A chat piece of choice 0 as a format reads it."""
    _one_choice(piece)
    delta = piece.delta
    if delta is None:  # no parser: the piece's text is content
        return Part("", piece.text, [], piece.finish_reason, piece.stop_reason)
    reasoning = delta.reasoning if delta.reasoning is not UNSET else delta.reasoning_content
    return Part(
        reasoning if reasoning is not UNSET else "",
        delta.content if delta.content is not UNSET else "",
        delta.tool_calls if delta.tool_calls is not UNSET else [],
        piece.finish_reason,
        piece.stop_reason,
    )


def _one_choice(piece: Piece) -> None:
    if piece.index != 0:
        raise DerenderError(
            f"these APIs take one choice: got choice index {piece.index}", param="index"
        )


def held(state: RequestState) -> int:
    """The bytes a format keeps in the state (bounded by `max_output_bytes`)."""
    return 0 if state.fmt is None else state.fmt.held
