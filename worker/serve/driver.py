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
from worker.core.model import Model, Registry
from worker.core.state import decode_state
from worker.ports import Batch, InRecord, OutRecord, Partition, StateWrite, Stored
from worker.serve import wire
from worker.serve.answers import (
    CHAT_REQUEST_REQUIRED,
    EVENT,
    PROMPT_IDS_REQUIRED,
    UNREADABLE,
    Answer,
    Refusal,
    error,
    error_answer,
    invalid_body,
    missing,
)
from worker.serve.chunks import choice_index, empty_chunk, merged, open_choice
from worker.serve.stream_state import BadState, Issued, seal
from worker.serve.wire import given
from worker.wire import inbound

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


_FORMAT_DECODERS: dict[str, msgspec.json.Decoder[Any]] = {
    "responses": wire.responses_decoder,
    "messages": wire.messages_decoder,
}
_DONE = b'"[DONE]"'


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
        except UNREADABLE as exc:
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
        return self._whole_call(
            "chat", model, req.generate_response, req, b"chat_request", req.chat_request
        )

    def responses(self, body: bytes) -> Answer:
        """POST /v1/responses/derender (ours: the chat endpoint's protocol, the events of
        the OpenAI Responses API)."""
        try:
            return self._format("responses", body)
        except Refusal as r:
            return r.answer

    def messages(self, body: bytes) -> Answer:
        """POST /v1/messages/derender (the same, for the Anthropic Messages API)."""
        try:
            return self._format("messages", body)
        except Refusal as r:
            return r.answer

    def _format(self, api: str, body: bytes) -> Answer:
        field = f"{api}_request"
        try:
            req: wire.ResponsesBody | wire.MessagesBody = _FORMAT_DECODERS[api].decode(body)
        except UNREADABLE as exc:
            return invalid_body(exc)
        request = (
            req.responses_request if isinstance(req, wire.ResponsesBody) else req.messages_request
        )
        model = self._model(req.model)
        parsed = model.reasoning_parser is not None or model.tool_parser is not None
        if parsed and not given(request):
            return error(CHAT_REQUEST_REQUIRED.replace("chat_request", field, 1))
        if not req.stream:
            return self._whole_call(api, model, req.generate_response, req, field.encode(), request)
        if not given(req.generate_chunk):
            return missing("generate_chunk")
        if parsed and not given(req.prompt_token_ids):
            return error(PROMPT_IDS_REQUIRED)
        context = [
            (b"prompt_tokens", req.prompt_tokens),
            (b"prompt_token_ids", req.prompt_token_ids),
            (field.encode(), request),
        ]
        chunk = req.generate_chunk
        if len(chunk) < 16 and bytes(chunk).strip() == _DONE:
            # The generate stream's end: an `end` record, whose answer closes the stream.
            if req.request_id is None:
                return error(
                    'request_id is required with generate_chunk "[DONE]": the id of the '
                    "stream it ends",
                    param="request_id",
                )
            return self._stream(api, model, None, req.stream_state, context, req.request_id)
        return self._stream(api, model, chunk, req.stream_state, context)

    def _whole_call(
        self,
        api: str,
        model: Model,
        generate_response: msgspec.Raw,
        req: wire.ChatBody | wire.FormatBody,
        field: bytes,
        request: msgspec.Raw,
    ) -> Answer:
        """A non-streaming body of the chat shape (chat, Responses, Messages)."""
        if not given(generate_response):
            return missing("generate_response")
        try:
            head = wire.head_decoder.decode(generate_response)
        except UNREADABLE as exc:
            return invalid_body(exc, "generate_response")
        # vLLM: usage counts the request's prompt_tokens, else 0; the prompt ids seed the
        # decoder (and set the parser's start) from the request, else the generate output.
        fields = self._opening(head.request_id, "response", api, model)
        fields.append((b"prompt_tokens", _encode(req.prompt_tokens or 0)))
        ids = req.prompt_token_ids if given(req.prompt_token_ids) else head.prompt_token_ids
        if given(ids):
            fields.append((b"prompt_token_ids", bytes(ids)))
        if given(request):
            fields.append((field, bytes(request)))
        fields.append((b"generate_response", bytes(generate_response)))
        return self._whole(fields)

    def completion(self, body: bytes) -> Answer:
        try:
            return self._completion(body)
        except Refusal as r:
            return r.answer

    def _completion(self, body: bytes) -> Answer:
        try:
            req = wire.completion_decoder.decode(body)
        except UNREADABLE as exc:
            return invalid_body(exc)
        if req.stream:
            try:
                prompt_tokens = wire.int_decoder.decode(req.prompt_tokens or b"null")
            except UNREADABLE as exc:
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
        except UNREADABLE as exc:
            raise Refusal(invalid_body(exc, "generate_responses")) from None
        try:
            counts = wire.int_list_decoder.decode(req.prompt_tokens or b"null")
        except UNREADABLE as exc:
            raise Refusal(invalid_body(exc, "prompt_tokens")) from None
        try:
            ids = wire.ids_lists_decoder.decode(req.prompt_token_ids or b"null")
        except UNREADABLE as exc:
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
                return error_answer(o.value)
        for o in outputs:
            if o.kind == RESPONSE:
                return 200, o.value
        return error("derender produced no response", 500, "InternalServerError")

    def _stream(
        self,
        api: str,
        model: Model,
        chunk: msgspec.Raw | None,
        stream_state: wire.StreamState | None,
        context: list[tuple[bytes, Any]],
        ends: str | None = None,
    ) -> Answer:
        """One streamed call. `context` (the request's prompt_tokens, prompt ids and
        request, as sent) goes into the record only when it opens the stream. `chunk`
        None: the call ends the stream of request `ends` (an `end` record)."""
        if chunk is None:
            head = wire.Head(request_id=ends)
        else:
            try:
                head = wire.head_decoder.decode(chunk)
            except UNREADABLE as exc:
                return invalid_body(exc, "generate_chunk")
        bound = head.request_id or ""  # what the state is bound to
        kind = b'"chunk"' if chunk is not None else b'"end"'
        opened: list[int] | None
        if stream_state is None:
            fields = self._opening(head.request_id, "chunk", api, model)
            fields[2] = (b"type", kind)
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
            if chunk is None:
                fields.append((b"type", kind))
        if chunk is not None:
            fields.append((b"generate_chunk", chunk))
        outputs = self._run(_record(fields), rid, carried)
        events = api in _FORMAT_DECODERS
        chunks: list[bytes] = []
        for o in outputs:
            if o.kind == ERROR and not (events and o.value.startswith(EVENT)):
                return error_answer(o.value)
            if o.kind == CHUNK or o.kind == ERROR:
                chunks.append(o.value)
        writes = self.store.saved
        if not writes:
            return error("derender kept no state", 500, "InternalServerError")
        w = writes[-1]
        self.state_bytes.append(len(w.blob))
        if events:  # (the API's events, each as its SSE `data:` carries it)
            value = b'"events":[' + b",".join(chunks) + b"]"
        else:
            if api == "chat" and opened is not None and chunk is not None:
                index = choice_index(head)
                if index is not None and index not in opened:
                    chunks = open_choice(chunks, index, not opened, rid, w.blob)
                    opened = sorted([*opened, index])
            if not chunks:
                assert chunk is not None
                gen = _chunk_decoder.decode(chunk)
                value = empty_chunk(api, rid, decode_state(w.blob), gen)
            elif len(chunks) == 1:
                value = chunks[0]
            else:
                value = merged(chunks)
            value = b'"chunk":' + value
        tables = w.tables or (carried.tables or b"" if carried is not None else b"")
        state = seal(self.key, api, bound, w.seq, w.blob, tables, opened)
        self.issued.keep(
            api, bound, state.decode("ascii"), Stored(w.seq, w.blob, tables or None), opened
        )
        return 200, b"{" + value + b',"stream_state":{"state":"' + state + b'"}}'
