"""A model's parsers compiled against its tokenizer (`ParserSpec`), built once per model.

Compiling merges the reasoning format's table with the tool format's into one machine
per kind of request (with or without tool parsing, with or without the reasoning
rules), finds which markers are single added tokens (matched by id) and which special
tokens are no markers (removed from the text).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from worker.core.parsers.families.family_formats import token_suffix
from worker.core.parsers.families.formats import REASONING_FORMATS, tool_format
from worker.core.parsers.families.response_template import TEMPLATE_PARSERS, template_formats
from worker.core.parsers.language.grammar import (
    CONTENT,
    REASONING,
    Frames,
    ReasoningFormat,
    Table,
    ToolFormat,
    Transition,
)
from worker.core.parsers.machine.lexer import Machine, machine


class TokenizerLike(Protocol):
    def get_added_tokens_decoder(self) -> Mapping[int, object]: ...


@dataclass(frozen=True, slots=True)
class ParserSpec:
    """A model's parsers compiled against its tokenizer; built once per model.

    `plain` serves requests without tool parsing, `auto` those with it; `bare` and
    `tools_only` are the same without the reasoning rules.
    """

    reasoning: ReasoningFormat | None
    tools: ToolFormat | None
    plain: Machine
    auto: Machine
    # The same without the reasoning rules (thinking switched off, `off_is_plain`).
    bare: Machine
    tools_only: Machine
    strip_reasoning: bool  # the reasoning format's `strip_trailing`
    marker_text: dict[int, str]  # token id → text, for markers and dropped specials
    marker_ids: frozenset[int]
    drop_ids: frozenset[int]  # special tokens that are not markers: removed
    special_markers: frozenset[str]  # markers that are special tokens: never shown as text
    think_ids: tuple[int | None, int | None]  # (start, end) ids for the prompt scan
    prompt_stop_ids: frozenset[int]  # other added tokens: the prompt scan stops there
    frames: Frames | None = None  # the output is messages with headers (Harmony)
    # The same with the tool format's `variant` (a request with ALT_TOOLS feeds this one).
    variant: ParserSpec | None = None


def compile_parser(
    reasoning_parser: str | None,
    tool_parser: str | None,
    tokenizer: TokenizerLike,
    reasoning: ReasoningFormat | None = None,
    tools: ToolFormat | None = None,
    response_template: object = None,
) -> ParserSpec:
    """Compile the named formats (or given ones) for a tokenizer.

    Raises KeyError for an unknown parser name (the registry should check at load), and
    response_template.TemplateError (a ValueError) when `hf` / `beam` are named and the
    model's `response_template` (from its tokenizer_config.json) cannot be served.
    """
    if (
        reasoning is None
        and tools is None
        and (reasoning_parser in TEMPLATE_PARSERS or tool_parser in TEMPLATE_PARSERS)
    ):
        reasoning, tools = template_formats(reasoning_parser, tool_parser, response_template)
        reasoning_parser = tool_parser = None
    added: dict[str, tuple[int, bool]] = {}
    for token_id, token in tokenizer.get_added_tokens_decoder().items():
        content = str(getattr(token, "content", token))
        added[content] = (int(token_id), bool(getattr(token, "special", False)))
    if reasoning is None and reasoning_parser is not None:
        reasoning = REASONING_FORMATS[reasoning_parser]
    if tools is None and tool_parser is not None:
        tools = tool_format(tool_parser, set(added))
    # HY3 / HY4 checkpoints may suffix their tags (family_formats.token_suffix).
    reasoning, tools = token_suffix(reasoning, tools, set(added))
    framed = (reasoning.frames if reasoning else None) or (tools.frames if tools else None)
    plain: Table = dict(reasoning.table()) if reasoning else {}
    if framed is not None:
        plain = framed.table()  # the messages are read even when only calls are kept
    auto: Table = dict(plain)
    tools_only: Table = dict(tools.transitions) if tools is not None else {}
    if tools is not None:
        auto.update(tools.transitions)
        if reasoning is not None:
            # A block opener that the reasoning format names as an implicit end
            # closes reasoning and opens the block in one step.
            for marker in tools.opens() & set(reasoning.implicit_end):
                auto[(REASONING, marker)] = Transition(CONTENT, keep=True)
    markers = {m for (_, m) in auto}
    # Markers matched by token id when they are single tokens; `text_markers` are
    # matched on text even then (vLLM finds Gemma's `<|"|>` in the text).
    shown = set(tools.text_markers) if tools is not None else set()
    if reasoning is not None and reasoning.text_match:
        shown |= {reasoning.start, reasoning.end, *(m for (_, m), _ in reasoning.more)}
    token_markers = {m for m in markers if m in added and m not in shown}
    marker_text = {added[m][0]: m for m in token_markers}
    special_markers = frozenset(m for m in token_markers if added[m][1])
    drop = {
        i: text
        for text, (i, special) in added.items()
        if special and text not in markers and text not in shown
    }
    marker_text.update(drop)
    if framed is not None:
        # openai-harmony decodes every other token of a message, special or not, as
        # its text (`<|endoftext|>` inside a final message is content in vLLM too).
        drop = {}
    think_ids: tuple[int | None, int | None] = (None, None)
    if reasoning is not None:
        think_ids = (
            added[reasoning.start][0] if reasoning.start in added else None,
            added[reasoning.end][0] if reasoning.end in added else None,
        )
    return ParserSpec(
        reasoning,
        tools,
        machine(plain, token_markers),
        machine(auto, token_markers),
        machine({}, token_markers),
        machine(tools_only, token_markers),
        reasoning is not None and reasoning.strip_trailing,
        marker_text,
        frozenset(marker_text),
        frozenset(drop),
        special_markers,
        think_ids,
        frozenset(i for i, _ in added.values()) - {i for i in think_ids if i is not None},
        framed,
        None
        if tools is None or tools.variant is None
        else compile_parser(None, None, tokenizer, reasoning=reasoning, tools=tools.variant[2]),
    )
