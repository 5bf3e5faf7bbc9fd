"""The Anthropic Messages API as an output format (docs/integrate/messages.md).

A Messages request runs as a chat request (the same tokenizer, parsers, stop strings and
usage); this module turns what one record says for choice 0 — reasoning, answer text,
tool calls' headers and argument fragments, the finish — into Messages events, and a
whole chat answer into one `message`. Its state (`MessagesState`) is a few numbers: which
block is open, how many were opened, each tool call's block, and why the message stopped.

Blocks go out as the text arrives: a `thinking` block for reasoning, a `text` block for
answer text, a `tool_use` block per call; a change of kind closes the open block and
opens the next, numbered 0, 1, 2, … Within one record reasoning comes first, then text,
then calls, as a whole message orders them.
"""

from __future__ import annotations

from typing import Any

import jiter
import msgspec

from worker.core import errors
from worker.core.errors import DerenderError
from worker.core.parsers.arguments.calls import TOOL_CALL_ID_PREFIX
from worker.wire import messages as wire
from worker.wire.outbound import ToolCall, ToolCallDelta

MESSAGE_ID_PREFIX = "msg_"
TOOL_USE_ID_PREFIX = "toolu_"

# The open block's kind (MessagesState.kind).
NONE, THINKING, TEXT, TOOL = 0, 1, 2, 3

_KINDS = {wire.ThinkingBlock: THINKING, wire.TextBlock: TEXT, wire.ToolUseBlock: TOOL}

_encode = msgspec.json.Encoder().encode


