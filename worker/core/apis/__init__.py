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
- `whole(state, request_id, part, usage) -> Output`: a `response` record's one output
  (kind `response`): the API's whole object, as `stream: false` returns it. Build it
  with the same code the stream's terminal event uses, so stream equals whole.
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
    whole: Callable[[RequestState, str, Part, out.UsageInfo], Output]
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
        outputs += fmt.piece(state, request_id, part_of(piece))
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
        outputs += fmt.piece(state, request_id, part_of(p))
    outputs += fmt.end(state, request_id, usage, abort)
    outputs.append(render.DONE)
    return outputs


def on_whole(
    state: RequestState,
    request_id: str,
    message: out.ChatMessage,
    finish_reason: str | None,
    stop_reason: int | str | None,
    usage: out.UsageInfo,
) -> Output:
    """A `response` record's one output, from the chat path's whole message."""
    calls = []
    if message.tool_calls is not UNSET:
        for i, call in enumerate(message.tool_calls):
            function = out.FunctionDelta(name=call.function.name, arguments=call.function.arguments)
            calls.append(out.ToolCallDelta(index=i, id=call.id, type=call.type, function=function))
    reasoning = message.reasoning or message.reasoning_content or ""
    part = Part(reasoning, message.content or "", calls, finish_reason, stop_reason)
    return FORMATS[state.api].whole(state, request_id, part, usage)


def on_failure(
    state: RequestState, request_id: str, exc: DerenderError, whole: bool
) -> list[Output]:
    return FORMATS[state.api].failed(state, request_id, exc, whole)


def part_of(piece: Piece) -> Part:
    """A chat piece of choice 0 as a format reads it."""
    if piece.index != 0:
        raise DerenderError(
            f"these APIs take one choice: got choice index {piece.index}", param="index"
        )
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


def held(state: RequestState) -> int:
    """The bytes a format keeps in the state (bounded by `max_output_bytes`)."""
    return 0 if state.fmt is None else state.fmt.held
