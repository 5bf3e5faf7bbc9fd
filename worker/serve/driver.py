"""`serve`'s driver of the one loop: one HTTP request → one ChunkRecord → `loop.run_batch`.

Only the adapters differ from `run` and `replay`, as there:
- the source is the request itself: a one-record `Batch`, nothing to commit or rewind;
- the state store's `load` returns the state the client carried (`stream_state`, checked
  against the request before anything reads it) and its `save` captures the new state,
  which goes back to the client sealed (`seal`);
- the sink captures the outputs, which become the response body.
Decoding, sequencing, the bounds, the core and the model registry are the same code that
runs `run` and `replay` (`pipeline`, `core`), so a request gets the bytes a Kafka record
with the same content would get.

Translating vLLM's bodies to ChunkRecords (docs/integrate/contract.md, "Input records") is
this module's job: a non-streaming body is a `response` record at seq 0; a streaming call
without `stream_state` is a `chunk` record at seq 0 carrying the request context, and each
later call a `chunk` record at the carried state's seq + 1. The parts of the body the core
reads (`generate_chunk`, `chat_request`, …) are spliced into the record as the client sent
them, so they are parsed once, by the core's own decoder.

Our `stream_state` is the request state the core keeps in Redis under `run` (decoder
window, stop hold-back, parser state: tens to a few hundred bytes, flat in the output's
length), in an envelope that binds it to its API and request id with a 128-bit BLAKE2b
tag (keyed with `--state-key` when set; stream_state.py). A state of another request, of
the other API, altered, cut or of vLLM's own shape is a 400, never a wrong answer.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Any

import msgspec

from worker.batch.checkpoint import Checkpoint
from worker.batch.loop import SILENT, Observer, run_batch, run_sync
from worker.constants import CHUNK, DEFAULT_MAX_RECORD_BYTES, ERROR, RESPONSE
from worker.core import errors, render
from worker.core.model import Model, Registry
from worker.core.state import decode_state
from worker.ports import Batch, InRecord, OutRecord, Partition, StateWrite, Stored
from worker.serve import wire
from worker.serve.chunks import empty_chunk, merged
from worker.serve.stream_state import BadState, Issued, seal
from worker.serve.wire import given
from worker.wire import inbound

# An answer: the HTTP status and the JSON body.
Answer = tuple[int, bytes]

# vLLM 0.33's messages for the checks it makes before derendering (serving.py).
CHAT_REQUEST_REQUIRED = (
    "chat_request is required when a tool or reasoning parser is configured because "
    "plain detokenization would leak raw parser markup into content."
)
PROMPT_IDS_REQUIRED = (
    "prompt_token_ids is required when a tool or reasoning parser is configured. Without "
    "it parse_delta cannot tell whether the prompt left reasoning open (e.g. a chat "
    "template that pre-opens <think>) and would misclassify reasoning content as plain "
    "content."
)

# What msgspec raises on a body it cannot read: bad JSON or a wrong shape, JSON nested
# past its limit (RecursionError), invalid UTF-8 in a string (a ValueError).
_UNREADABLE = (msgspec.DecodeError, msgspec.ValidationError, RecursionError, ValueError)

# Our error codes (docs/integrate/contract.md, "Errors") → the HTTP status and vLLM's error `type`.
_STATUS: dict[str, tuple[int, str]] = {
    errors.MODEL_NOT_FOUND: (404, "NotFoundError"),
    errors.INTERNAL_ERROR: (500, "InternalServerError"),
}
_BAD_REQUEST = (400, "BadRequestError")


def error(
    message: str, status: int = 400, kind: str = "BadRequestError", param: str | None = None
) -> Answer:
    """vLLM's error body: `{"error": {"message", "type", "param", "code": <status>}}`."""
    return status, wire.encode(wire.ErrorResponse(wire.ErrorInfo(message, kind, param, status)))


def invalid_body(exc: Exception, param: str | None = None) -> Answer:
    """A body that is not JSON or not the endpoint's shape: 400, as vLLM's validation
    handler answers it (its `type` is the status phrase there)."""
    what = "JSON nested too deeply" if isinstance(exc, RecursionError) else str(exc)
    message = f"{param}: {what}" if param else what
    return error(message, 400, "Bad Request", param)


def missing(field: str) -> Answer:
    return error(f"Field required: `{field}`", 400, "Bad Request", field)


class Refusal(Exception):
    """A request refused before the core sees it; `answer` is the error to send."""

    def __init__(self, answer: Answer) -> None:
        super().__init__(answer[1].decode())
        self.answer = answer


# -- the adapters -------------------------------------------------------------------------


