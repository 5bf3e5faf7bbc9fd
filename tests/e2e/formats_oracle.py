"""The comparison for the Responses and Messages APIs: one request read by the official
SDK from two servers, the gateway and vLLM's coupled `/v1/responses` / `/v1/messages` on
the same engine.

A stream is read through the SDK's own accumulator (`responses.stream` and its terminal
event's response; `messages.stream` and `get_final_message`), a whole answer through
`create`. What a client reads of one answer is a `FormatView`; ids and timestamps are
not compared, tool-call ids only by their shape.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from typing import Any

import anthropic
import openai

CALL_ID = re.compile(r"^(call_|chatcmpl-tool-|toolu_)[0-9A-Za-z]+$")
TERMINAL = ("response.completed", "response.incomplete", "response.failed")


@dataclass
class FormatView:
    text: str | None
    reasoning: str | None
    calls: list[tuple[str, Any]]  # (name, the arguments parsed)
    call_ids_ok: bool
    stop: Any  # Responses: (status, incomplete reason); Messages: (stop_reason, stop_sequence)
    usage: dict[str, Any] | None  # input, output (and Responses: total) tokens


def _split(body: dict[str, Any], typed: tuple[str, ...]) -> dict[str, Any]:
    kwargs = {k: v for k, v in body.items() if k in typed}
    extra = {k: v for k, v in body.items() if k not in typed}
    if extra:
        kwargs["extra_body"] = extra
    return kwargs


_RESPONSES_TYPED = ("model", "input", "max_output_tokens", "temperature", "tools", "tool_choice")
# (`temperature` goes as extra_body: the SDK's `messages.stream` does not take it)
_MESSAGES_TYPED = (
    "model",
    "messages",
    "max_tokens",
    "tools",
    "tool_choice",
    "stop_sequences",
    "thinking",
)


def read_responses(client: openai.OpenAI, body: dict[str, Any], stream: bool) -> FormatView:
    kwargs = _split(body, _RESPONSES_TYPED)
    if not stream:
        return _response_view(client.responses.create(**kwargs))
    final = None
    with client.responses.stream(**kwargs) as events:
        for event in events:
            if event.type in TERMINAL:
                final = event.response  # type: ignore[union-attr]
    assert final is not None, "the stream had no terminal event"
    return _response_view(final)


def _response_view(r: Any) -> FormatView:
    text, reasoning, calls, ids = [], [], [], []
    for item in r.output:
        if item.type == "message":
            text += [c.text for c in item.content if c.type == "output_text"]
        elif item.type == "reasoning":
            reasoning += [c.text for c in item.content or []]
        elif item.type == "function_call":
            calls.append((item.name, json.loads(item.arguments)))
            ids.append(item.call_id)
    details = r.incomplete_details
    usage = r.usage
    return FormatView(
        text="".join(text) or None,
        reasoning="".join(reasoning) or None,
        calls=calls,
        call_ids_ok=all(CALL_ID.match(i or "") for i in ids),
        stop=(r.status, details.reason if details is not None else None),
        usage=None
        if usage is None
        else {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens,
        },
    )


def read_messages(client: anthropic.Anthropic, body: dict[str, Any], stream: bool) -> FormatView:
    kwargs = _split(body, _MESSAGES_TYPED)
    if not stream:
        return _message_view(client.messages.create(**kwargs))
    with client.messages.stream(**kwargs) as events:
        for _ in events:
            pass
        return _message_view(events.get_final_message())


def _message_view(m: Any) -> FormatView:
    text, reasoning, calls, ids = [], [], [], []
    for block in m.content:
        if block.type == "text":
            text.append(block.text)
        elif block.type == "thinking":
            reasoning.append(block.thinking)
        elif block.type == "tool_use":
            calls.append((block.name, block.input))
            ids.append(block.id)
    return FormatView(
        text="".join(text) or None,
        reasoning="".join(reasoning) or None,
        calls=calls,
        call_ids_ok=all(CALL_ID.match(i or "") for i in ids),
        stop=(m.stop_reason, m.stop_sequence),
        usage={"input_tokens": m.usage.input_tokens, "output_tokens": m.usage.output_tokens},
    )


def compare(
    api: str, body: dict[str, Any], stream: bool, ours: Any, oracle: Any
) -> tuple[FormatView, FormatView, dict[str, tuple[Any, Any]]]:
    """Both views and every field that differs: {field: (ours, the oracle's)}."""
    read = read_responses if api == "responses" else read_messages
    theirs = read(oracle, body, stream)
    mine = read(ours, body, stream)
    diff = {}
    for f in dataclasses.fields(FormatView):
        a, b = getattr(mine, f.name), getattr(theirs, f.name)
        if a != b:
            diff[f.name] = (a, b)
    return mine, theirs, diff
