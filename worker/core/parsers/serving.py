"""How a request drives the parser (as vLLM 0.33.0's
vllm/entrypoints/openai/chat_completion/serving.py): the start state, which tool parsing
applies, and the finish reason.
"""

from __future__ import annotations

from typing import Any

import msgspec

from worker.core.parsers.arguments.convert import schema_type, schema_types
from worker.core.parsers.language.grammar import (
    CONTENT,
    FORCED_JSON,
    FORCED_NATIVE,
    FRAME,
    REASONING,
    ReasoningFormat,
)
from worker.core.parsers.language.state import (
    ALT_TOOLS,
    APPEND_THINK,
    FORCE_CONTENT,
    FORCED_CHOICE,
    HIDE_REASONING,
    NAMED_CHOICE,
    NO_REASONING,
    NO_TOOLS,
    SINGLE_CALL,
    THINK_OFF,
    TOOLS_AUTO,
    TOOLS_NAMED,
    TOOLS_NONE,
    TOOLS_REQUIRED,
    TOOLS_SUPPRESS,
    ParserState,
    ToolSchema,
)
from worker.core.parsers.machine.spec import ParserSpec
from worker.wire.inbound import ChatRequest, NamedToolChoice

FINISH_STOP = "stop"
FINISH_TOOL_CALLS = "tool_calls"


def open_parser(
    spec: ParserSpec,
    request: ChatRequest | None,
    prompt_token_ids: list[int] | None,
    request_id: str,
    choice_index: int = 0,
    strict: bool = True,
    with_tools: bool = True,
) -> ParserState:
    """The parser state of one choice at the start of its output. `strict` is the
    model's `strict_tool_calling` (vLLM's VLLM_ENFORCE_STRICT_TOOL_CALLING). With
    `with_tools` false the state's `tools` stay empty: the caller keeps them elsewhere
    (the core's request tables; `reads_tools` says whether there are any to keep)."""
    mode, named = tool_mode(spec, request, strict)
    state = start_state(spec, request, prompt_token_ids)
    flags = 0
    fmt = spec.reasoning
    if fmt is not None and fmt.off_is_plain:
        thinking = request_thinking(request, fmt) if fmt.from_kwargs else None
        if thinking is False or (thinking is None and not fmt.thinking_default):
            flags |= NO_REASONING
            state = CONTENT
    if fmt is not None and fmt.off_hides and request_thinking(request, fmt) is False:
        # MiniCPM-V: the think rules stay, what they find is not shown.
        flags |= HIDE_REASONING | THINK_OFF
        state = CONTENT
    if fmt is not None and fmt.swap and request is not None and request.chat_template_kwargs:
        kw = request.chat_template_kwargs
        if kw.get("enable_thinking") is False or kw.get("force_nonempty_content") is True:
            flags |= FORCE_CONTENT
    if fmt is not None and fmt.append:
        flags |= NO_REASONING | APPEND_THINK
        state = CONTENT
    choice = request.tool_choice if request is not None else None
    if isinstance(choice, NamedToolChoice):
        flags |= NAMED_CHOICE | FORCED_CHOICE
    elif choice == "required":
        flags |= FORCED_CHOICE
    if mode == TOOLS_SUPPRESS and (request is None or not request.tools):
        flags |= NO_TOOLS
    if request is not None and not request.include_reasoning:
        flags |= HIDE_REASONING
    if request is not None and request.parallel_tool_calls is False:
        flags |= SINGLE_CALL
    alt = spec.tools.variant if spec.tools is not None else None
    kwargs = request.chat_template_kwargs if request is not None else None
    if alt is not None and kwargs and kwargs.get(alt[0]) == alt[1]:
        flags |= ALT_TOOLS
    tools: list[ToolSchema] = []
    if with_tools and request is not None and reads_tools(spec, mode):
        assert spec.tools is not None
        fmt_tools = spec.tools
        tools = tool_schemas(
            request.tools, unions=fmt_tools.type_unions, required=fmt_tools.required_params
        )
    return ParserState(
        state=state,
        mode=mode,
        flags=flags,
        reasoned=state == REASONING,
        request_id=request_id,
        choice=choice_index,
        named=named,
        tools=tools,
    )


def reads_tools(spec: ParserSpec, mode: int) -> bool:
    """Whether the parser reads the request's tools (argument types, name checks) in
    this tool mode."""
    return mode != TOOLS_SUPPRESS and spec.tools is not None and spec.tools.schema


def for_choice(template: ParserState, choice_index: int) -> ParserState:
    """Another choice of the same request (`n > 1`): the state opened for the request,
    with its own index (tool-call ids differ per choice). Choices appear lazily, after
    the request itself is gone, so the request state keeps `template`."""
    return msgspec.structs.replace(
        template,
        choice=choice_index,
        pending=list(template.pending),
        tools=list(template.tools),
        call=None,
    )


def uses_parser(spec: ParserSpec, st: ParserState) -> bool:
    """Whether the request needs the parser path at all: a reasoning format, or a tool
    format (whose markup is parsed out even when its calls are dropped)."""
    return spec.reasoning is not None or st.mode != TOOLS_NONE