class _Request:
    """The source: one request is one record; there is nothing to commit."""

    async def poll(self) -> Batch | None:
        return None

    def rewind(self, batch: Batch, partitions: list[Partition] | None = None) -> None:
        return None

    async def commit(self, offsets: Mapping[Partition, int]) -> None:
        return None

    def scope(self, partition: Partition) -> str:
        return "serve"


class ClientState:
    """The state store: `load` returns what the client carried, `save` keeps what the
    batch wrote, for the answer. Never refused: the client holds the only copy."""

    def __init__(self) -> None:
        self.carried: Stored | None = None
        self.saved: list[StateWrite] = []

    async def load_many(
        self,
        request_ids: list[str],
        first_offsets: list[int] | None = None,
        tables_for: AbstractSet[str] = frozenset(),
    ) -> dict[str, Stored | None]:
        return {rid: self.carried for rid in request_ids}

    async def save_many(self, writes: list[StateWrite]) -> list[str]:
        self.saved.extend(writes)
        return []

    async def claim_epoch(self, scope: str) -> int:
        return 1

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None


class Captured:
    """The sink: keeps the outputs (dead letters have no reader here: their request's
    `error` output says why)."""

    def __init__(self) -> None:
        self.outputs: list[OutRecord] = []

    async def send(self, outputs: list[OutRecord], dead_letters: list[OutRecord]) -> None:
        self.outputs.extend(outputs)


# -- records ------------------------------------------------------------------------------


def _record(fields: list[tuple[bytes, Any]]) -> bytes:
    """A ChunkRecord's JSON from (key, JSON value) pairs (bytes, or a msgspec.Raw)."""
    parts = [b'{"']
    for k, v in fields:
        parts += (k, b'":', v, b',"')
    parts[-1] = b"}"
    return b"".join(parts)


_encode = msgspec.json.encode
_response_list = msgspec.json.Decoder(list[inbound.GenerateResponse])
_chunk_decoder = msgspec.json.Decoder(inbound.GenerateStreamResponse)


class _Index(msgspec.Struct, gc=False):
    index: Any = None


_indexes_decoder = msgspec.json.Decoder(list[_Index])


class _OurError(msgspec.Struct):
    message: str
    param: str | None = None
    code: str = errors.INVALID_REQUEST


class _OurErrorBody(msgspec.Struct):
    error: _OurError


_error_decoder = msgspec.json.Decoder(_OurErrorBody)


