"""Response templates: the checkpoint describes its own output format (vLLM 0.33's `hf` and
`beam` parsers, vllm/parser/response_template.py and beam.py).

A template is the `response_template` object of the model's `tokenizer_config.json`
(transformers' chat-parsing format, version 1): a `start_anchor` and `fields`, each a
region of the answer between an opening and a closing delimiter. vLLM serves three fields:
`thinking` (reasoning), `content`, `tool_calls` (a region whose value, parsed when it
closes, is `{"type": "function", "function": {"name", "arguments"}}` or a list of them).
The field without an opener is where the text outside the others goes (`content`; a
template that has none gets one); its closer, if any, is dropped (`<|im_end|>`).

`formats(template, reasoning, tools)` turns one into the engine's table entries: a
`ReasoningFormat` whose whole table is the template's (`rules`) and a `ToolFormat` whose
regions are read whole when they close (held.py, with `calls` here). Every delimiter is
matched on text, as vLLM matches it on the decoded text; one written `\\s*…` drops the
whitespace before it (`swallow_ws`: content's trailing whitespace waits for the next
marker, prose.py). The start state comes from the prompt's last think marker, as vLLM's
stream reads the prompt's tail after the start anchor (its whole response reads no prompt:
differences.md hf-whole-prompt).

What vLLM does that the tables do not (each refused when the model is loaded, so a
template is either served as vLLM serves it or not at all; docs/reference/parsers.md,
"Response templates: hf and beam"):
delimiters given as regular expressions (`open_pattern` / `close_pattern`) other than a
literal or a `|` of literals after an optional `\\s*`, named captures, a tool region
whose content is not `json` (`xml-inline`, `kv-lines`) or has content arguments, a
`content` field with an opener (text outside every field is then dropped), and a
`thinking` or `tool_calls` field without one.

`hf` and `beam` parse the same way. vLLM's `beam` also constrains generation with a
grammar derived from the template (tool_choice "required" / named, strict tools), which
is the engine's business: here those requests' output is read in the template's format.
vLLM's `hf` refuses such requests (400); we read them the same way (differences.md hf-forced).
"""

from __future__ import annotations

import json
import re
from typing import Any

from worker.core.parsers.arguments.tools import ToolTable
from worker.core.parsers.language.grammar import (
    ARGS,
    CALL_END,
    CALL_START,
    CONTENT,
    FORCED_NATIVE,
    REASONING,
    ReasoningFormat,
    Table,
    ToolFormat,
    Transition,
)
from worker.core.parsers.language.state import CallHeld

TEMPLATE_PARSERS = ("hf", "beam")
THINKING, CONTENT_FIELD, TOOL_CALLS = "thinking", "content", "tool_calls"
_FIELD_KEYS = {
    "open",
    "open_pattern",
    "close",
    "close_pattern",
    "content",
    "content_args",
    "repeats",
    "join",
    "optional",
    "transform",
    "transform_each",
}
_PLACEHOLDER = re.compile(r"\{(\w+(?:\.\w+)*)\}")
# A delimiter pattern the tables can hold: an optional `\s*`, then literals joined by `|`
# (in a non-capturing group or not), each written with backslash escapes only.
_LEADING_WS = "\\s*"


class TemplateError(ValueError):
    """The template cannot be served (as vLLM refuses it at start-up, or as the tables
    cannot hold it)."""


def formats(
    template: Any, name: str, reasoning: bool, tools: bool
) -> tuple[ReasoningFormat | None, ToolFormat | None]:
    """The engine's formats for a `response_template` (`name`: hf or beam), with the
    reasoning rules when a reasoning parser is selected, the tool rules when a tool
    parser is. Raises TemplateError when the template cannot be served."""
    fields = _fields(template)
    thinking, tool = fields.get(THINKING), fields.get(TOOL_CALLS)
    if reasoning and thinking is None:
        raise TemplateError(f"--reasoning-parser {name} requires a thinking field")
    if tools and tool is None:
        raise TemplateError(f"--tool-call-parser {name} requires a tool_calls field")
    content = fields.get(CONTENT_FIELD, {})
    drop, drop_ws = _delimiters(content, "close") if content else ([], False)
    t_open, t_open_ws = _delimiters(thinking, "open") if thinking else ([], False)
    t_close, t_close_ws = _delimiters(thinking, "close") if thinking else ([], False)
    # Delimiters written `\s*…` drop the whitespace before them (outside other regions).
    swallow = tuple((drop if drop_ws else []) + (t_open if t_open_ws else []))
    rfmt = None
    if thinking is not None and (reasoning or tools):
        rules: Table = {(CONTENT, m): Transition(REASONING) for m in t_open}
        rules.update({(REASONING, m): Transition(CONTENT) for m in t_close})
        rules.update({(CONTENT, m): Transition(CONTENT) for m in drop})
        rfmt = ReasoningFormat(
            name,
            t_open[0],
            t_close[0] if t_close else "",
            thinking_default=False,
            from_kwargs=False,
            # A closer written `\s*…` drops the reasoning's trailing whitespace.
            strip_trailing=t_close_ws,
            text_match=True,
            rules=tuple(rules.items()),
            # Only the tool parser selected: the thinking region is content, its
            # delimiters dropped, as vLLM routes it.
            as_content=not reasoning,
            swallow_ws=swallow,
        )
    tfmt = None
    if tools and tool is not None:
        c_open, c_open_ws = _delimiters(tool, "open")
        c_close, _ = _delimiters(tool, "close")
        table: Table = {(CONTENT, m): Transition(ARGS, CALL_START) for m in c_open}
        table.update({(ARGS, m): Transition(CONTENT, CALL_END) for m in c_close})
        table.update({(CONTENT, m): Transition(CONTENT) for m in drop})
        reader = _reader(tool)
        tfmt = ToolFormat(
            name,
            table,
            CallHeld,
            schema=True,
            type_unions=True,
            keep_whitespace=True,
            forced=FORCED_NATIVE,
            text_markers=tuple(sorted({m for (_, m) in table})),
            held=reader,
            suppressed_as_text=True,
            swallow_ws=swallow + tuple(c_open if c_open_ws else []),
        )
    return rfmt, tfmt


