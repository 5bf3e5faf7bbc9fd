"""Inbound wire types: the ChunkRecord (docs/integrate/contract.md, "Input records") and
vLLM's generate output.

Only the fields the worker reads are declared; msgspec skips unknown fields while
decoding, so producers may add fields without breaking us (and a chat request's
`messages` are never materialised). Decoders are built once, at import. Structs are
`gc=False`: decoded JSON cannot form reference cycles, so the collector need not track
them (faster decoding of every record).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec


class StreamOptions(msgspec.Struct, kw_only=True, gc=False):
    include_usage: bool | None = None
    continuous_usage_stats: bool | None = None


class NamedFunction(msgspec.Struct, kw_only=True, gc=False):
    name: str


class NamedToolChoice(msgspec.Struct, kw_only=True, gc=False):
    """`tool_choice: {"type": "function", "function": {"name": …}}`."""

    type: str = "function"
    function: NamedFunction


class ChatRequest(msgspec.Struct, kw_only=True, gc=False):
    """The parts of an OpenAI chat (or completion) request that shape the derendered output.

    One type serves both APIs: the completion-only fields (`echo`, `prompt`, `max_tokens`)
    and chat-only ones simply stay at their defaults for the other flavour.
    """

    stream_options: StreamOptions | None = None
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    include_reasoning: bool = True
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    include_stop_str_in_output: bool = False
    # chat: bool; completion: int (number of top logprobs). Both are accepted here.
    logprobs: bool | int | None = None
    top_logprobs: int | None = None
    n: int = 1
    tools: list[Any] | None = None
    tool_choice: str | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    # "none" switches thinking off for the formats that read it (DeepSeek V4, Kimi K3).
    reasoning_effort: str | None = None
    # completion only
    echo: bool = False
    # str, list of str, token ids, or lists of token ids (checked where echo uses it)
    prompt: str | list[Any] | None = None
    max_tokens: int | None = None


class Reasoning(msgspec.Struct, kw_only=True, gc=False):
    """A Responses request's `reasoning`: its `effort` becomes the chat `reasoning_effort`."""

    effort: str | None = None


class ResponsesRequest(msgspec.Struct, kw_only=True, gc=False):
    """The parts of an OpenAI Responses request (`api = "responses"`) the worker reads
    (docs/integrate/responses.md). vLLM's extensions (`stop`, `stop_token_ids`,
    `include_stop_str_in_output`, `skip_special_tokens`, `include_reasoning`,
    `chat_template_kwargs`) are read as vLLM's Responses server reads them; `input` and
    `instructions` are never materialised."""

    max_output_tokens: int | None = None
    # Responses' flat tools: {"type": "function", "name", "parameters", …}.
    tools: list[Any] | None = None
    # "auto" | "none" | "required" | {"type": "function", "name": …}
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    reasoning: Reasoning | None = None
    include_reasoning: bool = True
    temperature: float | None = None
    top_p: float | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    include_stop_str_in_output: bool = False
    skip_special_tokens: bool = True
    chat_template_kwargs: dict[str, Any] | None = None


class MessagesRequest(msgspec.Struct, kw_only=True, gc=False):
    """The parts of an Anthropic Messages request (`api = "messages"`) the worker reads
    (docs/integrate/messages.md); `messages` and `system` are never materialised."""

    max_tokens: int | None = None
    stop_sequences: list[str] | None = None
    # Anthropic's tools: {"name", "description", "input_schema"}.
    tools: list[Any] | None = None
    # {"type": "auto" | "any" | "tool" | "none", "name"?, "disable_parallel_tool_use"?}
    tool_choice: dict[str, Any] | None = None
    # {"type": "enabled" | "disabled", "budget_tokens"?}
    thinking: dict[str, Any] | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop_token_ids: list[int] | None = None
    skip_special_tokens: bool = True
    chat_template_kwargs: dict[str, Any] | None = None


class Usage(msgspec.Struct, kw_only=True, gc=False):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None


class LogprobEntry(msgspec.Struct, kw_only=True, gc=False):
    """One logprob position or candidate, in either of vLLM's generate shapes.

    Shape A carries `token: "token_id:N"` (+ `bytes: null`); shape B carries an integer
    `token_id` (+ `rank`). Both are one Struct so a payload decodes without trial and
    error; `core.logprobs` checks that exactly one of the two is present.
    """

    logprob: float
    token: str | None = None
    token_id: int | None = None
    rank: int | None = None
    bytes: list[int] | None = None
    top_logprobs: list[LogprobEntry] | None = None


class Logprobs(msgspec.Struct, kw_only=True, gc=False):
    content: list[LogprobEntry] | None = None


