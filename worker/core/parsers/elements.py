"""MiniMax M3's parameters as JSON (vllm-parsers-0.33.md §3.5).

Inside an invoke every tag carries the namespace prefix `]<]minimax[>[`; a parameter is
an element named after it, `]<]minimax[>[<city>Tokyo]<]minimax[>[</city>`, whose value is
its text, or its child elements: an object, or a list when the children are `<item>`s
and the schema says array (a repeated child is a list too). Text mixed with children is
kept under `$text`. A leaf is typed by the tool's schema for that parameter.

vLLM converts the whole invoke at its end; here each parameter is sent when it closes (in
the same order, so the same JSON), and a parameter the schema types `string` streams as
it arrives — so what is held is one parameter, never the call, and a long string costs a
record its own length. A repeated parameter (which vLLM would turn into a list) keeps
its first value.
"""

from __future__ import annotations

from typing import Any

from worker.core.parsers.convert import STRING, UNKNOWN, coerce_value, dumps, escape
from worker.core.parsers.events import send_args
from worker.core.parsers.scope import Scope
from worker.core.parsers.state import CallElements

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


# -- streaming: one parameter at a time -------------------------------------------------

# CallElements.part: where in an invoke's body the text is
BETWEEN = 0  # between parameters
STREAM = 1  # inside a `string` parameter: its text is sent as it comes
BUFFER = 2  # inside any other parameter: its body is held (CallElements.body) to its close
SKIP = 3  # inside a repeated parameter: read and left out
STOP = 4  # text between parameters: the rest is malformed (vLLM stops there too)


def _types(scope: Scope, call: CallElements) -> dict[str, str]:
    return next((t.types for t in scope.st.tools if t.name == call.name), {})


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
    return len(text)


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
            if node.children:
                child = node.children[0]
                value = _value(child, _types(scope, call).get(call.key, UNKNOWN), top=True)
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
    if call.part == STREAM and call.opened:
        send_args(scope.out, call, '"')  # (a cut tag held at the end is markup, not text)
    send_args(scope.out, call, "}" if call.count else "{}")
    call.part, call.held, call.body, call.sent, call.opened = BETWEEN, "", "", "", False