class Driver:
    """The derender endpoints over the one loop, without HTTP: bodies in, answers out.

    Not re-entrant (one request at a time runs to completion: `run_batch` never waits on
    these adapters), which is what one event loop gives it."""

    def __init__(
        self,
        registry: Registry,
        *,
        key: bytes = b"",
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        observer: Observer = SILENT,
        clock: Any = time.time,
    ) -> None:
        self.registry = registry
        self.key = key
        self.max_record_bytes = max_record_bytes
        self.observer = observer
        self.clock = clock
        self.store = ClientState()
        self.sink = Captured()
        self.checkpoint = Checkpoint(_Request(), self.store)
        self.tokens = 0
        self.state_bytes: list[int] = []
        self._rid = ""  # the request id `_opening` settled on
        self.issued = Issued()  # the states sealed last: one brought back is not reopened

    # -- endpoints ---------------------------------------------------------------------

    def chat(self, body: bytes) -> Answer:
        try:
            return self._chat(body)
        except Refusal as r:
            return r.answer

    def _chat(self, body: bytes) -> Answer:
        try:
            req = wire.chat_decoder.decode(body)
        except _UNREADABLE as exc:
            return invalid_body(exc)
        model = self._model(req.model)
        parsed = model.reasoning_parser is not None or model.tool_parser is not None
        if parsed and not given(req.chat_request):
            return error(CHAT_REQUEST_REQUIRED)
        if req.stream:
            if not given(req.generate_chunk):
                return missing("generate_chunk")
            if parsed and not given(req.prompt_token_ids):
                return error(PROMPT_IDS_REQUIRED)
            context = [
                (b"prompt_tokens", req.prompt_tokens),
                (b"prompt_token_ids", req.prompt_token_ids),
                (b"chat_request", req.chat_request),
            ]
            return self._stream("chat", model, req.generate_chunk, req.stream_state, context)
        if not given(req.generate_response):
            return missing("generate_response")
        try:
            head = wire.head_decoder.decode(req.generate_response)
        except _UNREADABLE as exc:
            return invalid_body(exc, "generate_response")
        # vLLM: usage counts the request's prompt_tokens, else 0; the prompt ids seed the
        # decoder (and set the parser's start) from the request, else the generate output.
        fields = self._opening(head.request_id, "response", "chat", model)
        fields.append((b"prompt_tokens", _encode(req.prompt_tokens or 0)))
        ids = req.prompt_token_ids if given(req.prompt_token_ids) else head.prompt_token_ids
        if given(ids):
            fields.append((b"prompt_token_ids", bytes(ids)))
        if given(req.chat_request):
            fields.append((b"chat_request", bytes(req.chat_request)))
        fields.append((b"generate_response", bytes(req.generate_response)))
        return self._whole(fields)

    def completion(self, body: bytes) -> Answer:
        try:
            return self._completion(body)
        except Refusal as r:
            return r.answer

    def _completion(self, body: bytes) -> Answer:
        try:
            req = wire.completion_decoder.decode(body)
        except _UNREADABLE as exc:
            return invalid_body(exc)
        if req.stream:
            try:
                prompt_tokens = wire.int_decoder.decode(req.prompt_tokens or b"null")
            except _UNREADABLE as exc:
                return invalid_body(exc, "prompt_tokens")
            model = self._model(req.model)
            if not given(req.generate_chunk):
                return missing("generate_chunk")
            context = [
                (b"prompt_tokens", prompt_tokens),
                (b"prompt_token_ids", req.prompt_token_ids),
                (b"completion_request", req.completion_request),
            ]
            return self._stream("completion", model, req.generate_chunk, req.stream_state, context)
        responses, counts = self._completion_lists(req)
        model = self._model(req.model)
        rid = responses[0].request_id if responses else None
        fields = self._opening(rid, "response", "completion", model)
        fields.append((b"prompt_tokens", _encode(sum(counts))))
        if given(req.completion_request):
            fields.append((b"completion_request", bytes(req.completion_request)))
        fields.append((b"generate_responses", _encode(responses)))
        return self._whole(fields)

    # -- the parts -----------------------------------------------------------------------

    def _completion_lists(
        self, req: wire.CompletionBody
    ) -> tuple[list[inbound.GenerateResponse], list[int]]:
        """The non-streaming completion's lists, checked as vLLM's validator does."""
        if not given(req.generate_responses):
            raise Refusal(missing("generate_responses"))
        try:
            responses = _response_list.decode(req.generate_responses)
        except _UNREADABLE as exc:
            raise Refusal(invalid_body(exc, "generate_responses")) from None
        try:
            counts = wire.int_list_decoder.decode(req.prompt_tokens or b"null")
        except _UNREADABLE as exc:
            raise Refusal(invalid_body(exc, "prompt_tokens")) from None
        try:
            ids = wire.ids_lists_decoder.decode(req.prompt_token_ids or b"null")
        except _UNREADABLE as exc:
            raise Refusal(invalid_body(exc, "prompt_token_ids")) from None
        n = len(responses)
        if counts is not None and len(counts) != n:
            raise Refusal(
                error(
                    f"prompt_tokens length ({len(counts)}) must equal generate_responses "
                    f"length ({n})"
                )
            )
        if ids is not None and len(ids) != n:
            raise Refusal(
                error(
                    f"prompt_token_ids length ({len(ids)}) must equal generate_responses "
                    f"length ({n})"
                )
            )
        if ids is not None:  # a null entry falls back to the generate output's own
            for resp, own in zip(responses, ids, strict=True):
                if own is not None:
                    resp.prompt_token_ids = own
        return responses, counts or []

    def _model(self, name: str | None) -> Model:
        model = self.registry.resolve(name or None)
        if model is None:
            served = ", ".join(self.registry.models)
            raise Refusal(
                error(
                    f"The model `{name}` does not exist. Valid aliases: {served}.",
                    404,
                    "NotFoundError",
                    "model",
                )
            )
        return model

    def _opening(
        self, request_id: str | None, kind: str, api: str, model: Model
    ) -> list[tuple[bytes, bytes]]:
        # vLLM's generate outputs default their request_id to a random uuid.
        rid = self._rid = request_id if request_id is not None else uuid.uuid4().hex
        return [
            (b"request_id", _encode(rid)),
            (b"seq", b"0"),
            (b"type", _encode(kind)),
            (b"api", _encode(api)),
            (b"model", _encode(model.name)),
            (b"created", str(int(self.clock())).encode()),
        ]

    def _run(self, value: bytes, request_id: str, carried: Stored | None) -> list[OutRecord]:
        """One record through `loop.run_batch`, the state from (and to) the client."""
        store, sink = self.store, self.sink
        store.carried, store.saved, sink.outputs = carried, [], []
        record = InRecord(value, request_id, int(self.clock() * 1000), "http")
        batch = Batch([record], {None: 0}, {None: 0})
        report = run_sync(
            run_batch(
                batch,
                registry=self.registry,
                sink=sink,
                checkpoint=self.checkpoint,
                max_record_bytes=self.max_record_bytes,
                observer=self.observer,
            )
        )
        self.tokens += report.result.tokens
        return sink.outputs

    def _whole(self, fields: list[tuple[bytes, bytes]]) -> Answer:
        outputs = self._run(_record(fields), self._rid, None)
        for o in outputs:
            if o.kind == ERROR:
                return _error_answer(o.value)
        for o in outputs:
            if o.kind == RESPONSE:
                return 200, o.value
        return error("derender produced no response", 500, "InternalServerError")

    def _stream(
        self,
        api: str,
        model: Model,
        chunk: msgspec.Raw,
        stream_state: wire.StreamState | None,
        context: list[tuple[bytes, Any]],
    ) -> Answer:
        """One streamed call. `context` (the request's prompt_tokens, prompt ids and
        request, as sent) goes into the record only when it opens the stream."""
        try:
            head = wire.head_decoder.decode(chunk)
        except _UNREADABLE as exc:
            return invalid_body(exc, "generate_chunk")
        bound = head.request_id or ""  # what the state is bound to
        opened: list[int] | None
        if stream_state is None:
            fields = self._opening(head.request_id, "chunk", api, model)
            rid = self._rid
            for key, value in context:
                if isinstance(value, msgspec.Raw):
                    if given(value):
                        fields.append((key, bytes(value)))
                else:
                    fields.append((key, _encode(value)))
            carried, opened = None, []
        else:
            try:
                carried, opened = self.issued.open(self.key, api, bound, stream_state.state)
            except BadState as exc:
                return error(str(exc), param="stream_state")
            rid = head.request_id if head.request_id is not None else uuid.uuid4().hex
            fields = [
                (b"request_id", _encode(rid)),
                (b"seq", b"%d" % (carried.seq + 1)),
            ]
        fields.append((b"generate_chunk", chunk))
        outputs = self._run(_record(fields), rid, carried)
        chunks: list[bytes] = []
        for o in outputs:
            if o.kind == ERROR:
                return _error_answer(o.value)
            if o.kind == CHUNK:
                chunks.append(o.value)
        writes = self.store.saved
        if not writes:
            return error("derender kept no state", 500, "InternalServerError")
        w = writes[-1]
        self.state_bytes.append(len(w.blob))
        if api == "chat" and opened is not None:
            index = _choice_index(head)
            if index is not None and index not in opened:
                chunks = _open_choice(chunks, index, not opened, rid, w.blob)
                opened = sorted([*opened, index])
        if not chunks:
            value = empty_chunk(api, rid, decode_state(w.blob), _chunk_decoder.decode(chunk))
        elif len(chunks) == 1:
            value = chunks[0]
        else:
            value = merged(chunks)
        tables = w.tables or (carried.tables or b"" if carried is not None else b"")
        state = seal(self.key, api, bound, w.seq, w.blob, tables, opened)
        self.issued.keep(
            api, bound, state.decode("ascii"), Stored(w.seq, w.blob, tables or None), opened
        )
        return 200, b'{"chunk":' + value + b',"stream_state":{"state":"' + state + b'"}}'