class StreamChoice(msgspec.Struct, kw_only=True, gc=False):
    index: int = 0
    token_ids: list[int] | None = None
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    logprobs: Logprobs | None = None


class GenerateStreamResponse(msgspec.Struct, kw_only=True, gc=False):
    """One SSE event of vLLM's `/inference/v1/generate` stream."""

    request_id: str | None = None
    choices: list[StreamChoice] = []
    usage: Usage | None = None
    prompt_token_ids: list[int] | None = None
    metrics: dict[str, Any] | None = None
    kv_transfer_params: dict[str, Any] | None = None


class ResponseChoice(msgspec.Struct, kw_only=True, gc=False):
    index: int = 0
    token_ids: list[int] | None = None
    # vLLM's non-streaming default is "stop".
    finish_reason: str | None = "stop"
    stop_reason: int | str | None = None
    logprobs: Logprobs | None = None


class GenerateResponse(msgspec.Struct, kw_only=True, gc=False):
    """A whole non-streaming generate output."""

    request_id: str | None = None
    choices: list[ResponseChoice] = []
    usage: Usage | None = None
    prompt_token_ids: list[int] | None = None
    prompt_logprobs: list[dict[str, Any] | None] | None = None
    kv_transfer_params: dict[str, Any] | None = None
    metrics: dict[str, Any] | None = None


RecordType = Literal["chunk", "response", "end", "abort"]
# "responses" and "messages" are formats over the chat semantics (worker/core/apis/).
Api = Literal["chat", "completion", "responses", "messages"]

# Kafka numbers partitions with a signed 32-bit integer.
MAX_PARTITION = 2**31 - 1


class ChunkRecord(msgspec.Struct, kw_only=True, gc=False):
    """The value of one input Kafka record (docs/integrate/contract.md, "Input records")."""

    request_id: str
    seq: Annotated[int, msgspec.Meta(ge=0)]
    type: RecordType = "chunk"
    api: Api | None = None
    model: str | None = None
    created: int | None = None
    prompt_tokens: int | None = None
    prompt_token_ids: list[int] | None = None
    chat_request: ChatRequest | None = None
    completion_request: ChatRequest | None = None
    # With `api = "responses"` / `"messages"`: the request the prompt was rendered from.
    responses_request: ResponsesRequest | None = None
    messages_request: MessagesRequest | None = None
    generate_chunk: GenerateStreamResponse | None = None
    generate_response: GenerateResponse | None = None
    # With `type = "response"` and api completion: one whole generate output per prompt
    # (vLLM's completion render returns one generate request per prompt), answered by
    # one `text_completion` whose choices are re-indexed in order. Use instead of
    # `generate_response`.
    generate_responses: list[GenerateResponse] | None = None
    # The output topic's partition every output of the request goes to (a gateway's reply
    # partition); None: the key's partition. Read from seq 0, like the rest of the context.
    reply_partition: Annotated[int, msgspec.Meta(ge=0, le=MAX_PARTITION)] | None = None


class RecordHead(msgspec.Struct):
    """What can still be read from a record that failed full validation."""

    request_id: Any = None
    seq: Any = None


class Envelope(msgspec.Struct):
    """A replay input line in Kafka form: `{"key", "value", "timestamp"}`."""

    value: Any
    key: str | None = None
    timestamp: int | None = None


_record_decoder = msgspec.json.Decoder(ChunkRecord)
_head_decoder = msgspec.json.Decoder(RecordHead)


class BadRecord(Exception):
    """A record that cannot be processed as a ChunkRecord; says why and what it could read."""

    def __init__(
        self,
        reason: str,
        request_id: str | None = None,
        seq: int | None = None,
        dead_letter: bool = True,
    ):
        super().__init__(reason)
        self.reason = reason
        self.request_id = request_id
        self.seq = seq
        # False for records that parse but break a bound (e.g. size): only an error.
        self.dead_letter = dead_letter


def read_head(value: bytes) -> tuple[str | None, int | None]:
    try:
        head = _head_decoder.decode(value)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None, None
    rid = head.request_id if isinstance(head.request_id, str) else None
    seq = head.seq if type(head.seq) is int and head.seq >= 0 else None
    return rid, seq


def decode_record(value: bytes, key: str | None) -> ChunkRecord:
    """Decode one input value; raise `BadRecord` for anything that is not a valid record.

    Checks the schema and that the Kafka key equals the
    `request_id`, since the key is what keeps a request on one partition.
    """
    try:
        record = _record_decoder.decode(value)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        rid, seq = read_head(value)
        raise BadRecord(f"invalid ChunkRecord: {exc}", rid, seq) from None
    if key is not None and key != record.request_id:
        raise BadRecord(
            f"record key {key!r} does not equal request_id {record.request_id!r}",
            record.request_id,
            record.seq,
        )
    return record
