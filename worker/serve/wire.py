"""`serve`'s wire: vLLM 0.33's derender request bodies (and ours for the Responses and
Messages APIs), our stream_state, vLLM's errors.

The bodies are vLLM's `DerenderChatRequest` / `DerenderChatStreamRequest` and
`DerenderCompletionRequest` / `DerenderCompletionStreamRequest`, one Struct per endpoint
(the literal `stream` picks the shape, as vLLM's union does). The parts the core reads are
kept as `msgspec.Raw` and handed to it verbatim inside a ChunkRecord (the core validates
them, as it validates a Kafka record), so the hot streaming path parses them once.
Unknown fields are ignored, as vLLM's pydantic models ignore them.
"""

from __future__ import annotations

import msgspec

# The JSON `null` (a Raw field the client sent as null, or left out: see `given`).
NULL = b"null"


def given(raw: msgspec.Raw) -> bool:
    """A Raw field the client sent with a value (neither left out nor null)."""
    n = len(raw)
    return n > 0 and (n != 4 or bytes(raw) != NULL)


class StreamState(msgspec.Struct, gc=False):
    """What `serve` returns as `stream_state`: one opaque string (base64 of our request
    state's msgpack envelope, `stream_state.seal`). A state of vLLM's own (no `state` field)
    decodes to the empty string and is refused."""

    state: str = ""


class ChatBody(msgspec.Struct, kw_only=True, gc=False):
    """POST /v1/chat/completions/derender."""

    stream: bool = False
    model: str | None = None
    # non-streaming
    generate_response: msgspec.Raw = msgspec.Raw()
    # streaming
    generate_chunk: msgspec.Raw = msgspec.Raw()
    stream_state: StreamState | None = None
    # both
    prompt_tokens: int | None = None
    prompt_token_ids: msgspec.Raw = msgspec.Raw()
    chat_request: msgspec.Raw = msgspec.Raw()


class CompletionBody(msgspec.Struct, kw_only=True, gc=False):
    """POST /v1/completions/derender. `prompt_tokens` / `prompt_token_ids` are a list per
    generate output when not streaming, one value when streaming."""

    stream: bool = False
    model: str | None = None
    generate_responses: msgspec.Raw = msgspec.Raw()
    generate_chunk: msgspec.Raw = msgspec.Raw()
    stream_state: StreamState | None = None
    prompt_tokens: msgspec.Raw = msgspec.Raw()
    prompt_token_ids: msgspec.Raw = msgspec.Raw()
    completion_request: msgspec.Raw = msgspec.Raw()


class FormatBody(msgspec.Struct, kw_only=True, gc=False):
    """POST /v1/responses/derender and /v1/messages/derender (ours: vLLM has no derender
    for these APIs): the chat body's shape, the API's own request in place of
    `chat_request`. A streamed call's `generate_chunk` is one generate event, or the
    string "[DONE]" at the generate stream's end (the API's closing events come then),
    with `request_id` naming the stream it ends."""

    stream: bool = False
    model: str | None = None
    generate_response: msgspec.Raw = msgspec.Raw()
    generate_chunk: msgspec.Raw = msgspec.Raw()
    stream_state: StreamState | None = None
    request_id: str | None = None
    prompt_tokens: int | None = None
    prompt_token_ids: msgspec.Raw = msgspec.Raw()


class ResponsesBody(FormatBody, kw_only=True, gc=False):
    responses_request: msgspec.Raw = msgspec.Raw()


class MessagesBody(FormatBody, kw_only=True, gc=False):
    messages_request: msgspec.Raw = msgspec.Raw()


class Head(msgspec.Struct, gc=False):
    """What the driver reads of a generate output before the core does: its id, the
    prompt ids it may carry and its choices (a streamed chunk's one choice: its index)."""

    request_id: str | None = None
    prompt_token_ids: msgspec.Raw = msgspec.Raw()
    choices: msgspec.Raw = msgspec.Raw()


class ErrorInfo(msgspec.Struct):
    """vLLM's `ErrorInfo`: `type` is an exception-style name, `code` the HTTP status."""

    message: str
    type: str
    param: str | None
    code: int


class ErrorResponse(msgspec.Struct):
    error: ErrorInfo


class ModelPermission(msgspec.Struct):
    """vLLM's (OpenAI's old) permission entry, with vLLM's values."""

    id: str
    object: str = "model_permission"
    created: int = 0
    allow_create_engine: bool = False
    allow_sampling: bool = True
    allow_logprobs: bool = True
    allow_search_indices: bool = False
    allow_view: bool = True
    allow_fine_tuning: bool = False
    organization: str = "*"
    group: str | None = None
    is_blocking: bool = False


class ModelCard(msgspec.Struct):
    id: str
    object: str
    created: int
    owned_by: str
    root: str
    parent: str | None
    max_model_len: int
    permission: list[ModelPermission]


class ModelList(msgspec.Struct):
    object: str
    data: list[ModelCard]


encode = msgspec.json.Encoder().encode
chat_decoder = msgspec.json.Decoder(ChatBody)
completion_decoder = msgspec.json.Decoder(CompletionBody)
responses_decoder = msgspec.json.Decoder(ResponsesBody)
messages_decoder = msgspec.json.Decoder(MessagesBody)
head_decoder = msgspec.json.Decoder(Head)
int_decoder = msgspec.json.Decoder(int | None)
int_list_decoder = msgspec.json.Decoder(list[int] | None)
ids_lists_decoder = msgspec.json.Decoder(list[list[int] | None] | None)
