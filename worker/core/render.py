"""What the core emits: output kinds, and the one place an OpenAI payload is put together.

Every payload (a streamed chunk, the usage chunk, a whole response) starts with the same
header, `id`, `object`, `created`, `model`, and carries `usage`. `header` writes it for
all four body types (chat or completion, chunk or whole), so the two APIs cannot drift
apart; the callers only say which choices (and, whole, which extra fields) go in it.
(A chat chunk, the one body built per streamed record, is built inline in `chunk` with
the same fields: a call less per record.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

# Output kinds (the `derender-kind` header).
from worker.constants import CHUNK, DONE_KIND, ERROR, RESPONSE
from worker.core.errors import DerenderError
from worker.core.state import RequestState
from worker.core.usage import request_usage
from worker.wire import outbound as out

ROLE = "assistant"


# Output and Piece are msgspec Structs, not dataclasses: built in C, so the several a
# record makes cost a fraction of a generated `__init__` (and gc=False: they hold only
# strings, bytes and payload Structs, which never point back at them).


class Output(msgspec.Struct, gc=False):
    """One output record: its kind and its value (JSON, or `[DONE]`)."""

    kind: str
    value: bytes


# The last output of a stream, as OpenAI's SSE ends one (`data: [DONE]`). Shared: never
# changed after it is built.
DONE = Output(DONE_KIND, out.DONE)

LogprobsOut = out.ChatLogprobs | out.CompletionLogprobs


class Piece(msgspec.Struct, gc=False):
    """What one record contributes to one choice, before rendering."""

    index: int
    text: str = ""
    role: bool = False  # the choice's first chunk: it carries `role: "assistant"`
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    logprobs: LogprobsOut | None = None
    # Parser path: reasoning / content / tool calls of this record (None: say nothing).
    delta: out.Delta | None = None
    # Responses / Messages on the parser path: the events `delta` merged, in the model's
    # order (None: the delta holds one kind of text, or the chat path, which needs none).
    events: list[Any] | None = None


# The body types by API: streamed chunks, and whole responses. OpenAI names a completion
# chunk and a whole completion alike.
_CHUNKS: dict[str, tuple[Callable[..., Any], str]] = {
    "chat": (out.ChatCompletionChunk, "chat.completion.chunk"),
    "completion": (out.CompletionChunk, "text_completion"),
}
CHAT_CHUNK = _CHUNKS["chat"][1]
_WHOLE: dict[str, tuple[Callable[..., Any], str]] = {
    "chat": (out.ChatCompletion, "chat.completion"),
    "completion": (out.Completion, "text_completion"),
}


def header(
    state: RequestState,
    request_id: str,
    *,
    whole: bool,
    choices: list[Any],
    usage: out.UsageInfo | UnsetType,
) -> Any:
    """The one header renderer: the body of the request's API with `id`, `object`,
    `created`, `model`, `choices` and `usage` (a whole response's own fields are
    added by `response`)."""
    make, obj = (_WHOLE if whole else _CHUNKS)[state.api]
    return make(
        id=request_id,
        object=obj,
        created=state.created,
        model=state.model,
        choices=choices,
        usage=usage,
    )


def chunk(
    state: RequestState,
    request_id: str,
    pieces: list[Piece],
    metrics: dict[str, Any] | None = None,
) -> Output:
    """A streamed chunk of the request's API, one choice per piece (and the record's
    engine `metrics`, when it had any)."""
    u = request_usage(state) if state.opts.continuous_usage_stats else UNSET
    body: Any
    if state.api == "chat":
        # The hot path (once per streamed record): positional Struct calls and the body
        # built here, with the very fields `header` writes; a loop, not a comprehension
        # (a frame of its own before Python 3.12), and the parser's delta without a call
        # when it needs no role.
        chat_choices: list[out.ChatChunkChoice] = []
        for p in pieces:
            delta = p.delta
            chat_choices.append(
                out.ChatChunkChoice(
                    p.index,
                    delta if delta is not None and not p.role else _delta(p),
                    p.logprobs if type(p.logprobs) is out.ChatLogprobs else None,
                    p.finish_reason,
                    p.stop_reason,
                )
            )
        body = out.ChatCompletionChunk(
            request_id, CHAT_CHUNK, state.created, state.model, chat_choices, u
        )
    else:
        choices = [
            out.CompletionChunkChoice(
                index=p.index,
                text=p.text,
                logprobs=p.logprobs if isinstance(p.logprobs, out.CompletionLogprobs) else None,
                finish_reason=p.finish_reason,
                stop_reason=p.stop_reason,
            )
            for p in pieces
        ]
        body = header(state, request_id, whole=False, choices=choices, usage=u)
    if metrics is not None:
        body.metrics = metrics
    return Output(CHUNK, out.encode(body))


# A chat chunk's JSON around its delta, by request: (created, model, choice index, the
# bytes before the delta, the bytes after it). The streamed record (stream.streamed)
# encodes only its delta between the two, instead of the whole body (which repeats the
# same id, object, created and model on every record of the request). Both parts are cut
# from msgspec's own encoding of the body, so the bytes are the same by construction.
# A memo, not state: bounded (the oldest out first), and checked against the state's
# created and model on every use.
HeadTail = tuple[int, str, int, bytes, bytes]
HEADS: dict[str, HeadTail] = {}
HEADS_MAX = 16384
_DELTA = b'"delta":{}'


def chat_head(request_id: str, created: int, model: str, index: int) -> HeadTail:
    """A chat chunk's bytes before and after its delta (no logprobs, finish, stop
    reason, usage or metrics), remembered in HEADS."""
    whole = out.encode(
        out.ChatCompletionChunk(
            request_id, CHAT_CHUNK, created, model, [out.ChatChunkChoice(index, out.Delta())]
        )
    )
    # (A string's quotes are escaped in JSON: the last `"delta":{}` is the field.)
    cut = whole.rindex(_DELTA) + len(_DELTA) - 2
    entry = (created, model, index, whole[:cut], whole[cut + 2 :])
    if len(HEADS) >= HEADS_MAX:
        del HEADS[next(iter(HEADS))]
    HEADS[request_id] = entry
    return entry


def opening(state: RequestState, request_id: str, index: int) -> Output:
    """A chat stream's opening chunk for one choice: `{"role": "assistant", "content": ""}`,
    as vLLM's chat server sends it for each choice before any output."""
    return chunk(state, request_id, [Piece(index, role=True)])