def _choice_index(head: wire.Head) -> int | None:
    """The index of the chunk's one choice (None: no choice, or one the core refuses)."""
    if not given(head.choices):
        return None
    try:
        choices = _indexes_decoder.decode(head.choices)
    except _UNREADABLE:
        return None
    if not choices or not isinstance(choices[0].index, int) or isinstance(choices[0].index, bool):
        return None
    return choices[0].index


def _open_choice(
    chunks: list[bytes], index: int, first: bool, rid: str, blob: bytes
) -> list[bytes]:
    """A call's chunks opening its own choice, and no other. The core opens a chat stream
    once, every choice 0…n−1 at its first chunk with a choice (one stream of every
    choice: `run`, replay). A serve client may carry one stream_state per choice instead,
    each starting at null, and no call can tell which it does; so each choice opens on
    its own first answer (its role joined to its first delta, as vLLM's derender sends
    it), and a call answers the same whichever the client does. `first`: the core opened
    the stream in this call (its first n chunks are the openings, in order)."""
    state = decode_state(blob)
    n = state.opts.n
    if first:
        # (an index past the request's n: the core sends its role with its first text)
        return [chunks[index], *chunks[n:]] if index < n else chunks[n:]
    return [render.opening(state, rid, index).value, *chunks] if index < n else chunks


def _error_answer(value: bytes) -> Answer:
    try:
        body = _error_decoder.decode(value).error
    except (msgspec.DecodeError, msgspec.ValidationError):
        return error("derender failed", 500, "InternalServerError")
    status, kind = _STATUS.get(body.code, _BAD_REQUEST)
    return error(body.message, status, kind, body.param)
