"""Value conversion for formats whose arguments are not JSON text (XML, DSML, pythonic).

Each converter turns one *complete* value into JSON text, or None when the value cannot
be expressed (the caller then drops it). Only whole values are converted: the engine
streams a value's text itself only where that text is final (string values), which is
the stable-prefix rule of vLLM's ParserEngine (vllm/parser/engine/parser_engine.py)
without re-converting the whole argument text on every chunk.
"""

from __future__ import annotations

import ast
import json
import math
from typing import Any

import msgspec

# JSON Schema type names as `ToolSchema.types` keeps them; "" means not declared.
STRING = "string"
UNKNOWN = ""
_INTEGER = ("integer", "int")
_NUMBER = ("number", "float", "double")
_BOOLEAN = ("boolean", "bool")
_CONTAINER = ("object", "array", "dict", "list")
_NULL_WORDS = ("null", "none")


def loads(text: str) -> Any:
    """`json.loads`, with JSON nested past Python's recursion limit read as no JSON (a
    ValueError, like any other text that is not JSON) rather than failing the request."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def dumps(value: Any) -> str:
    """JSON text as vLLM writes arguments (`json.dumps(…, ensure_ascii=False)`)."""
    return json.dumps(value, ensure_ascii=False)


_json_encode = msgspec.json.Encoder().encode


def escape(text: str) -> str:
    """The JSON-string body of `text` (UTF-8 kept, like `ensure_ascii=False`). Escapes
    are per character, so the escapes of pieces concatenate to the escape of the whole
    (string values stream piecewise)."""
    return _json_encode(text)[1:-1].decode()


def schema_type(schema: Any) -> str:
    """The one type the converter uses for a parameter's JSON Schema (first non-null)."""
    if not isinstance(schema, dict):
        return UNKNOWN
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), None)
    if t is None:
        for alt in schema.get("anyOf") or schema.get("oneOf") or ():
            sub = schema_type(alt)
            if sub:
                return sub
        return UNKNOWN
    return t if isinstance(t, str) else UNKNOWN


# vLLM's MiniMax M3 coercion tries a parameter's types in this order.
_COERCE_ORDER = ("null", "integer", "number", "boolean", "object", "array", "string")


def schema_types(schema: Any) -> str:
    """Every type a parameter's JSON Schema allows (`type` lists, `anyOf` / `oneOf`, the
    types of an `enum`'s values), `|`-joined in the order MiniMax M3 tries them."""
    found: set[str] = set()
    _collect_types(schema, found)
    return "|".join(t for t in _COERCE_ORDER if t in found)


def _collect_types(schema: Any, found: set[str]) -> None:
    if not isinstance(schema, dict):
        return
    t = schema.get("type")
    for name in t if isinstance(t, list) else [t]:
        if isinstance(name, str):
            found.add(name)
    for alt in (schema.get("anyOf") or []) + (schema.get("oneOf") or []):
        _collect_types(alt, found)
    for value in schema.get("enum") or ():
        found.add(_enum_type(value))


def _enum_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, dict):
        return "object"
    return "array" if isinstance(value, list) else "string"


def coerce_value(raw: str, types: str) -> Any:
    """A MiniMax M3 leaf's text as the first of `types` it can be (schema_types' order):
    `null`; an integer; a number; a boolean (`true`/`false` in any case, `1`/`0`); a JSON
    object / array; a string. When none fits, JSON if it parses, else the text."""
    text = raw.strip()
    for t in types.split("|") if types else ():
        if t == "null" and text.lower() == "null":
            return None
        if t == "integer":
            try:
                return int(text)
            except ValueError:
                pass
        elif t == "number":
            try:
                number = float(text)
            except ValueError:
                continue
            if math.isfinite(number):
                return int(number) if number.is_integer() else number
        elif t == "boolean" and text.lower() in ("true", "false", "1", "0"):
            return text.lower() in ("true", "1")
        elif t in ("object", "array"):
            try:
                value = loads(text)
            except ValueError:
                continue
            if isinstance(value, dict if t == "object" else list):
                return value
        elif t == "string":
            return raw
    try:
        value = loads(text)
    except ValueError:
        return raw
    return value if _finite(value) else raw


