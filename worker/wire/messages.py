"""Outbound wire types of the Anthropic Messages API (docs/integrate/messages.md): the
streamed events and the whole `message` the worker publishes for `api: "messages"`.

Each event is one output record, its JSON exactly what the API's SSE `data:` line
carries (its `type` first, as the API writes it; the `event:` line is that type). Field
order is declaration order, so the bytes are fixed (replay is byte-identical).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

# Why a message stopped (Anthropic's `stop_reason`; null when the request was aborted).
StopReason = Literal["end_turn", "max_tokens", "stop_sequence", "tool_use"]


class Usage(msgspec.Struct):
    """Token counts: `input_tokens` is the rendered prompt's, `output_tokens` every
    token the engine generated (a stop sequence's included)."""

    input_tokens: int
    output_tokens: int


# --- content blocks ---------------------------------------------------------------------


class TextBlock(msgspec.Struct, tag_field="type", tag="text"):
    text: str


class ThinkingBlock(msgspec.Struct, tag_field="type", tag="thinking"):
    """The model's reasoning. `signature` is always "": the worker cannot sign it the way
    the hosted API does (docs/integrate/messages.md, "Differences from the hosted API")."""

    thinking: str
    signature: str = ""


class ToolUseBlock(msgspec.Struct, tag_field="type", tag="tool_use"):
    """A call of one of the request's tools; `input` is its arguments (a JSON object)."""

    id: str
    name: str
    input: dict[str, Any]


ContentBlock = TextBlock | ThinkingBlock | ToolUseBlock


class Message(msgspec.Struct):
    """The assistant's message: the whole (`stream: false`) answer, and, empty, the
    `message` of a stream's `message_start`."""

    id: str
    type: Literal["message"]
    role: Literal["assistant"]
    model: str
    content: list[ContentBlock]
    stop_reason: StopReason | None
    stop_sequence: str | None
    usage: Usage


# --- streamed events ----------------------------------------------------------------------


class MessageStart(msgspec.Struct, tag_field="type", tag="message_start"):
    message: Message


class ContentBlockStart(msgspec.Struct, tag_field="type", tag="content_block_start"):
    index: int
    content_block: ContentBlock


class TextDelta(msgspec.Struct, tag_field="type", tag="text_delta"):
    text: str


class ThinkingDelta(msgspec.Struct, tag_field="type", tag="thinking_delta"):
    thinking: str


class InputJsonDelta(msgspec.Struct, tag_field="type", tag="input_json_delta"):
    """A fragment of a tool call's arguments: the fragments joined are its JSON."""

    partial_json: str


class ContentBlockDelta(msgspec.Struct, tag_field="type", tag="content_block_delta"):
    index: int
    delta: TextDelta | ThinkingDelta | InputJsonDelta


class ContentBlockStop(msgspec.Struct, tag_field="type", tag="content_block_stop"):
    index: int


class StopDelta(msgspec.Struct):
    stop_reason: StopReason | None
    stop_sequence: str | None


class MessageDelta(msgspec.Struct, tag_field="type", tag="message_delta"):
    """The message's end: why it stopped, and its final usage."""

    delta: StopDelta
    usage: Usage


class MessageStop(msgspec.Struct, tag_field="type", tag="message_stop"):
    pass


# --- errors -------------------------------------------------------------------------------

ErrorType = Literal["invalid_request_error", "not_found_error", "api_error"]


class ErrorObject(msgspec.Struct):
    type: ErrorType
    message: str


class ErrorEvent(msgspec.Struct, tag_field="type", tag="error"):
    """A failed request: the stream's last event, and a whole request's answer (the
    body the hosted API sends with an error status)."""

    error: ErrorObject


Event = (
    MessageStart
    | ContentBlockStart
    | ContentBlockDelta
    | ContentBlockStop
    | MessageDelta
    | MessageStop
    | ErrorEvent
)
