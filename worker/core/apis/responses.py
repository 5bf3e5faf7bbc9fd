"""The OpenAI Responses format (docs/integrate/responses.md): choice 0's chat pieces as
Responses events, and the whole `response` object.

One item is open at a time, as vLLM's Responses server streams them (vLLM 0.33.0
vllm/entrypoints/openai/responses/streaming_events.py): reasoning, then the message,
then one function_call item per tool call; a change of kind closes the open item with
its `.done` events. The stream's end closes the last one and sends
`response.completed` (or `response.incomplete` after a length cut or an abort) with
every item and the usage. A whole response is the same machinery fed one `Part`, so
its `response` is byte for byte the stream's last one.

The API repeats each item's whole text in its `.done` events and every item in the
terminal event, so the format keeps them (`FormatState.text`, `.items`: each closed
item's JSON, spliced into the terminal event as is), bounded by `max_output_bytes`
(docs/design/state.md, "Formats that repeat their output").
"""

from __future__ import annotations

from typing import Any

import msgspec

from worker.constants import CHUNK, ERROR, RESPONSE
from worker.core.apis.parts import CALL, NONE, REASONING, TEXT, Part, item_id
from worker.core.errors import DerenderError
from worker.core.render import Output, error_output
from worker.core.state import FormatState, RequestState
from worker.wire import responses as rw
from worker.wire.inbound import ChatRequest, ChunkRecord, NamedFunction, NamedToolChoice
from worker.wire.outbound import ToolCallDelta, UsageInfo

_PREFIX = {REASONING: "rs", TEXT: "msg", CALL: "fc"}
_echo_decoder = msgspec.json.Decoder(rw.Echo)
_EMPTY: list[Any] = []


# -- the request ----------------------------------------------------------------------


def chat_request(record: ChunkRecord) -> ChatRequest | None:
    """The Responses request as the chat request it renders like: flat function tools
    nested as chat's, a named tool choice as chat's, `reasoning.effort` as
    `reasoning_effort`. Tools of other types (hosted tools) are dropped: no model output
    calls them."""
    req = record.responses_request
    if req is None:
        return ChatRequest()
    tools = [_chat_tool(t) for t in req.tools or () if isinstance(t, dict)]
    return ChatRequest(
        skip_special_tokens=req.skip_special_tokens,
        include_reasoning=req.include_reasoning,
        stop=req.stop,
        stop_token_ids=req.stop_token_ids,
        include_stop_str_in_output=req.include_stop_str_in_output,
        tools=[t for t in tools if t is not None] or None,
        tool_choice=_chat_choice(req.tool_choice),
        parallel_tool_calls=req.parallel_tool_calls,
        chat_template_kwargs=req.chat_template_kwargs,
        reasoning_effort=req.reasoning.effort if req.reasoning is not None else None,
    )


def _chat_tool(tool: dict[str, Any]) -> dict[str, Any] | None:
    if tool.get("type") != "function" or not isinstance(tool.get("name"), str):
        return None
    function = {k: tool[k] for k in ("name", "description", "parameters", "strict") if k in tool}
    return {"type": "function", "function": function}


def _chat_choice(choice: str | dict[str, Any] | None) -> str | NamedToolChoice | None:
    if choice is None or isinstance(choice, str):
        return choice
    if choice.get("type") == "function" and isinstance(choice.get("name"), str):
        return NamedToolChoice(function=NamedFunction(name=choice["name"]))
    raise DerenderError(
        f"tool_choice {msgspec.json.encode(choice).decode()[:200]} is not supported: use "
        '"auto", "none", "required" or {"type": "function", "name": …}',
        param="tool_choice",
    )


def open_format(record: ChunkRecord, req: ChatRequest | None) -> FormatState:
    r = record.responses_request
    echo = rw.Echo()
    if r is not None:
        echo = rw.Echo(
            tool_choice=r.tool_choice if r.tool_choice is not None else "auto",
            parallel_tool_calls=r.parallel_tool_calls is not False,
            max_output_tokens=r.max_output_tokens,
            temperature=r.temperature,
            top_p=r.top_p,
        )
    return FormatState(echo=rw.encode(echo))


# -- the stream -----------------------------------------------------------------------


def start(state: RequestState, request_id: str) -> list[Output]:
    fs = _fs(state)
    fs.opened = True
    response = _response(state, request_id, "in_progress", [])
    return [_out(fs, rw.Created, response=response), _out(fs, rw.InProgress, response=response)]


