"""MiniMax M3's parameters as JSON (vLLM 0.33.0 vllm/parser/minimax_m3.py).

Inside an invoke every tag carries the namespace prefix `]<]minimax[>[`; a parameter is
an element named after it, `]<]minimax[>[<city>Tokyo]<]minimax[>[</city>`, whose value is
its text, or its child elements: an object, or a list when the schema says array (a
repeated child is a list too). Text mixed with children is kept under `$text`. Every
value is typed by the tool's JSON Schema for it, nested values by the nested schemas
(`convert`), as vLLM 0.33 does.

vLLM converts the whole invoke at its end, because converted values are not prefix-stable
(a parameter written twice becomes a list). So does this module while the invoke's body is
short: it is held (`CallElements.body`) and converted when the invoke ends, the same JSON
as vLLM's in one piece. A body that grows past `HOLD_MAX` characters is streamed instead,
so the state stays bounded and a long argument costs a record its own length: the held
text is read again as a stream, each parameter is sent when it closes (in the same order,
so the same JSON), a parameter the schema types `string` as it arrives, and a parameter
repeated after that point keeps its first value (differences.md m3-repeated-parameter).
"""

from __future__ import annotations

from typing import Any

from worker.core.parsers.arguments.convert import (
    STRING,
    UNKNOWN,
    coerce_value,
    dumps,
    escape,
    schema_types,
)
from worker.core.parsers.language.events import send_args
from worker.core.parsers.language.scope import Scope
from worker.core.parsers.language.state import CallElements

PREFIX = "]<]minimax[>["
# The longest invoke body held to be converted whole (about a screenful of arguments: a
# state write per record of at most this much while the call lasts).
HOLD_MAX = 4096
# Elements nested deeper than this (a parameter is at depth 1) make their parameter
# malformed, as vLLM 0.33's MAX_ELEMENT_DEPTH does.
MAX_DEPTH = 128
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
    return _parse(body)[0]


def _parse(body: str) -> list[_Node]:
    """The root of the element tree, then the elements still open at the end."""
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
        elif len(stack) > MAX_DEPTH:
            break  # nested too deep: the rest is malformed (vLLM's limit; `convert` recurses)
        else:
            stack.append(_Node(tag.strip()))
        if len(stack) == 1 and rest.strip():
            break  # text between parameters: the rest is malformed (vLLM stops there)
        stack[-1].text.append(rest)
    return stack


