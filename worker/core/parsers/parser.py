"""`Parser`: a model's reasoning and tool-call parsing behind one object.

Built once per model, bound to its compiled spec and the model's two options (the name
of the reasoning field, strict tool calling). Per request `open` gives the state every
choice starts from (None: the request takes no parser path); per choice `for_choice`
copies it; per record `feed` returns the delta; at the end `finish` gives the finish
reason. A whole response is `whole`, the same engine fed once. The states are plain
msgspec data kept in the request state, so the parser holds nothing between calls.

The text fed must be detokenized with special tokens kept: the markers are in it.
"""

from __future__ import annotations

from typing import NamedTuple

import msgspec

from worker.core.parsers.arguments.tools import ToolTable
from worker.core.parsers.language.events import Event
from worker.core.parsers.language.grammar import SWAP_ABSENT, SWAP_BLANK
from worker.core.parsers.language.state import (
    FORCE_CONTENT,
    FORCED_CHOICE,
    HIDE_REASONING,
    MSG_CONTENT,
    ParserState,
    ToolSchema,
)
from worker.core.parsers.machine.engine import feed
from worker.core.parsers.machine.spec import ParserSpec, TokenizerLike, compile_parser
from worker.core.parsers.quick import MISS, plan
from worker.core.parsers.render import REASONING, Parsed, collect, to_delta, to_message
from worker.core.parsers.serving import (
    finish_reason,
    for_choice,
    open_parser,
    reads_tools,
    tool_schemas,
    uses_parser,
)
from worker.wire.inbound import ChatRequest
from worker.wire.outbound import ChatMessage, Delta


# A msgspec Struct for its C-built `__init__` (one per parsed record; a NamedTuple's
# `__new__` is Python). gc=False: it holds a Delta and a list, never itself.
class ParsedDelta(msgspec.Struct, gc=False):
    """One record's output: its delta (None: it says nothing), and per token id of the
    record True where its logprobs must not be sent (hidden reasoning; None: none).
    `events`: the engine's events the delta merged, in the model's order (None from the
    quick path, whose record holds one kind of text): the Responses and Messages
    formats keep that order, which a merged delta loses."""

    delta: Delta | None
    hidden: list[bool] | None
    events: list[Event] | None = None


class ParsedMessage(NamedTuple):
    """A whole output's message, the hidden tokens (as ParsedDelta's), the finish
    reason and how many tokens were reasoning."""

    message: ChatMessage
    hidden: list[bool] | None
    finish_reason: str | None
    reasoning_tokens: int
    events: list[Event] | None = None  # the engine's events, in order (as ParsedDelta's)