def _fields(template: Any) -> dict[str, dict[str, Any]]:
    if not isinstance(template, dict):
        raise TemplateError("requires `response_template` metadata in the tokenizer configuration")
    if template.get("version", 1) != 1:
        raise TemplateError(f"unsupported response_template version {template.get('version')!r}")
    unknown = set(template) - {
        "version",
        "defaults",
        "fields",
        "start_anchor",
        "start_anchor_pattern",
    }
    if unknown:
        raise TemplateError(f"unknown keys in response_template: {sorted(unknown)}")
    if "start_anchor" not in template and "start_anchor_pattern" not in template:
        raise TemplateError(
            "response_template must define 'start_anchor' or 'start_anchor_pattern'"
        )
    defaults = template.get("defaults", {})
    fields = template.get("fields")
    if not isinstance(defaults, dict) or set(defaults) - {"role"}:
        raise TemplateError("response_template defaults other than `role` cannot be served")
    if not isinstance(fields, dict) or not fields:
        raise TemplateError("response_template.fields must be a non-empty dict")
    if set(fields) - {THINKING, CONTENT_FIELD, TOOL_CALLS}:
        raise TemplateError(f"unsupported response_template fields: {sorted(fields)}")
    for key, field in fields.items():
        if not isinstance(field, dict) or set(field) - _FIELD_KEYS:
            raise TemplateError(f"response_template field {key!r} is malformed")
        opened = "open" in field or "open_pattern" in field
        if opened == (key == CONTENT_FIELD):
            which = "must not have" if key == CONTENT_FIELD else "needs"
            raise TemplateError(f"response_template field {key!r} {which} an opener here")
        if key != TOOL_CALLS and (
            field.get("content", "text") != "text" or "transform" in field or "join" in field
        ):
            raise TemplateError(f"response_template field {key!r} cannot be streamed")
    return fields


def _delimiters(field: dict[str, Any], which: str) -> tuple[list[str], bool]:
    """A field's opening or closing delimiters as literals ([] when it has none), and
    whether they drop the whitespace before them (a pattern's leading `\\s*`)."""
    if which in field:
        raw = field[which]
        items = [raw] if isinstance(raw, str) else raw
        if not isinstance(items, list) or not items:
            raise TemplateError(f"response_template: bad {which!r} delimiter {raw!r}")
        if not all(isinstance(item, str) and item for item in items):
            raise TemplateError(f"response_template: bad {which!r} delimiter {raw!r}")
        return list(dict.fromkeys(items)), False
    pattern = field.get(which + "_pattern")
    if pattern is None:
        return [], False
    literals = _pattern_literals(pattern) if isinstance(pattern, str) else None
    if literals is None:
        raise TemplateError(f"response_template: delimiter pattern {pattern!r} is not served")
    return literals, pattern.startswith(_LEADING_WS)


def _pattern_literals(pattern: str) -> list[str] | None:
    """The literals of `\\s*(?:A|B)` / `A|B` / `A` (escapes only), else None."""
    body = pattern.removeprefix(_LEADING_WS)
    if body.startswith("(?:") and body.endswith(")"):
        body = body[3:-1]
    out: list[str] = []
    lit: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body) and not body[i + 1].isalnum():
            lit.append(body[i + 1])  # an escaped character is itself
            i += 2
            continue
        if c == "|":
            out.append("".join(lit))
            lit = []
        elif c in ".^$*+?{}[]()\\":
            return None
        else:
            lit.append(c)
        i += 1
    out.append("".join(lit))
    return out if all(out) else None


