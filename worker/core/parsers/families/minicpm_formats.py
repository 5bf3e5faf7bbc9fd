"""OpenBMB's MiniCPM family (vLLM 0.33.0 vllm/parser/minicpmv.py,
vllm/tool_parsers/minicpm5xml_tool_parser.py): MiniCPM-V's reasoning (`minicpmv`)
and MiniCPM5's XML tool calls (`minicpm5`).

MiniCPM-V (vLLM 0.33's minicpmv engine config): Qwen3's grammar — `<think>…</think>`,
thinking on unless `enable_thinking` is false — plus `<|im_end|>` and the reserved markers
`<|reserved_12|>`…`<|reserved_15|>` (and their text spellings `<reserved_12>`…) dropped
from content and reasoning, and the newlines its tokenizer decodes as `\\n` recovered
(escapes.py). With thinking off the output starts as content and a `<think>…</think>`
in it is dropped, not shown. vLLM registers no minicpmv tool parser: MiniCPM-V writes
Qwen3-Coder's XML calls, served with `qwen3_coder`.

MiniCPM5 (vLLM 0.33's minicpm5xml parser): a call is one element,
`<function name="f"><param name="k">v</param></function>`, read whole when it closes
(held.py). The block is XML (parsed as such, else read with vLLM's regexes); its
function must be among the request's tools, with every required parameter; parameters
the schema does not name are left out (a wrapper `properties` / `arguments` object is
opened), a parameter written twice spoils the call. A value is the text when the schema
says string, else JSON, else a Python literal, else the text. A block that is no call
is content, as written. vLLM maps some of MiniCPM5's invented function names to the
offered ones (a fixed list from one benchmark's tools); we do not (docs/reference/differences.md,
minicpm5-aliases).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import replace
from typing import Any
from xml.etree import ElementTree

from worker.core.parsers.arguments.tools import ToolTable
from worker.core.parsers.families.reasoning_formats import REASONING_FORMATS
from worker.core.parsers.language.grammar import (
    ARGS,
    CALL_END,
    CALL_START,
    CONTENT,
    FORCED_JSON,
    REASONING,
    ReasoningFormat,
    ToolFormat,
    Transition,
)
from worker.core.parsers.language.state import CallHeld

_IM_END = "<|im_end|>"
_RESERVED = tuple(m for i in range(12, 16) for m in (f"<reserved_{i}>", f"<|reserved_{i}|>"))
MINICPMV = replace(
    REASONING_FORMATS["qwen3"],
    name="minicpmv",
    off_is_plain=False,
    off_hides=True,
    # Thinking off, a `<think>` in the content opens (hidden) reasoning; thinking on, one
    # after `</think>` is text (engine.transition: THINK_OFF), as in vLLM's two grammars.
    reenter=True,
    escaped_newlines=True,
    more=tuple(
        ((state, m), Transition(state))
        for m in (_IM_END, *_RESERVED)
        for state in (CONTENT, REASONING)
    ),
)

# -- MiniCPM5 -----------------------------------------------------------------------------

_NAME = re.compile(r"<function\s+name=['\"]([^'\"]+)['\"][^>]*>")
_PARAM = re.compile(r"<param\s+name=['\"]([^'\"]+)['\"]>([\s\S]*?)</param>")
_NAMELESS = re.compile(r"<param(?![^>]*\bname=)[^>]*>")
_CDATA = ("<![CDATA[", "]]>")
_WRAPPERS = ("properties", "arguments")


class _Bad(Exception):
    """The block breaks the tool's schema: it is no call."""


def minicpm5_calls(body: str, tools: ToolTable) -> list[tuple[str, str]] | None:
    """The call in a `<function` block (`body`: its text after `<function`), or None."""
    block = "<function" + body + "</function>"
    try:
        found = _from_xml(block, tools)
    except _Bad:
        return None
    if found is None:
        try:
            found = _from_regex(block, tools)
        except _Bad:
            return None
    if found is None:
        return None
    name, arguments = found
    if not tools.known(name):
        return None
    required = tools.required(name)
    if required and not set(required) <= arguments.keys():
        return None
    return [(name, json.dumps(arguments, ensure_ascii=False))]


def _from_xml(block: str, tools: ToolTable) -> tuple[str, dict[str, Any]] | None:
    """The block read as XML; None when it is no well-formed XML (or names no function)."""
    if "<!" in block.replace(_CDATA[0], ""):
        return None  # no DTDs or entity declarations: the regexes read it instead
    try:
        root = ElementTree.fromstring(block)
    except ElementTree.ParseError:
        return None
    name = (root.attrib.get("name") or "").strip()
    if root.tag != "function" or not name:
        return None
    params = root.findall("param")
    wrapper = root.find("arguments")
    if wrapper is not None and not params:
        params = wrapper.findall("param")
    arguments: dict[str, Any] = {}
    seen: set[str] = set()
    for param in params:
        key = param.attrib.get("name")
        if not key:
            raise _Bad
        _add(name, key, param.text or "", arguments, seen, tools)
    return name, arguments


def _from_regex(block: str, tools: ToolTable) -> tuple[str, dict[str, Any]] | None:
    m = _NAME.search(block)
    if m is None:
        return None
    name = m.group(1).strip()
    if _NAMELESS.search(block):
        raise _Bad
    arguments: dict[str, Any] = {}
    seen: set[str] = set()
    for pm in _PARAM.finditer(block):
        value = pm.group(2)
        if value.startswith(_CDATA[0]) and value.endswith(_CDATA[1]):
            value = value[len(_CDATA[0]) : -len(_CDATA[1])]
        else:
            value = value.strip()
        _add(name, pm.group(1).strip(), value, arguments, seen, tools)
    return (name, arguments) if name else None


def _add(
    name: str, key: str, text: str, arguments: dict[str, Any], seen: set[str], tools: ToolTable
) -> None:
    """One parameter into `arguments` (vLLM's `_add_argument`); _Bad when it spoils the call."""
    allowed = tools.types(name)
    if key in _WRAPPERS and allowed and key not in allowed:
        inner = _value(text)
        if not isinstance(inner, dict):
            raise _Bad
        added = False
        for k, v in inner.items():
            if k not in allowed:
                continue
            if k in seen:
                raise _Bad
            seen.add(k)
            arguments[k] = _typed(v, allowed.get(k, ""))
            added = True
        if not added:
            raise _Bad
        return
    if allowed and key not in allowed:
        return  # a parameter the schema does not name is left out
    if key in seen:
        raise _Bad
    seen.add(key)
    arguments[key] = _typed(text, allowed.get(key, ""))


def _typed(value: Any, schema_type: str) -> Any:
    if schema_type == "string":
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return _value(value) if isinstance(value, str) else value


def _value(text: str) -> Any:
    """JSON, else a Python literal, else the text (vLLM's `_parse_arguments`)."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    except RecursionError:
        return text  # (vLLM: any other failure of the JSON reading keeps the text)
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


MINICPM5 = ToolFormat(
    "minicpm5",
    {
        (CONTENT, "<function"): Transition(ARGS, CALL_START),
        (ARGS, "</function>"): Transition(CONTENT, CALL_END),
    },
    CallHeld,
    schema=True,
    forced=FORCED_JSON,  # vLLM: no structural tag
    text_markers=("<function", "</function>"),
    held=minicpm5_calls,
    give_back=True,
    suppressed_as_text=True,
    required_params=True,
)

MINICPM_REASONING_FORMATS: dict[str, ReasoningFormat] = {"minicpmv": MINICPMV}
MINICPM_TOOL_FORMATS: dict[str, ToolFormat] = {"minicpm5": MINICPM5}
