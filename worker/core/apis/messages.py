"""The Anthropic Messages format (docs/integrate/messages.md): choice 0's chat pieces as
Messages events, and the whole `message` object.

A Messages request runs as a chat request (`chat_request`): its tools, tool choice,
stop sequences and thinking switch in chat's shape. Blocks go out as the text arrives:
a `thinking` block for reasoning, a `text` block for answer text, a `tool_use` block
per call; a change of kind closes the open block and opens the next, numbered 0, 1, …
in the order the model wrote them (`apis.parts_of`). A whole message applies the same
block events (`whole`). The format keeps no text: its state is which block is open,
the next block's index, and why choice 0 finished (`FormatState`: kind, index, call,
finish, stop).
"""

from __future__ import annotations

from typing import Any

import jiter
import msgspec

from worker.constants import CHUNK, ERROR, RESPONSE
from worker.core import errors
from worker.core.apis.parts import CALL, NONE, REASONING, TEXT, Part
from worker.core.errors import DerenderError
from worker.core.parsers.arguments.calls import TOOL_CALL_ID_PREFIX
from worker.core.render import Output
from worker.core.state import FormatState, RequestState
from worker.wire import messages as wire
from worker.wire.inbound import ChatRequest, ChunkRecord, NamedFunction, NamedToolChoice
from worker.wire.outbound import ToolCallDelta, UsageInfo

MESSAGE_ID_PREFIX = "msg_"
TOOL_USE_ID_PREFIX = "toolu_"

_encode = msgspec.json.Encoder().encode

# -- the request ---------------------------------------------------------------------------


def chat_request(record: ChunkRecord) -> ChatRequest | None:
    """The Messages request as the chat request it renders like (as vLLM's Messages
    server converts it): `stop_sequences` as `stop`, tools nested as chat's functions
    (`input_schema` as `parameters`), `tool_choice` `any` as `required` and `tool` as a
    named choice, `disable_parallel_tool_use` as `parallel_tool_calls: false`, and
    `thinking: {"type": "disabled"}` as `reasoning_effort: "none"`. `max_tokens` is the
    engine's to enforce: its cut arrives as a `length` finish (`max_tokens`)."""
    req = record.messages_request
    if req is None:
        return ChatRequest()
    tools = [_chat_tool(t) for t in req.tools or ()]
    choice, parallel = _chat_choice(req.tool_choice)
    thinking = req.thinking or {}
    return ChatRequest(
        skip_special_tokens=req.skip_special_tokens,
        stop=req.stop_sequences,
        stop_token_ids=req.stop_token_ids,
        tools=[t for t in tools if t is not None] or None,
        tool_choice=choice,
        parallel_tool_calls=parallel,
        chat_template_kwargs=req.chat_template_kwargs,
        reasoning_effort="none" if thinking.get("type") == "disabled" else None,
        max_tokens=req.max_tokens,
    )


def _chat_tool(tool: Any) -> dict[str, Any] | None:
    """A custom tool (`name`, `input_schema`) as chat's function; the hosted tools
    (web search, code execution, …: no `input_schema`) are dropped: no model output
    calls them."""
    if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
        return None
    if not isinstance(tool.get("input_schema"), dict):
        return None
    function = {"name": tool["name"], "parameters": tool["input_schema"]}
    if isinstance(tool.get("description"), str):
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


def _chat_choice(
    choice: dict[str, Any] | None,
) -> tuple[str | NamedToolChoice | None, bool | None]:
    if choice is None:
        return None, None
    parallel = False if choice.get("disable_parallel_tool_use") is True else None
    kind = choice.get("type")
    if kind in ("auto", "none"):
        return kind, parallel
    if kind == "any":
        return "required", parallel
    if kind == "tool" and isinstance(choice.get("name"), str):
        return NamedToolChoice(function=NamedFunction(name=choice["name"])), parallel
    raise DerenderError(
        f"tool_choice {msgspec.json.encode(choice).decode()[:200]} is not supported: use "
        '{"type": "auto" | "any" | "none"} or {"type": "tool", "name": …}',
        param="tool_choice",
    )