class MessagesState(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    """A Messages stream between records (kept in the request's state)."""

    started: bool = False  # message_start is out
    kind: int = NONE  # the open block's kind; its index is `blocks - 1`
    blocks: int = 0  # blocks opened so far
    # Per chat call index, its block (-1: no header seen): arguments go to their call's block.
    calls: list[int] = []
    # Why the message stopped, from the record that finished choice 0 ("": not yet).
    stop_reason: str = ""
    stop_sequence: str | None = None
    finished: bool = False  # choice 0 finished (its finish reason was seen)
    ended: bool = False  # message_stop is out


def message_id(request_id: str) -> str:
    """The message's id: the request id, with Anthropic's `msg_` prefix when it lacks one."""
    if request_id.startswith(MESSAGE_ID_PREFIX):
        return request_id
    return MESSAGE_ID_PREFIX + request_id


def tool_use_id(chat_id: str) -> str:
    """A tool call's id as a `tool_use` block carries it: the chat id's digits under
    Anthropic's `toolu_` prefix. Ids a format takes from the model's own text (Kimi K2's
    `functions.name:0`, Mistral's nine characters) are kept: the model's chat template
    reads them back in the next turn."""
    if chat_id.startswith(TOOL_CALL_ID_PREFIX):
        return TOOL_USE_ID_PREFIX + chat_id[len(TOOL_CALL_ID_PREFIX) :]
    return chat_id


def stop_reason(
    finish_reason: str | None, matched: int | str | None, tool_used: bool
) -> tuple[wire.StopReason | None, str | None]:
    """The chat finish as Anthropic's (`stop_reason`, `stop_sequence`).

    A length cut is `max_tokens`; a matched stop string (chat's `stop_reason`, a str) is
    `stop_sequence` with that string, even after a tool call (the string may have cut
    the call short); a finish after a tool call is `tool_use`; any other engine stop
    (end of sequence, a stop token id) is `end_turn`. An aborted or unfinished
    message has none (null).
    """
    if finish_reason == "length":
        return "max_tokens", None
    if finish_reason not in ("stop", "tool_calls"):
        return None, None
    if isinstance(matched, str):
        return "stop_sequence", matched
    if finish_reason == "tool_calls" or tool_used:
        return "tool_use", None
    return "end_turn", None


# --- the stream ---------------------------------------------------------------------------


def start(st: MessagesState, request_id: str, model: str, input_tokens: int) -> list[bytes]:
    """`message_start` (once): the empty message, its usage so far."""
    if st.started:
        return []
    st.started = True
    message = wire.Message(
        message_id(request_id),
        "message",
        "assistant",
        model,
        [],
        None,
        None,
        wire.Usage(input_tokens, 0),
    )
    return [_encode(wire.MessageStart(message))]


def piece(
    st: MessagesState,
    reasoning: str | None,
    content: str | None,
    calls: list[ToolCallDelta] | None,
    finish_reason: str | None = None,
    matched: int | str | None = None,
) -> list[bytes]:
    """The events of one record of choice 0: its reasoning, text and calls in that
    order, and (`finish_reason`) why it finished, kept for `end`. `matched` is the chat
    `stop_reason`: the stop string or token id that ended it."""
    out: list[bytes] = []
    if reasoning:
        if st.kind != THINKING:
            _open(st, wire.ThinkingBlock(""), out)
        out.append(_encode(wire.ContentBlockDelta(st.blocks - 1, wire.ThinkingDelta(reasoning))))
    if content:
        if st.kind != TEXT:
            _open(st, wire.TextBlock(""), out)
        out.append(_encode(wire.ContentBlockDelta(st.blocks - 1, wire.TextDelta(content))))
    for call in calls or ():
        _call(st, call, out)
    if finish_reason is not None and not st.finished:
        st.finished = True
        reason, st.stop_sequence = stop_reason(finish_reason, matched, bool(st.calls))
        st.stop_reason = reason or ""
    return out


def end(st: MessagesState, input_tokens: int, output_tokens: int) -> list[bytes]:
    """The stream's end: the open block closed (an empty text block first when the
    message has none: clients read `content[0]`), `message_delta` with why it
    stopped and the final usage, `message_stop`."""
    if st.ended:
        return []
    st.ended = True
    out: list[bytes] = []
    if st.blocks == 0:
        _open(st, wire.TextBlock(""), out)
    _close(st, out)
    reason: Any = st.stop_reason or None
    usage = wire.Usage(input_tokens, output_tokens)
    out.append(_encode(wire.MessageDelta(wire.StopDelta(reason, st.stop_sequence), usage)))
    out.append(_encode(wire.MessageStop()))
    return out


def _open(st: MessagesState, block: wire.ContentBlock, out: list[bytes]) -> None:
    _close(st, out)
    out.append(_encode(wire.ContentBlockStart(st.blocks, block)))
    st.blocks += 1
    st.kind = _KINDS[type(block)]


def _close(st: MessagesState, out: list[bytes]) -> None:
    if st.kind != NONE:
        out.append(_encode(wire.ContentBlockStop(st.blocks - 1)))
        st.kind = NONE


def _call(st: MessagesState, call: ToolCallDelta, out: list[bytes]) -> None:
    """A call's header opens its tool_use block; its argument fragments go to that
    block. (Fragments of a call whose header was never sent say nothing: the chat
    answer leaves such a call out too.)"""
    function = call.function
    if call.id and function and function.name:
        _open(st, wire.ToolUseBlock(tool_use_id(call.id), function.name, {}), out)
        while len(st.calls) <= call.index:
            st.calls.append(-1)
        st.calls[call.index] = st.blocks - 1
    args = function.arguments if function else None
    if not args or call.index >= len(st.calls) or st.calls[call.index] < 0:
        return
    out.append(_encode(wire.ContentBlockDelta(st.calls[call.index], wire.InputJsonDelta(args))))


# --- whole messages and errors ------------------------------------------------------------


def whole(
    request_id: str,
    model: str,
    reasoning: str | None,
    content: str | None,
    tool_calls: list[ToolCall],
    finish_reason: str | None,
    matched: int | str | None,
    input_tokens: int,
    output_tokens: int,
) -> bytes:
    """A whole (`stream: false`) answer as one `message`: the blocks a stream of the same
    tokens would open, in the same order (an empty text block when there is none)."""
    blocks: list[wire.ContentBlock] = []
    if reasoning:
        blocks.append(wire.ThinkingBlock(reasoning))
    if content:
        blocks.append(wire.TextBlock(content))
    for call in tool_calls:
        blocks.append(wire.ToolUseBlock(tool_use_id(call.id), call.function.name, tool_input(call)))
    if not blocks:
        blocks.append(wire.TextBlock(""))
    reason, sequence = stop_reason(finish_reason, matched, bool(tool_calls))
    return _encode(
        wire.Message(
            message_id(request_id),
            "message",
            "assistant",
            model,
            blocks,
            reason,
            sequence,
            wire.Usage(input_tokens, output_tokens),
        )
    )


def tool_input(call: ToolCall) -> dict[str, Any]:
    """A call's arguments as the `input` object, read as the official SDKs read the
    streamed fragments (jiter, partial mode): arguments a cut left unfinished give what
    was complete in them, as a client accumulating the stream holds. Arguments that are
    no JSON object give {}."""
    args = call.function.arguments
    if not args:
        return {}
    try:
        value = jiter.from_json(args.encode(), partial_mode=True, cache_mode=False)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


# Our error codes as Anthropic's error types: the client's request or model, else a
# failure of the serving side.
_ERROR_TYPES: dict[str, wire.ErrorType] = {
    errors.INVALID_REQUEST: "invalid_request_error",
    errors.MODEL_NOT_FOUND: "not_found_error",
}


def error_event(exc: DerenderError) -> bytes:
    """The `error` event (a stream's last) and a whole request's error body."""
    kind = _ERROR_TYPES.get(exc.code, "api_error")
    return _encode(wire.ErrorEvent(wire.ErrorObject(kind, exc.message)))