def piece(state: RequestState, request_id: str, part: Part) -> list[Output]:
    fs = _fs(state)
    outputs: list[Output] = []
    if part.reasoning:
        _text(fs, request_id, REASONING, part.reasoning, outputs)
    if part.content:
        _text(fs, request_id, TEXT, part.content, outputs)
    for call in part.calls:
        _call(fs, request_id, call, outputs)
    if part.finish_reason is not None:
        fs.finish, fs.stop = part.finish_reason, part.stop_reason
    return outputs


def end(state: RequestState, request_id: str, usage: UsageInfo, abort: bool) -> list[Output]:
    outputs, _ = _terminal(state, request_id, usage, abort)
    return outputs


def whole(state: RequestState, request_id: str, parts: list[Part], usage: UsageInfo) -> Output:
    for part in parts:
        piece(state, request_id, part)
    _, response = _terminal(state, request_id, usage, False)
    return Output(RESPONSE, rw.encode(response))


def failed(state: RequestState, request_id: str, exc: DerenderError, whole: bool) -> list[Output]:
    """A stream's `response.failed` (opened first if it was not: the SDK reads nothing
    before `response.created`); a whole request's error body, as the API answers one."""
    if whole:
        return [error_output(exc)]
    try:
        fs = _fs(state)
        outputs = [] if fs.opened else start(state, request_id)
        error = rw.ResponseError("server_error", f"{exc.code}: {exc.message}")
        output: list[rw.Item] = [msgspec.Raw(b) for b in fs.items]
        response = _response(state, request_id, "failed", output, error=error)
        event = _out(fs, rw.Failed, response=response)
        return [*outputs, Output(ERROR, event.value)]
    except Exception:  # (must not raise: the request is already failing)
        return [error_output(exc)]


# -- items ----------------------------------------------------------------------------


def _fs(state: RequestState) -> FormatState:
    if state.fmt is None:  # (a request that failed before it opened)
        state.fmt = FormatState()
    return state.fmt


def _out(fs: FormatState, event: type[rw.Event], **fields: Any) -> Output:
    """One event, numbered: the stream's next `sequence_number`."""
    value = rw.encode(event(sequence_number=fs.seq, **fields))
    fs.seq += 1
    return Output(CHUNK, value)


def _text(fs: FormatState, request_id: str, kind: int, text: str, outputs: list[Output]) -> None:
    if fs.kind != kind:
        _close(fs, request_id, "completed", outputs)
        _open(fs, request_id, kind, outputs)
    iid = item_id(_PREFIX[kind], request_id, fs.index)
    delta = rw.TextDelta if kind == TEXT else rw.ReasoningDelta
    outputs.append(_out(fs, delta, item_id=iid, output_index=fs.index, delta=text))
    _keep(fs, text)


def _call(fs: FormatState, request_id: str, call: ToolCallDelta, outputs: list[Output]) -> None:
    fn = call.function
    name = fn.name if not isinstance(fn, msgspec.UnsetType) else msgspec.UNSET
    args = fn.arguments if not isinstance(fn, msgspec.UnsetType) else msgspec.UNSET
    if not isinstance(call.id, msgspec.UnsetType) or not isinstance(name, msgspec.UnsetType):
        _close(fs, request_id, "completed", outputs)
        fs.call = call.index
        fs.call_id = call.id if not isinstance(call.id, msgspec.UnsetType) else ""
        fs.name = name if not isinstance(name, msgspec.UnsetType) else ""
        _open(fs, request_id, CALL, outputs)
    elif fs.kind != CALL or fs.call != call.index:
        raise DerenderError(
            f"arguments of tool call {call.index} arrived outside that call", param="tool_calls"
        )
    if isinstance(args, str) and args:
        iid = item_id(_PREFIX[CALL], request_id, fs.index)
        outputs.append(_out(fs, rw.ArgumentsDelta, item_id=iid, output_index=fs.index, delta=args))
        _keep(fs, args)


def _keep(fs: FormatState, text: str) -> None:
    fs.text += text
    fs.held += len(text.encode())