def open_format(record: ChunkRecord, req: ChatRequest | None) -> FormatState:
    return FormatState()


# -- ids and the stop reason ---------------------------------------------------------------


def message_id(request_id: str) -> str:
    """The message's id: the request id, with Anthropic's `msg_` prefix when it lacks one."""
    if request_id.startswith(MESSAGE_ID_PREFIX):
        return request_id
    return MESSAGE_ID_PREFIX + request_id


def tool_use_id(chat_id: str) -> str:
    """A tool call's id as a `tool_use` block carries it: the chat id's digits under
    Anthropic's `toolu_` prefix. Ids a format takes from the model's own text (Kimi K2's
    `functions.name:0`) or that it must shape (Mistral's nine characters) are kept: the
    model's chat template reads them back in the next turn."""
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
    (end of sequence, a stop token id) is `end_turn`. An aborted or unfinished message
    has none (null).
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


# -- the stream ----------------------------------------------------------------------------


def start(state: RequestState, request_id: str) -> list[Output]:
    """`message_start`: the empty message and its usage so far (the prompt's size when
    known; `message_delta` says the final counts)."""
    fs = _fs(state)
    fs.opened = True
    message = _message(state, request_id, [], None, None, state.prompt_tokens or 0, 0)
    return [_out(wire.MessageStart(message))]


def piece(state: RequestState, request_id: str, part: Part) -> list[Output]:
    """One record's events for choice 0; its finish is kept for `end`."""
    return [_out(e) for e in _events(_fs(state), part)]


def end(state: RequestState, request_id: str, usage: UsageInfo, abort: bool) -> list[Output]:
    """The open block closed, `message_delta` with why it stopped and the final usage,
    `message_stop`. An abort before choice 0 finished stops with no reason (null)."""
    fs = _fs(state)
    outputs = [_out(e) for e in _closing(fs)]
    reason, sequence = stop_reason(fs.finish or None, fs.stop, fs.call >= 0)
    delta = wire.StopDelta(reason, sequence)
    outputs.append(_out(wire.MessageDelta(delta, _usage(usage))))
    outputs.append(_out(wire.MessageStop()))
    return outputs


def _fs(state: RequestState) -> FormatState:
    if state.fmt is None:  # (a request that failed before it opened)
        state.fmt = FormatState()
    return state.fmt


def _out(event: wire.Event) -> Output:
    return Output(CHUNK, _encode(event))


# The block events of a stream, made once for the stream and for a whole message (which
# applies them: `whole`), so the two cannot disagree.
BlockEvent = wire.ContentBlockStart | wire.ContentBlockDelta | wire.ContentBlockStop


def _events(fs: FormatState, part: Part) -> list[BlockEvent]:
    """A part's block events: reasoning, then text, then calls (a part holds one kind
    when the record changed kind in another order: `apis.parts_of`)."""
    events: list[BlockEvent] = []
    if part.reasoning:
        if fs.kind != REASONING:
            _open(fs, REASONING, wire.ThinkingBlock(""), events)
        events.append(wire.ContentBlockDelta(fs.index, wire.ThinkingDelta(part.reasoning)))
    if part.content:
        if fs.kind != TEXT:
            _open(fs, TEXT, wire.TextBlock(""), events)
        events.append(wire.ContentBlockDelta(fs.index, wire.TextDelta(part.content)))
    for call in part.calls:
        _call(fs, call, events)
    if part.finish_reason is not None and not fs.finish:
        fs.finish, fs.stop = part.finish_reason, part.stop_reason
    return events


def _closing(fs: FormatState) -> list[BlockEvent]:
    """The open block stopped; an empty text block first when the message has none
    (clients read `content[0]`)."""
    events: list[BlockEvent] = []
    if fs.kind == NONE and fs.index == 0:
        _open(fs, TEXT, wire.TextBlock(""), events)
    _close(fs, events)
    return events


