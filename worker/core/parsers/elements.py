"""MiniMax M3's parameters as JSON (vllm-parsers-0.33.md §3.5).

Inside an invoke every tag carries the namespace prefix `]<]minimax[>[`; a parameter is
an element named after it, `]<]minimax[>[<city>Tokyo]<]minimax[>[</city>`, whose value is
its text, or its child elements: an object, or a list when the children are `<item>`s
and the schema says array (a repeated child is a list too). Text mixed with children is
kept under `$text`. A leaf is typed by the tool's schema for that parameter (vLLM's
MiniMax M3 parser converts once the whole invoke is read, as here: the invoke's text is
the one thing held, bounded by one call).
"""

from __future__ import annotations

import json
from typing import Any

from worker.core.parsers.convert import STRING, UNKNOWN, coerce_value

PREFIX = "]<]minimax[>["
ITEM = "item"
ARRAY = "array"
OBJECT = "object"


class _Node:
    __slots__ = ("children", "tag", "text")

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.children: list[_Node] = []
        self.text: list[str] = []


def parse(body: str) -> _Node:
    """The element tree of an invoke's body (elements left open are not in it)."""
    root = _Node("")
    stack = [root]
    pieces = body.split(PREFIX)
    stack[-1].text.append(pieces[0])
    for piece in pieces[1:]:
        if not piece.startswith("<") or ">" not in piece:
            stack[-1].text.append(PREFIX + piece)  # not a tag: text
            continue
        tag, _, rest = piece[1:].partition(">")
        if tag.startswith("/"):
            name = tag[1:].strip()
            if len(stack) > 1 and stack[-1].tag == name:
                done = stack.pop()
                stack[-1].children.append(done)
            else:
                break  # a closer that closes nothing open: the rest is malformed
        else:
            stack.append(_Node(tag.strip()))
        if len(stack) == 1 and rest.strip():
            break  # text between parameters: the rest is malformed (vLLM stops there)
        stack[-1].text.append(rest)
    return root


def to_json(root: _Node, types: dict[str, str]) -> str:
    """The completed parameters of an invoke, typed by `types` (parameter → schema type)."""
    return json.dumps(_members(root, types), ensure_ascii=False)


def _members(node: _Node, types: dict[str, str] | None) -> dict[str, Any]:
    """Child elements as an object; a repeated child is a list."""
    grouped: dict[str, list[Any]] = {}
    for c in node.children:
        type_name = types.get(c.tag, UNKNOWN) if types is not None else UNKNOWN
        grouped.setdefault(c.tag, []).append(_value(c, type_name, top=types is not None))
    return {k: v[0] if len(v) == 1 else v for k, v in grouped.items()}


def _value(node: _Node, type_name: str, top: bool) -> Any:
    text = "".join(node.text)
    kinds = type_name.split("|")
    if not node.children:
        if not text.strip() and type_name in (ARRAY, OBJECT):
            return [] if type_name == ARRAY else {}  # (an empty array-or-string is "")
        if not top or type_name in (STRING, UNKNOWN):
            return text
        return coerce_value(text, type_name)
    if ARRAY in kinds and all(c.tag == ITEM for c in node.children):
        return [_value(c, UNKNOWN, top=False) for c in node.children]
    obj = _members(node, None)
    if text.strip():  # text around the children
        key = "$text"
        while key in obj:
            key = "$" + key
        obj[key] = text
    return obj
