"""Outbound wire types: the OpenAI payloads the worker publishes
(docs/integrate/contract.md, "Output records").

Field order is declaration order, so every payload's key order is fixed (determinism).
`UNSET` marks a field OpenAI leaves out (a delta carries only what changed); `None`
encodes as an explicit `null` where OpenAI sends one (`finish_reason`, `logprobs`).
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

DONE = b"[DONE]"


class UsageInfo(msgspec.Struct):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


# --- logprobs -------------------------------------------------------------------------


class TopLogprob(msgspec.Struct):
    token: str
    logprob: float
    bytes: list[int] | None


class ChatLogprob(msgspec.Struct):
    token: str
    logprob: float
    bytes: list[int] | None
    top_logprobs: list[TopLogprob]


class ChatLogprobs(msgspec.Struct):
    content: list[ChatLogprob] | None


class CompletionLogprobs(msgspec.Struct):
    text_offset: list[int]
    token_logprobs: list[float | None]
    tokens: list[str]
    top_logprobs: list[dict[str, float] | None]


# --- chat ------------------------------------------------------------------------------


class FunctionDelta(msgspec.Struct, omit_defaults=True):
    name: str | UnsetType = UNSET
    arguments: str | UnsetType = UNSET


class ToolCallDelta(msgspec.Struct, omit_defaults=True):
    index: int
    id: str | UnsetType = UNSET
    type: str | UnsetType = UNSET
    function: FunctionDelta | UnsetType = UNSET


class Delta(msgspec.Struct, omit_defaults=True):
    role: str | UnsetType = UNSET
    content: str | UnsetType = UNSET
    # Two spellings of the reasoning field: `reasoning` (current vLLM) or
    # `reasoning_content` (older clients); the model registry picks one.
    reasoning: str | UnsetType = UNSET
    reasoning_content: str | UnsetType = UNSET
    tool_calls: list[ToolCallDelta] | UnsetType = UNSET


class ChatChunkChoice(msgspec.Struct):
    index: int
    delta: Delta
    logprobs: ChatLogprobs | None = None
    finish_reason: str | None = None
    stop_reason: int | str | None = None


class ChatCompletionChunk(msgspec.Struct):
    id: str
    object: str
    created: int
    model: str
    choices: list[ChatChunkChoice]
    usage: UsageInfo | UnsetType = UNSET
    # The generate chunk's `metrics`, as a whole response's (vLLM's derender passes them
    # on each streamed chunk); left out when it had none.
    metrics: dict[str, Any] | UnsetType = UNSET


class FunctionCall(msgspec.Struct):
    name: str
    arguments: str


class ToolCall(msgspec.Struct):
    id: str
    type: str
    function: FunctionCall


class ChatMessage(msgspec.Struct, omit_defaults=True):
    role: str
    content: str | None
    reasoning: str | UnsetType | None = UNSET
    reasoning_content: str | UnsetType | None = UNSET
    tool_calls: list[ToolCall] | UnsetType = UNSET


class ChatChoice(msgspec.Struct):
    index: int
    message: ChatMessage
    logprobs: ChatLogprobs | None
    finish_reason: str | None
    stop_reason: int | str | None


class ChatCompletion(msgspec.Struct):
    id: str
    object: str
    created: int
    model: str
    choices: list[ChatChoice]
    usage: UsageInfo
    prompt_logprobs: list[dict[str, Any] | None] | UnsetType | None = UNSET
    kv_transfer_params: dict[str, Any] | UnsetType | None = UNSET
    # The generate output's `metrics` in vLLM 0.33's full shape (core/records/engine_metrics.py);
    # left out when it had none.
    metrics: dict[str, Any] | UnsetType | None = UNSET


# --- completion ------------------------------------------------------------------------


class CompletionChunkChoice(msgspec.Struct):
    index: int
    text: str
    logprobs: CompletionLogprobs | None = None
    finish_reason: str | None = None
    stop_reason: int | str | None = None


class CompletionChunk(msgspec.Struct):
    id: str
    object: str
    created: int
    model: str
    choices: list[CompletionChunkChoice]
    usage: UsageInfo | UnsetType = UNSET
    metrics: dict[str, Any] | UnsetType = UNSET  # as ChatCompletionChunk's


class Completion(msgspec.Struct):
    id: str
    object: str
    created: int
    model: str
    choices: list[CompletionChunkChoice]
    usage: UsageInfo
    kv_transfer_params: dict[str, Any] | UnsetType | None = UNSET
    metrics: dict[str, Any] | UnsetType | None = UNSET


# --- errors ----------------------------------------------------------------------------


class ErrorBody(msgspec.Struct):
    message: str
    type: str
    param: str | None
    code: str


class ErrorResponse(msgspec.Struct):
    error: ErrorBody


# The one JSON encoder for everything the worker publishes (built once, reused).
_encoder = msgspec.json.Encoder()
encode = _encoder.encode