def usage_chunk(
    state: RequestState,
    request_id: str,
    usage: out.UsageInfo,
    metrics: dict[str, Any] | None = None,
) -> Output:
    """The usage-only chunk: no choices."""
    body = header(state, request_id, whole=False, choices=[], usage=usage)
    if metrics is not None:
        body.metrics = metrics
    return Output(CHUNK, out.encode(body))


def response(
    state: RequestState,
    request_id: str,
    *,
    choices: list[Any],
    usage: out.UsageInfo,
    **fields: Any,
) -> Output:
    """A whole (non-streaming) `chat.completion` / `text_completion`, with the body
    type's own `fields` (`prompt_logprobs`, `kv_transfer_params`, `metrics`)."""
    body = header(state, request_id, whole=True, choices=choices, usage=usage)
    # Set after the header, so chunks (the hot path) are built with a plain keyword
    # call; the encoding follows field declaration order either way.
    body = msgspec.structs.replace(body, **fields)
    return Output(RESPONSE, out.encode(body))


def error_output(exc: DerenderError) -> Output:
    body = out.ErrorResponse(
        out.ErrorBody(message=exc.message, type=exc.type, param=exc.param, code=exc.code)
    )
    return Output(ERROR, out.encode(body))


def _delta(p: Piece) -> out.Delta:
    if p.delta is not None:  # the parser's split of this record
        delta = p.delta
        if p.role:
            delta.role = ROLE
            if delta.content is UNSET and delta.tool_calls is UNSET:
                delta.content = ""  # OpenAI's first chunk: role with an empty content
        return delta
    return out.Delta(
        role=ROLE if p.role else UNSET,
        # A record whose tokens only held text back still carries their logprobs (or
        # is the role's first chunk); its delta says so with an empty content.
        content=p.text if (p.text or p.role or p.logprobs) else UNSET,
    )
