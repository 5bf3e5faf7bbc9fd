"""The OpenAI Responses API's streamed events and response object, as the worker writes
them (docs/integrate/responses.md).

Every object with a `type` is a tagged Struct: msgspec writes the tag first, as the hosted
API writes it, then the fields in declaration order. An output item is a `msgspec.Raw`
where it was encoded earlier (a closed item kept in the state: the terminal event
splices the stored bytes, never re-encodes them).
Only the fields the worker fills are declared; every one the official SDK requires is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

# --- output items and their parts -------------------------------------------------------


class OutputText(msgspec.Struct, kw_only=True, tag_field="type", tag="output_text"):
    text: str
    annotations: list[Any] = []
    logprobs: list[Any] = []


class ReasoningText(msgspec.Struct, kw_only=True, tag_field="type", tag="reasoning_text"):
    text: str


class MessageItem(msgspec.Struct, kw_only=True, tag_field="type", tag="message"):
    id: str
    status: str
    role: str = "assistant"
    content: list[OutputText]


class ReasoningItem(msgspec.Struct, kw_only=True, tag_field="type", tag="reasoning"):
    id: str
    status: str
    summary: list[Any] = []
    content: list[ReasoningText]


class FunctionCallItem(msgspec.Struct, kw_only=True, tag_field="type", tag="function_call"):
    id: str
    status: str
    call_id: str
    name: str
    arguments: str


# A closed item is kept encoded (the state) and spliced back as `Raw`: the type checker
# knows; the schema (and msgspec, which never validates what it encodes) do not need to.
if TYPE_CHECKING:
    Item = MessageItem | ReasoningItem | FunctionCallItem | msgspec.Raw
else:
    Item = MessageItem | ReasoningItem | FunctionCallItem


# --- the response object ----------------------------------------------------------------


class InputTokensDetails(msgspec.Struct):
    cached_tokens: int = 0


class OutputTokensDetails(msgspec.Struct):
    reasoning_tokens: int = 0


class ResponseUsage(msgspec.Struct):
    input_tokens: int
    output_tokens: int
    total_tokens: int
    input_tokens_details: InputTokensDetails = msgspec.field(default_factory=InputTokensDetails)
    output_tokens_details: OutputTokensDetails = msgspec.field(default_factory=OutputTokensDetails)


class IncompleteDetails(msgspec.Struct):
    reason: str | None


class ResponseError(msgspec.Struct):
    code: str
    message: str


class Echo(msgspec.Struct, omit_defaults=True):
    """The request fields a response object repeats (kept in the state as JSON)."""

    tool_choice: str | dict[str, Any] = "auto"
    parallel_tool_calls: bool = True
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None


class Response(msgspec.Struct, kw_only=True):
    id: str
    object: str = "response"
    created_at: int
    status: str
    model: str
    output: list[Item]
    error: ResponseError | None = None
    incomplete_details: IncompleteDetails | None = None
    instructions: None = None
    max_output_tokens: int | None = None
    parallel_tool_calls: bool = True
    temperature: float | None = None
    tool_choice: str | dict[str, Any] = "auto"
    tools: list[Any] = []
    top_p: float | None = None
    usage: ResponseUsage | None = None


# --- streamed events: one tagged Struct per event type ----------------------------------


class _Event(msgspec.Struct, kw_only=True, tag_field="type"):
    sequence_number: int


class _Lifecycle(_Event, kw_only=True):
    response: Response


class Created(_Lifecycle, tag="response.created"):
    pass


class InProgress(_Lifecycle, tag="response.in_progress"):
    pass


class Completed(_Lifecycle, tag="response.completed"):
    pass


class Incomplete(_Lifecycle, tag="response.incomplete"):
    pass


class Failed(_Lifecycle, tag="response.failed"):
    pass


class _ItemEvent(_Event, kw_only=True):
    output_index: int
    item: Item


class ItemAdded(_ItemEvent, tag="response.output_item.added"):
    pass


class ItemDone(_ItemEvent, tag="response.output_item.done"):
    pass


class _PartEvent(_Event, kw_only=True):
    item_id: str
    output_index: int
    content_index: int = 0
    part: OutputText | ReasoningText


class PartAdded(_PartEvent, tag="response.content_part.added"):
    pass


class PartDone(_PartEvent, tag="response.content_part.done"):
    pass


class _Located(_Event, kw_only=True):
    item_id: str
    output_index: int


class TextDelta(_Located, kw_only=True, tag="response.output_text.delta"):
    content_index: int = 0
    delta: str
    logprobs: list[Any] = []


class TextDone(_Located, kw_only=True, tag="response.output_text.done"):
    content_index: int = 0
    text: str
    logprobs: list[Any] = []


class ReasoningDelta(_Located, kw_only=True, tag="response.reasoning_text.delta"):
    content_index: int = 0
    delta: str


class ReasoningDone(_Located, kw_only=True, tag="response.reasoning_text.done"):
    content_index: int = 0
    text: str


class ArgumentsDelta(_Located, kw_only=True, tag="response.function_call_arguments.delta"):
    delta: str


class ArgumentsDone(_Located, kw_only=True, tag="response.function_call_arguments.done"):
    arguments: str


Event = (
    Created
    | InProgress
    | Completed
    | Incomplete
    | Failed
    | ItemAdded
    | ItemDone
    | PartAdded
    | PartDone
    | TextDelta
    | TextDone
    | ReasoningDelta
    | ReasoningDone
    | ArgumentsDelta
    | ArgumentsDone
)
# The terminal events by the response's status.
TERMINAL: dict[str, type[Completed | Incomplete | Failed]] = {
    "completed": Completed,
    "incomplete": Incomplete,
    "failed": Failed,
}

_encoder = msgspec.json.Encoder()
encode = _encoder.encode