def _reader(field: dict[str, Any]) -> Any:
    """The reader of a tool region's body: its calls, or None when it is malformed or
    incomplete (vLLM drops it then)."""
    if field.get("content", "text") != "json" or field.get("content_args"):
        raise TemplateError(
            "response_template tool_calls content other than plain json is not served"
        )
    transform = field.get("transform")
    each = bool(field.get("transform_each", False))
    if field.get("join") is not None:
        raise TemplateError("response_template tool_calls with `join` cannot give calls")
    _check_transform(transform)

    def read(body: str, tools: ToolTable) -> list[tuple[str, str]] | None:
        try:
            value = json.loads(body)
            if transform is not None:
                if each:
                    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
                        return None
                    value = [_apply(transform, v) for v in value]
                else:
                    value = _apply(transform, {"content": value})
        except (ValueError, KeyError, TypeError, RecursionError):
            return None
        return _calls(value, tools)

    return read


def _check_transform(transform: Any) -> None:
    if isinstance(transform, dict):
        for v in transform.values():
            _check_transform(v)
    elif isinstance(transform, list):
        for v in transform:
            _check_transform(v)
    elif (
        isinstance(transform, str)
        and _PLACEHOLDER.search(transform)
        and not _PLACEHOLDER.fullmatch(transform)
    ):
        raise TemplateError(f"transform string {transform!r} mixes a placeholder with text")


def _apply(transform: Any, scope: dict[str, Any]) -> Any:
    """The transform template filled from `scope` (transformers' `_apply_transform`)."""
    if isinstance(transform, dict):
        return {k: _apply(v, scope) for k, v in transform.items()}
    if isinstance(transform, list):
        return [_apply(v, scope) for v in transform]
    whole = _PLACEHOLDER.fullmatch(transform) if isinstance(transform, str) else None
    if whole is None:
        return transform
    root, *keys = whole.group(1).split(".")
    value = scope[root]
    for key in keys:
        if not isinstance(value, dict):
            raise TypeError(key)
        value = value[key]
    return value


def _calls(value: Any, tools: ToolTable) -> list[tuple[str, str]] | None:
    """(name, arguments JSON) of each call in a region's value; None if any is incomplete."""
    out: list[tuple[str, str]] = []
    for item in value if isinstance(value, list) else [value]:
        fn = item.get("function") if isinstance(item, dict) else None
        if not isinstance(fn, dict):
            return None
        name, arguments = fn.get("name"), fn.get("arguments")
        if not isinstance(name, str) or not name or arguments is None:
            return None
        if isinstance(arguments, dict) and tools:
            arguments = _coerced(name, arguments, tools)
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        out.append((name, arguments))
    return out


def _coerced(name: str, arguments: dict[str, Any], tools: ToolTable) -> dict[str, Any]:
    """String arguments typed by the tool's schema, as vLLM's parser casts them."""
    types = tools.types(name)
    out = dict(arguments)
    for key, value in arguments.items():
        kinds = types.get(key, "")
        if isinstance(value, str) and kinds:
            out[key] = _coerce(value, kinds.split("|"))
    return out


def _coerce(raw: str, kinds: list[str]) -> Any:
    for kind in kinds:
        try:
            if kind == "integer":
                try:
                    return int(raw)
                except ValueError:
                    number = float(raw)
                    if number.is_integer():
                        return int(number)
                    continue
            if kind == "number":
                number = float(raw)
                if number != number or number in (float("inf"), float("-inf")):
                    continue
                return int(number) if number.is_integer() and "." not in raw else number
            if kind == "boolean" and raw.strip().lower() in ("true", "1", "false", "0"):
                return raw.strip().lower() in ("true", "1")
            if kind == "null" and raw.strip() in ("null", "None"):
                return None
            if kind in ("object", "array"):
                decoded = json.loads(raw)
                if isinstance(decoded, dict if kind == "object" else list):
                    return decoded
        except (ValueError, OverflowError):
            continue
    return raw


# The registry's entries for the two names: what a model gets is built from its template
# (`template_formats`), these only say that the names exist.
PLACEHOLDER_REASONING = {
    n: ReasoningFormat(n, "", "", thinking_default=False) for n in TEMPLATE_PARSERS
}
PLACEHOLDER_TOOLS = {n: ToolFormat(n, {}, CallHeld) for n in TEMPLATE_PARSERS}


def template_formats(
    reasoning_parser: str | None, tool_parser: str | None, template: Any
) -> tuple[ReasoningFormat | None, ToolFormat | None]:
    """The formats of a model whose parsers are response-template ones (`hf`, `beam`):
    both named parsers must be the same one, or one of them none, as vLLM requires."""
    names = {n for n in (reasoning_parser, tool_parser) if n is not None}
    if len(names) > 1:
        raise TemplateError(
            f"--reasoning-parser {reasoning_parser} and --tool-call-parser {tool_parser} "
            "cannot be combined"
        )
    (name,) = names
    return formats(template, name, reasoning_parser is not None, tool_parser is not None)


__all__ = [
    "PLACEHOLDER_REASONING",
    "PLACEHOLDER_TOOLS",
    "TEMPLATE_PARSERS",
    "TemplateError",
    "formats",
    "template_formats",
]