class Parser:
    """One model's parsing: its compiled spec and options; holds no request's state."""

    __slots__ = ("quick", "reasoning_field", "spec", "strict")

    def __init__(
        self, spec: ParserSpec, reasoning_field: str = REASONING, strict: bool = True
    ) -> None:
        self.spec = spec
        self.reasoning_field = reasoning_field  # `reasoning` or `reasoning_content`
        self.strict = strict  # strict_tool_calling (vLLM's VLLM_ENFORCE_STRICT_TOOL_CALLING)
        # The common record's path (quick.py), the engine's answer without its machinery.
        self.quick = plan(spec, reasoning_field)

    @classmethod
    def compile(
        cls,
        reasoning_parser: str | None,
        tool_parser: str | None,
        tokenizer: TokenizerLike,
        *,
        reasoning_field: str = REASONING,
        strict: bool = True,
        response_template: object = None,
    ) -> Parser:
        """The named formats compiled for a tokenizer (KeyError for an unknown name;
        ValueError for `hf` / `beam` without a `response_template` they can serve)."""
        spec = compile_parser(
            reasoning_parser, tool_parser, tokenizer, response_template=response_template
        )
        return cls(spec, reasoning_field, strict)

    def open(
        self,
        request: ChatRequest | None,
        prompt_ids: list[int] | None,
        request_id: str,
        with_tools: bool = True,
    ) -> ParserState | None:
        """The state every choice of the request starts from, or None when the request
        needs no parser (no reasoning format, no tool parsing). `with_tools` false leaves
        the request's tools out of it (see `tool_schemas`)."""
        st = open_parser(
            self.spec, request, prompt_ids, request_id, strict=self.strict, with_tools=with_tools
        )
        return st if uses_parser(self.spec, st) else None

    def reads_tools(self, template: ParserState) -> bool:
        """Whether the request's tools matter to its parsing (argument types, names)."""
        return reads_tools(self.spec, template.mode)

    def tool_schemas(self, template: ParserState, request: ChatRequest) -> list[ToolSchema]:
        """The request tools as the parser reads them (none when it reads none): what
        `open` leaves out of the state with `with_tools` false."""
        fmt = self.spec.tools
        if fmt is None or not reads_tools(self.spec, template.mode):
            return []
        return tool_schemas(request.tools, unions=fmt.type_unions, required=fmt.required_params)

    @property
    def tools_key(self) -> bytes:
        """What, besides the tools' JSON, decides `tool_schemas` (for a memo of it)."""
        fmt = self.spec.tools
        if fmt is None:
            return b"t"
        return (b"u" if fmt.type_unions else b"t") + (b"r" if fmt.required_params else b"")

    def for_choice(self, template: ParserState, index: int) -> ParserState:
        """Choice `index`'s own state (tool-call ids differ per choice)."""
        return for_choice(template, index)

    def feed(
        self,
        st: ParserState,
        text: str,
        token_ids: list[int] | None,
        final: bool = False,
        tools: ToolTable | None = None,
    ) -> ParsedDelta:
        """Advance one choice by one record: `text` is the detokenized text of
        `token_ids` (None: match every marker on text alone); `final` releases
        everything held. `tools`: the request's tool table (None: the state's own)."""
        quick = self.quick
        if quick is not None and token_ids is not None and not final:
            delta = quick.delta(st, text, token_ids)
            if delta is not MISS:
                return ParsedDelta(delta, None)
        return self.engine(st, text, token_ids, final, tools)

    def engine(
        self,
        st: ParserState,
        text: str,
        token_ids: list[int] | None,
        final: bool = False,
        tools: ToolTable | None = None,
    ) -> ParsedDelta:
        """`feed` by the engine alone (a record `quick` did not take)."""
        fed = feed(self.spec, st, text, token_ids, final, tools)
        return ParsedDelta(to_delta(fed.events, self.reasoning_field), fed.hidden, fed.events)

    def finish(self, st: ParserState, engine_reason: str | None) -> str | None:
        """The finish reason to report: `tool_calls` when calls were made and the engine
        stopped naturally (not for a named tool_choice), else the engine's."""
        return finish_reason(st, engine_reason)

    def whole(
        self,
        template: ParserState,
        index: int,
        text: str,
        token_ids: list[int] | None,
        engine_reason: str | None,
        tools: ToolTable | None = None,
    ) -> ParsedMessage:
        """Choice `index` of a whole response (`type = "response"`) as one message."""
        st = for_choice(template, index)
        parsed = parse_whole(self.spec, st, text, token_ids, tools)
        return ParsedMessage(
            to_message(parsed, self.reasoning_field),
            parsed.hidden,
            finish_reason(st, engine_reason),
            parsed.reasoning_tokens,
            parsed.events,
        )


def parse_whole(
    spec: ParserSpec,
    st: ParserState,
    text: str,
    token_ids: list[int] | None,
    tools: ToolTable | None = None,
) -> Parsed:
    """A whole output (`type = "response"`): the same engine, fed once with `final`."""
    fed = feed(spec, st, text, token_ids, final=True, tools=tools)
    fmt = spec.reasoning
    parsed = collect(
        fed.events,
        empty="" if fmt is not None and fmt.empty_as_text and st.reasoned else None,
        hide_reasoning=bool(st.flags & HIDE_REASONING),
        # vLLM answers a forced call with `content: ""` rather than null
        # (vllm/entrypoints/openai/chat_completion/message_assembly.py).
        content_default="" if st.flags & FORCED_CHOICE else None,
    )
    if st.flags & FORCE_CONTENT and fmt is not None and not parsed.tool_calls:
        # vLLM's nemotron_v3: an answer that wrote only reasoning is given as content.
        answer = parsed.content
        if (fmt.swap == SWAP_BLANK and (answer is None or not answer.strip())) or (
            fmt.swap == SWAP_ABSENT and answer is None and not st.msg & MSG_CONTENT
        ):
            parsed.reasoning, parsed.content = answer, parsed.reasoning
    parsed.reasoning_tokens = st.reasoning_tokens
    parsed.hidden = fed.hidden
    parsed.events = fed.events
    return parsed