def tool_mode(
    spec: ParserSpec, request: ChatRequest | None, strict: bool = True
) -> tuple[int, str]:
    """Which tool parsing applies (docs/reference/parsers.md, "What the parsers do"): the
    model's format with its calls returned (auto) or dropped (none / no tools: its markup
    must not become content), or the constrained JSON of "required" and a named function —
    unless the model's own format is what those produce (strict tool calling). Returns
    (mode, name)."""
    fmt = spec.tools
    quiet = TOOLS_NONE if fmt is None else TOOLS_SUPPRESS
    if request is None:
        return quiet, ""
    choice = request.tool_choice
    named = choice.function.name if isinstance(choice, NamedToolChoice) else ""
    native = fmt is not None and (
        fmt.forced == FORCED_NATIVE or (strict and fmt.forced != FORCED_JSON)
    )
    if native and (named or choice == "required"):
        return TOOLS_AUTO, named
    if named:
        return TOOLS_NAMED, named
    if not request.tools or choice == "none":
        return quiet, ""
    if choice == "required":
        return TOOLS_REQUIRED, ""
    # "auto", or unset with tools (vLLM's request default); needs a configured tool parser.
    return (TOOLS_AUTO, "") if fmt is not None else (TOOLS_NONE, "")


def start_state(
    spec: ParserSpec, request: ChatRequest | None, prompt_token_ids: list[int] | None
) -> int:
    """Reasoning or content at the first output token (docs/reference/parsers.md, "What the
    parsers do"): the prompt's last think marker, else chat_template_kwargs, else the
    format's default. Messages with headers (Harmony) start in the first header."""
    if spec.frames is not None:
        return FRAME
    fmt = spec.reasoning
    if fmt is None:
        return CONTENT
    if fmt.from_prompt and prompt_token_ids:
        decided = prompt_state(spec, prompt_token_ids)
        if decided is not None:
            return decided
    if fmt.from_kwargs:
        thinking = request_thinking(request, fmt)
        if thinking is not None:
            return REASONING if thinking else CONTENT
    if fmt.initial >= 0:
        return fmt.initial
    return REASONING if fmt.thinking_default else CONTENT


def prompt_state(spec: ParserSpec, prompt_token_ids: list[int]) -> int | None:
    """Scan the prompt backwards: a think start marker → reasoning, an end marker →
    content, any other added token first (`<｜Assistant｜>`, `<|im_start|>`) → not
    decided. Markers of earlier turns are therefore never seen (the Rust frontend's
    `DelimitedReasoningParser` rule)."""
    start, end = spec.think_ids
    if start is None and end is None:
        return None
    stop = spec.prompt_stop_ids
    for token_id in reversed(prompt_token_ids):
        if token_id == start:
            return REASONING
        if token_id == end:
            return CONTENT
        if token_id in stop:
            return None
    return None


def request_thinking(request: ChatRequest | None, fmt: ReasoningFormat) -> bool | None:
    """What the request says about thinking: its chat_template_kwargs, or a top-level
    `reasoning_effort: "none"` for the formats that read it; None when it says nothing."""
    if request is None:
        return None
    if fmt.effort_off:
        # HY3 / HY4: chat_template_kwargs' reasoning_effort first, then the request's;
        # one value means no thinking, any other thinking.
        effort = (request.chat_template_kwargs or {}).get("reasoning_effort")
        effort = effort or request.reasoning_effort
        return None if not effort else effort != fmt.effort_off
    if fmt.effort_none and request.reasoning_effort == "none":
        return False
    kwargs = request.chat_template_kwargs
    return thinking_from_kwargs(kwargs, fmt) if kwargs else None


def thinking_from_kwargs(kwargs: dict[str, Any], fmt: ReasoningFormat) -> bool | None:
    """What the format's switches say (`enable_thinking` for Qwen3, also `thinking`
    elsewhere, ORed as vLLM does; `reasoning_effort: "none"` for DeepSeek V4 chat mode);
    None when the request says nothing."""
    if fmt.effort_none and kwargs.get("reasoning_effort") == "none":
        return False
    values = [kwargs[k] for k in fmt.kwargs_keys if kwargs.get(k) is not None]
    if not values:
        return None
    if fmt.kwargs_on:
        return any(v == fmt.kwargs_on for v in values)
    return any(bool(v) for v in values)


def tool_schemas(
    tools: list[Any] | None, unions: bool = False, required: bool = False
) -> list[ToolSchema]:
    """The request tools' names and parameter types (what argument conversion needs);
    with `unions`, every type a parameter allows (`integer|string`, MiniMax M3); with
    `required`, the parameters each requires (MiniCPM5 drops calls without them)."""
    type_of = schema_types if unions else schema_type
    out: list[ToolSchema] = []
    for tool in tools or ():
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            continue
        params = fn.get("parameters")
        props = params.get("properties") if isinstance(params, dict) else None
        if not isinstance(props, dict):
            out.append(ToolSchema(fn["name"]))
            continue
        types = {str(k): type_of(v) for k, v in props.items()}
        # MiniMax M3 types nested values by the nested schemas: keep each parameter's.
        schemas = {str(k): v for k, v in props.items() if isinstance(v, dict)} if unions else {}
        needs = params.get("required") if required and isinstance(params, dict) else None
        if isinstance(needs, list) and all(isinstance(n, str) for n in needs):
            out.append(ToolSchema(fn["name"], types, schemas, list(needs)))
        else:
            out.append(ToolSchema(fn["name"], types, schemas))
    return out


def finish_reason(st: ParserState, engine_reason: str | None) -> str | None:
    """`tool_calls` when calls were made, the engine stopped naturally and the tool
    choice was not a named function (vLLM's `resolve_finish_reason`,
    vllm/entrypoints/serve/utils/tool_calls_utils.py); otherwise the engine's reason."""
    if engine_reason == FINISH_STOP and st.calls and not st.flags & NAMED_CHOICE:
        return FINISH_TOOL_CALLS
    return engine_reason