def typed_value(raw: str, type_name: str) -> str:
    """XML (`<parameter=k>v</parameter>`) and DSML `string="true"` values: the text is a
    string unless the tool's schema gives another type (vLLM's vllm/parser/qwen3.py)."""
    if type_name in (STRING, UNKNOWN):
        return dumps(raw)
    text = raw.strip()
    if text.lower() in _NULL_WORDS:
        return "null"
    if type_name in _INTEGER:
        try:
            return dumps(int(text))
        except ValueError:
            return json_or_text(raw)
    if type_name in _NUMBER:
        try:
            number = float(text)
        except ValueError:
            return json_or_text(raw)
        if not math.isfinite(number):
            return dumps(raw)
        return dumps(int(number)) if number.is_integer() else dumps(number)
    if type_name in _BOOLEAN:
        low = text.lower()
        if low in ("true", "false"):
            return low
        return json_or_text(raw)
    if type_name in _CONTAINER:
        try:
            return dumps(loads(text))
        except ValueError:
            # A Python list / dict literal is taken (`{'a': 1}`); a tuple `(1,2)` is not
            # an array, and stays text, as vLLM keeps it.
            value = python_literal(text) if text[:1] in "[{" else None
            return dumps(raw) if value is None else value
    return json_or_text(raw)


def guessed_value(raw: str) -> str:
    """A value no schema types (poolside_v1): JSON, else a Python literal, else text."""
    try:
        value = loads(raw)
        if _finite(value):
            return dumps(value)
    except ValueError:
        pass
    literal = python_literal(raw)
    return dumps(raw) if literal is None else literal


def json_or_text(raw: str) -> str:
    """A value that is not of its schema type: what it is as JSON (`2.5` for an integer,
    `[1]` for a boolean), else its text, as vLLM 0.33's coercion falls back."""
    try:
        value = loads(raw)
    except ValueError:
        return dumps(raw)
    return dumps(value) if _finite(value) else dumps(raw)


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    return True


def json_value(raw: str, type_name: str) -> str:
    """DSML `string="false"` values: JSON text; a value that does not parse stays a
    string (vLLM's vllm/parser/deepseek_v4.py). Then the schema type corrects it as vLLM
    0.33 does: a string parsed as the type, a scalar of a string parameter as its JSON
    text; arrays and objects stay as the model wrote them."""
    try:
        value = loads(raw)
    except ValueError:
        return dumps(raw)
    if isinstance(value, float) and not math.isfinite(value):
        return dumps(raw)
    if isinstance(value, list | dict) or type_name == UNKNOWN:
        return dumps(value)
    if isinstance(value, str):
        return typed_value(value, type_name)
    if type_name == STRING:
        return dumps(json.dumps(value))
    return dumps(value)


_PY_NAMES = {"True": True, "False": False, "None": None, "true": True, "false": False, "null": None}


class _NotLiteral(Exception):
    pass


def _literal(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool) or value is None or isinstance(value, int | str):
            return value
        if isinstance(value, float) and math.isfinite(value):
            return value
        raise _NotLiteral  # bytes, complex, inf/nan (test_tool_cases.py P09, P10)
    if isinstance(node, ast.Name) and node.id in _PY_NAMES:
        return _PY_NAMES[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = _literal(node.operand)
        if isinstance(operand, bool) or not isinstance(operand, int | float):
            raise _NotLiteral
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.List | ast.Tuple):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        out: dict[str, Any] = {}
        for k, v in zip(node.keys, node.values, strict=True):
            if k is None:
                raise _NotLiteral
            key = _literal(k)
            if not isinstance(key, str | int | float | bool) and key is not None:
                raise _NotLiteral
            out[key if isinstance(key, str) else dumps(key)] = _literal(v)
        return out
    raise _NotLiteral


def python_literal(text: str) -> str | None:
    """A Python literal (pythonic tool calls) as JSON text; None if it is not one."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
        return dumps(_literal(tree.body))
    except (SyntaxError, ValueError, _NotLiteral, RecursionError, MemoryError):
        return None