def _container(schema: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The schema's first array or object alternative, as vLLM 0.33 picks it: `type`
    (a list too), else the keywords of a schema without one, else `anyOf` / `oneOf`."""
    t = schema.get("type")
    for kind in (ARRAY, OBJECT):
        if t == kind or (isinstance(t, list) and kind in t):
            return kind, schema
    if t is None:
        if "items" in schema:
            return ARRAY, schema
        if "properties" in schema or "additionalProperties" in schema:
            return OBJECT, schema
    for field in ("anyOf", "oneOf"):
        alts = schema.get(field)
        for alt in alts if isinstance(alts, list) else ():
            found = _container(alt) if isinstance(alt, dict) else None
            if found is not None:
                return found
    return None


def _leaf(text: str, schema: Any) -> Any:
    """An element's text, typed by its schema (none: the text as written)."""
    if not isinstance(schema, dict):
        return text
    types = schema_types(schema)
    container = _container(schema)
    # The template writes an empty list or object as an empty element.
    if container is not None and STRING not in types.split("|") and not text.strip():
        return [] if container[0] == ARRAY else {}
    return coerce_value(text, types)


def convert(node: _Node, schema: Any) -> Any:
    """One element as a JSON value, typed by its JSON Schema all the way down (vLLM 0.33's
    conversion): a leaf by its types; children as an array when the schema says array
    (every child an item, by `items`), else as an object (by `properties`, then
    `additionalProperties`; a repeated child collects into a list). Text mixed with
    children is one more member, `$text` (or an item, last)."""
    text = "".join(node.text)
    if not node.children:
        return _leaf(text, schema)
    container = _container(schema) if isinstance(schema, dict) else None
    mixed = text if text.strip() else None
    if container is not None and container[0] == ARRAY:
        items = container[1].get("items")
        out = [convert(c, items) for c in node.children]
        if mixed is not None:
            out.append(_leaf(mixed, items))
        return out
    spec = container[1] if container is not None else {}
    props = spec.get("properties")
    props = props if isinstance(props, dict) else {}
    extra = spec.get("additionalProperties")
    members: list[tuple[str, Any]] = [(c.tag, c) for c in node.children]
    if mixed is not None:
        key = "$text"
        while any(tag == key for tag, _ in members):
            key = "$" + key
        members.append((key, mixed))
    result: dict[str, Any] = {}
    lists: set[str] = set()
    for tag, member in members:
        sub = props.get(tag, extra)
        value = convert(member, sub) if isinstance(member, _Node) else _leaf(member, sub)
        if tag not in result:
            result[tag] = value
        elif tag in lists:
            result[tag].append(value)
        else:
            result[tag] = [result[tag], value]
            lists.add(tag)
    return result


# -- streaming: one parameter at a time -------------------------------------------------

# CallElements.part: where in an invoke's body the text is
BETWEEN = 0  # between parameters
STREAM = 1  # inside a `string` parameter: its text is sent as it comes
BUFFER = 2  # inside any other parameter: its body is held (CallElements.body) to its close
SKIP = 3  # inside a repeated parameter: read and left out
STOP = 4  # text between parameters: the rest is malformed (vLLM stops there too)


def _types(scope: Scope, call: CallElements) -> dict[str, str]:
    return scope.tools.types(call.name)


def _lead(call: CallElements, key: str) -> str:
    lead = ", " if call.count else "{"
    call.count += 1
    call.sent += key + "\n"  # the parameters sent (a repeat is left out)
    return lead + dumps(key) + ": "


def _holdback(buf: str, start: int) -> int:
    """Where a namespace prefix may begin at the end of `buf` (len(buf) if nowhere)."""
    for k in range(max(start, len(buf) - len(PREFIX) + 1), len(buf)):
        if PREFIX.startswith(buf[k:]):
            return k
    return len(buf)


def feed(scope: Scope, call: CallElements, text: str) -> int:
    """Text of an invoke's body (the engine ends the invoke at `]<]minimax[>[</invoke>`);
    all of it is used."""
    if call.hold:
        call.body += text
        if len(call.body) <= HOLD_MAX:
            return len(text)
        text, call.body, call.hold = call.body, "", False  # too long: stream it all
        _stream_body(scope, call, text)
        return len(text)
    _stream_body(scope, call, text)
    return len(text)


def _stream_body(scope: Scope, call: CallElements, text: str) -> None:
    buf = call.held + text
    call.held = ""
    i = 0
    while i < len(buf) and call.part != STOP:
        part = call.part
        at = buf.find(PREFIX, i)
        end = _holdback(buf, i) if at < 0 else at
        piece = buf[i:end]
        if part == STREAM:
            _stream(scope, call, piece)
        elif part in (BUFFER, SKIP):
            call.body += piece
        elif piece.strip():
            call.part = STOP
            break
        if at < 0:
            call.held = buf[end:]
            break
        close = buf.find(">", at + len(PREFIX))
        if close < 0:
            call.held = buf[at:]  # the tag is not complete yet
            break
        tag = buf[at + len(PREFIX) + 1 : close].strip()
        _tag(scope, call, tag, buf[at : close + 1])
        i = close + 1


def _tag(scope: Scope, call: CallElements, tag: str, raw: str) -> None:
    part = call.part
    if part == BETWEEN:
        if tag.startswith("/"):
            call.part = STOP  # a closer that closes nothing
            return
        call.key, call.body, call.depth = tag, "", 0
        if tag in call.sent.split("\n"):
            call.part = SKIP
        elif _types(scope, call).get(tag, UNKNOWN) == STRING:
            call.part, call.opened = STREAM, False  # (`opened`: its `"key": "` is out)
        else:
            call.part = BUFFER
        return
    closing = tag.startswith("/")
    if call.depth == 0 and closing and tag[1:].strip() == call.key:
        if part == STREAM:
            send_args(scope.out, call, '"' if call.opened else _lead(call, call.key) + '""')
        elif part == BUFFER:
            node = parse(f"{PREFIX}<{call.key}>{call.body}{PREFIX}</{call.key}>")
            if not node.children:  # malformed inside (nested too deep): vLLM stops there
                call.part, call.key, call.body = STOP, "", ""
                return
            value = convert(node.children[0], scope.tools.schema(call.name, call.key))
            send_args(scope.out, call, _lead(call, call.key) + dumps(value))
        call.part, call.key, call.body = BETWEEN, "", ""
        return
    if part == STREAM:
        _stream(scope, call, raw)  # markup inside a string parameter is its text
        return
    call.body += raw
    if closing:
        call.depth -= 1
        if call.depth < 0:
            call.part = STOP
    else:
        call.depth += 1


def _stream(scope: Scope, call: CallElements, text: str) -> None:
    """Text of a `string` parameter; its key goes out with the first of it (a parameter
    cut before any text is left out, as vLLM leaves it)."""
    if not text:
        return
    if not call.opened:
        call.opened = True
        text_lead = _lead(call, call.key) + '"'
        send_args(scope.out, call, text_lead + escape(text))
    else:
        send_args(scope.out, call, escape(text))


def end(scope: Scope, call: CallElements) -> None:
    """The invoke ended (or the output did): a string left open is closed where it
    stopped; any other open parameter is left out, as vLLM leaves it."""
    if call.index < 0 or call.skip:
        return
    if call.hold:
        send_args(scope.out, call, dumps(_held_arguments(scope, call)))
        call.body, call.hold = "", False
        return
    if call.part == STREAM and call.opened:
        send_args(scope.out, call, '"')  # (a cut tag held at the end is markup, not text)
    send_args(scope.out, call, "}" if call.count else "{}")
    call.part, call.held, call.body, call.sent, call.opened = BETWEEN, "", "", "", False


def _held_arguments(scope: Scope, call: CallElements) -> dict[str, Any]:
    """A held invoke body as vLLM converts it: its parameters in order, a repeated one a
    list; as the stream does, a `string` parameter the output stopped in is kept as far
    as it was written, and a tag cut at the end is markup, not text."""
    body = call.body
    at = body.rfind(PREFIX)
    if at >= 0 and ">" not in body[at:]:
        body = body[:at]
    body = body[: _holdback(body, 0)]
    stack = _parse(body)
    root = stack[0]
    if "".join(root.text).strip():
        return {}  # text before the first parameter: none is read (vLLM stops there)
    params = list(root.children)
    if len(stack) == 2 and not stack[1].children:
        cut = stack[1]
        if "".join(cut.text) and scope.tools.type_of(call.name, cut.tag) == STRING:
            params.append(cut)
    top = _Node("")
    top.children = params
    schema = {"properties": {p.tag: scope.tools.schema(call.name, p.tag) for p in params}}
    value = convert(top, schema)
    return value if isinstance(value, dict) else {}