def _open(fs: FormatState, request_id: str, kind: int, outputs: list[Output]) -> None:
    fs.kind, fs.text = kind, ""
    i = fs.index
    iid = item_id(_PREFIX[kind], request_id, i)
    if kind == REASONING:
        item: rw.Item = rw.ReasoningItem(id=iid, status="in_progress", content=[])
        outputs.append(_out(fs, rw.ItemAdded, output_index=i, item=item))
        part: rw.OutputText | rw.ReasoningText = rw.ReasoningText(text="")
    elif kind == TEXT:
        item = rw.MessageItem(id=iid, status="in_progress", content=[])
        outputs.append(_out(fs, rw.ItemAdded, output_index=i, item=item))
        part = rw.OutputText(text="")
    else:
        item = rw.FunctionCallItem(
            id=iid, status="in_progress", call_id=fs.call_id, name=fs.name, arguments=""
        )
        outputs.append(_out(fs, rw.ItemAdded, output_index=i, item=item))
        return
    outputs.append(_out(fs, rw.PartAdded, item_id=iid, output_index=i, part=part))


def _close(fs: FormatState, request_id: str, status: str, outputs: list[Output]) -> None:
    """The open item's `.done` events; its JSON is kept for the terminal event."""
    kind = fs.kind
    if kind == NONE:
        return
    i, text = fs.index, fs.text
    iid = item_id(_PREFIX[kind], request_id, i)
    item: rw.Item
    if kind == CALL:
        outputs.append(_out(fs, rw.ArgumentsDone, item_id=iid, output_index=i, arguments=text))
        item = rw.FunctionCallItem(
            id=iid, status=status, call_id=fs.call_id, name=fs.name, arguments=text
        )
    else:
        part: rw.OutputText | rw.ReasoningText
        if kind == TEXT:
            done: type[rw.Event] = rw.TextDone
            part = rw.OutputText(text=text)
            item = rw.MessageItem(id=iid, status=status, content=[part])
        else:
            done = rw.ReasoningDone
            part = rw.ReasoningText(text=text)
            item = rw.ReasoningItem(id=iid, status=status, content=[part])
        outputs.append(_out(fs, done, item_id=iid, output_index=i, text=text))
        outputs.append(_out(fs, rw.PartDone, item_id=iid, output_index=i, part=part))
    raw = rw.encode(item)
    outputs.append(_out(fs, rw.ItemDone, output_index=i, item=msgspec.Raw(raw)))
    fs.items.append(raw)
    fs.held += len(raw) - len(text.encode())
    fs.kind, fs.text, fs.index = NONE, "", i + 1
    fs.call, fs.call_id, fs.name = -1, "", ""


# -- the end --------------------------------------------------------------------------


def _terminal(
    state: RequestState, request_id: str, usage: UsageInfo, abort: bool
) -> tuple[list[Output], rw.Response]:
    """Close the open item, then the terminal event: `response.completed`, or
    `response.incomplete` after a length cut (reason `max_output_tokens`) or an abort
    (no reason)."""
    fs = _fs(state)
    finish = fs.finish
    if finish == "length":
        status, details = "incomplete", rw.IncompleteDetails("max_output_tokens")
    elif finish == "abort" or (abort and not finish):
        status, details = "incomplete", None
    else:
        status, details = "completed", None
    outputs: list[Output] = []
    _close(fs, request_id, status, outputs)
    output: list[rw.Item] = [msgspec.Raw(b) for b in fs.items]
    response = _response(state, request_id, status, output, usage=_usage(usage), details=details)
    outputs.append(_out(fs, rw.TERMINAL[status], response=response))
    return outputs, response


def _usage(usage: UsageInfo) -> rw.ResponseUsage:
    return rw.ResponseUsage(usage.prompt_tokens, usage.completion_tokens, usage.total_tokens)


def _response(
    state: RequestState,
    request_id: str,
    status: str,
    output: list[rw.Item],
    *,
    usage: rw.ResponseUsage | None = None,
    error: rw.ResponseError | None = None,
    details: rw.IncompleteDetails | None = None,
) -> rw.Response:
    fs = _fs(state)
    echo = _echo_decoder.decode(fs.echo) if fs.echo else rw.Echo()
    return rw.Response(
        id=request_id,
        created_at=state.created,
        status=status,
        model=state.model,
        output=output,
        error=error,
        incomplete_details=details,
        max_output_tokens=echo.max_output_tokens,
        parallel_tool_calls=echo.parallel_tool_calls,
        temperature=echo.temperature,
        tool_choice=echo.tool_choice,
        tools=_EMPTY,
        top_p=echo.top_p,
        usage=usage,
    )
