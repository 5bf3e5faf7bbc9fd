"""Events → OpenAI shapes: a streaming `Delta`, or a whole `ChatMessage`.

The reasoning field is named by the model registry: `reasoning` (current vLLM) or
`reasoning_content` (older clients, DeepSeek's API convention).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from msgspec import UNSET

from worker.core.parsers.events import Content, Event, Reasoning, ToolCallArgs, ToolCallStart
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


def to_delta(events: list[Event], reasoning_field: str = REASONING) -> Delta | None:
    """One delta for one feed's events; None when they say nothing.

    Text of a kind is joined; a call's header and arguments in the same feed share one
    `ToolCallDelta` (vLLM coalesces deltas of one index within a step).
    """
    if not events:
        return None
    if len(events) == 1:  # the common case: one piece of text
        ev = events[0]
        if isinstance(ev, Content):
            return Delta(content=ev.text)
        if isinstance(ev, Reasoning):
            delta = Delta()
            setattr(delta, _field(reasoning_field), ev.text)
            return delta
    content: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, tuple[ToolCallStart | None, list[str]]] = {}
    for ev in events:
        if isinstance(ev, Content):
            content.append(ev.text)
        elif isinstance(ev, Reasoning):
            reasoning.append(ev.text)
        elif isinstance(ev, ToolCallStart):
            calls[ev.index] = (ev, calls.get(ev.index, (None, []))[1])
        else:
            calls.setdefault(ev.index, (None, []))[1].append(ev.text)
    delta = Delta()
    if content:
        delta.content = "".join(content)
    if reasoning:
        setattr(delta, _field(reasoning_field), "".join(reasoning))
    if calls:
        delta.tool_calls = [_tool_delta(i, head, parts) for i, (head, parts) in calls.items()]
    if not (content or reasoning or calls):
        return None
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


def collect(
    events: list[Event], hide_reasoning: bool, content_default: str | None, empty: str | None
) -> Parsed:
    """Merge a whole output's events (the non-streaming answer)."""
    content: list[str] = []
    reasoning: list[str] = []
    heads: dict[int, ToolCallStart] = {}
    args: dict[int, list[str]] = {}
    for ev in events:
        if isinstance(ev, Content):
            content.append(ev.text)
        elif isinstance(ev, Reasoning):
            reasoning.append(ev.text)
        elif isinstance(ev, ToolCallStart):
            heads[ev.index] = ev
            args.setdefault(ev.index, [])
        elif isinstance(ev, ToolCallArgs):
            args.setdefault(ev.index, []).append(ev.text)
    text = "".join(reasoning)
    return Parsed(
        # Empty reasoning (`</think>` first) is `empty`: null for vLLM 0.33's engine
        # parsers, "" for its older think-tag classes.
        reasoning=None if hide_reasoning else (text or empty),
        content="".join(content) or content_default,
        tool_calls=[
            ToolCall(h.id, FUNCTION, FunctionCall(h.name, "".join(args[i])))
            for i, h in sorted(heads.items())
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
