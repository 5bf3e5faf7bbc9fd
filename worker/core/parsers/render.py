"""Events → OpenAI shapes: a streaming `Delta`, or a whole `ChatMessage`, both from the
one `merge` of the events.

The reasoning field is named by the model registry: `reasoning` (current vLLM) or
`reasoning_content` (older clients, DeepSeek's API convention).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from msgspec import UNSET

from worker.core.parsers.language.events import (
    Content,
    Event,
    Reasoning,
    ToolCallArgs,
    ToolCallStart,
)
from worker.wire.outbound import (
    ChatMessage,
    Delta,
    FunctionCall,
    FunctionDelta,
    ToolCall,
    ToolCallDelta,
)

REASONING = "reasoning"
REASONING_CONTENT = "reasoning_content"
FUNCTION = "function"


class Merged(NamedTuple):
    """Events merged: text of a kind joined (None when there was none), and per call
    index its header (None when the events had none) and argument fragments, in the
    order the calls first appear."""

    content: str | None
    reasoning: str | None
    calls: dict[int, tuple[ToolCallStart | None, list[str]]]


def merge(events: list[Event]) -> Merged:
    """The one merge of events, for a streamed delta and for a whole message alike."""
    content: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, tuple[ToolCallStart | None, list[str]]] = {}
    for ev in events:
        if isinstance(ev, Content):
            content.append(ev.text)
        elif isinstance(ev, Reasoning):
            reasoning.append(ev.text)
        elif isinstance(ev, ToolCallStart):
            calls[ev.index] = (ev, calls[ev.index][1] if ev.index in calls else [])
        else:
            calls.setdefault(ev.index, (None, []))[1].append(ev.text)
    return Merged(
        "".join(content) if content else None,
        "".join(reasoning) if reasoning else None,
        calls,
    )


def to_delta(events: list[Event], reasoning_field: str = REASONING) -> Delta | None:
    """One delta for one feed's events; None when they say nothing.

    Text of a kind is joined; a call's header and arguments in the same feed share one
    `ToolCallDelta` (vLLM coalesces deltas of one index within a step).
    """
    if not events:
        return None
    if len(events) == 1:  # the common cases: one piece of text, or of a call's arguments
        ev = events[0]
        if isinstance(ev, Content):
            return Delta(content=ev.text)
        if isinstance(ev, Reasoning):
            delta = Delta()
            setattr(delta, _field(reasoning_field), ev.text)
            return delta
        if isinstance(ev, ToolCallArgs):
            function = FunctionDelta(arguments=ev.text)
            return Delta(tool_calls=[ToolCallDelta(index=ev.index, function=function)])
    merged = merge(events)
    delta = Delta()
    if merged.content is not None:
        delta.content = merged.content
    if merged.reasoning is not None:
        setattr(delta, _field(reasoning_field), merged.reasoning)
    if merged.calls:
        delta.tool_calls = [
            _tool_delta(i, head, parts) for i, (head, parts) in merged.calls.items()
        ]
    return delta


def _field(name: str) -> str:
    if name not in (REASONING, REASONING_CONTENT):
        raise ValueError(f"reasoning field must be {REASONING!r} or {REASONING_CONTENT!r}")
    return name


def _tool_delta(index: int, head: ToolCallStart | None, parts: list[str]) -> ToolCallDelta:
    args = "".join(parts) if parts else UNSET
    if head is None:
        return ToolCallDelta(index=index, function=FunctionDelta(arguments=args))
    return ToolCallDelta(
        index=index,
        id=head.id,
        type=FUNCTION,
        function=FunctionDelta(name=head.name, arguments=args),
    )


@dataclass
class Parsed:
    """A whole output split: what a non-streaming `chat.completion` message carries."""

    reasoning: str | None
    content: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning_tokens: int = 0
    # Per output token: True for reasoning tokens whose logprobs must not be sent
    # (include_reasoning: false); None when there are none.
    hidden: list[bool] | None = None
    events: list[Event] | None = None  # the events merged here, in the model's order


def collect(
    events: list[Event], hide_reasoning: bool, content_default: str | None, empty: str | None
) -> Parsed:
    """A whole output's events as one message (the non-streaming answer); calls in
    index order, those without a header left out."""
    merged = merge(events)
    return Parsed(
        # Empty reasoning (`</think>` first) is `empty`: null for vLLM 0.33's engine
        # parsers, "" for its older think-tag classes.
        reasoning=None if hide_reasoning else (merged.reasoning or empty),
        content=merged.content or content_default,
        tool_calls=[
            ToolCall(head.id, FUNCTION, FunctionCall(head.name, "".join(parts)))
            for _, (head, parts) in sorted(merged.calls.items())
            if head is not None
        ],
    )


def to_message(
    parsed: Parsed, reasoning_field: str = REASONING, role: str = "assistant"
) -> ChatMessage:
    msg = ChatMessage(role=role, content=parsed.content)
    if parsed.reasoning is not None:
        setattr(msg, _field(reasoning_field), parsed.reasoning)
    if parsed.tool_calls:
        msg.tool_calls = parsed.tool_calls
    return msg