def _open(fs: FormatState, kind: int, block: wire.ContentBlock, events: list[BlockEvent]) -> None:
    _close(fs, events)
    events.append(wire.ContentBlockStart(fs.index, block))
    fs.kind = kind


def _close(fs: FormatState, events: list[BlockEvent]) -> None:
    if fs.kind != NONE:
        events.append(wire.ContentBlockStop(fs.index))
        fs.kind = NONE
        fs.index += 1


def _call(fs: FormatState, call: ToolCallDelta, events: list[BlockEvent]) -> None:
    """A call's header opens its tool_use block (`fs.call`: the chat index of the last
    call opened, -1 before any); its argument fragments follow in that block (a call's
    fragments all come before the next call's start, `Part`)."""
    function = call.function
    if call.id and function and function.name:
        _open(fs, CALL, wire.ToolUseBlock(tool_use_id(call.id), function.name, {}), events)
        fs.call = call.index
    args = function.arguments if function else None
    if args and fs.kind == CALL and call.index == fs.call:
        events.append(wire.ContentBlockDelta(fs.index, wire.InputJsonDelta(args)))


# -- whole messages and errors -------------------------------------------------------------


def whole(state: RequestState, request_id: str, parts: list[Part], usage: UsageInfo) -> Output:
    """A whole (`stream: false`) answer as one `message`: the block events a stream of
    the same parts makes, applied (as a client accumulates them), with the stream's
    stop reason and usage."""
    fs = FormatState()
    events = [e for part in parts for e in _events(fs, part)] + _closing(fs)
    blocks: list[wire.ContentBlock] = []
    args: dict[int, list[str]] = {}
    for e in events:
        if type(e) is wire.ContentBlockStart:
            blocks.append(msgspec.structs.replace(e.content_block))
        elif type(e) is wire.ContentBlockDelta:
            block, delta = blocks[e.index], e.delta
            if type(delta) is wire.ThinkingDelta and type(block) is wire.ThinkingBlock:
                block.thinking += delta.thinking
            elif type(delta) is wire.TextDelta and type(block) is wire.TextBlock:
                block.text += delta.text
            elif type(delta) is wire.InputJsonDelta:
                args.setdefault(e.index, []).append(delta.partial_json)
    for index, fragments in args.items():
        block = blocks[index]
        if type(block) is wire.ToolUseBlock:
            block.input = tool_input("".join(fragments))
    reason, sequence = stop_reason(fs.finish or None, fs.stop, fs.call >= 0)
    n = _usage(usage)
    message = _message(state, request_id, blocks, reason, sequence, n.input_tokens, n.output_tokens)
    return Output(RESPONSE, _encode(message))


def tool_input(args: str) -> dict[str, Any]:
    """A call's arguments as the `input` object, read as the official SDKs read the
    streamed fragments (jiter, partial mode): arguments a cut left unfinished give what
    was complete in them, as a client accumulating the stream holds. Arguments that are
    no JSON object give {}."""
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
    """The `error` event: a stream's last, and a whole request's error body."""
    kind = _ERROR_TYPES.get(exc.code, "api_error")
    return _encode(wire.ErrorEvent(wire.ErrorObject(kind, exc.message)))


def failed(state: RequestState, request_id: str, exc: DerenderError, whole: bool) -> list[Output]:
    """The request failed: one `error` event (no message_stop follows it, as the hosted
    API ends a failed stream), the body of a whole request's error too."""
    return [Output(ERROR, error_event(exc))]


def _usage(usage: UsageInfo) -> wire.Usage:
    return wire.Usage(usage.prompt_tokens, usage.completion_tokens)


def _message(
    state: RequestState,
    request_id: str,
    content: list[wire.ContentBlock],
    reason: wire.StopReason | None,
    sequence: str | None,
    input_tokens: int,
    output_tokens: int,
) -> wire.Message:
    usage = wire.Usage(input_tokens, output_tokens)
    rid = message_id(request_id)
    return wire.Message(rid, "message", "assistant", state.model, content, reason, sequence, usage)
