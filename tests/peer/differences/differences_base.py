"""The `Difference` type and the readers of one observed difference (`compare.Diff`:
field path, vLLM's value, ours) that every topic's predicates share.

Imports nothing of the project: it is read by a test that runs without vLLM or httpx.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Difference:
    id: str
    title: str
    explains: Callable[[Any, Any], bool]  # (case, diff) -> bool


CHOICE = re.compile(r"^\.choices\.(\d+)\.")


def field_of(diff: Any) -> str:
    """The diff's path below its choice (`content`, `tool_calls.0.arguments`, …)."""
    return re.sub(r"^\.choices\.\d+\.(message\.)?", "", diff.path)


def generated(case: Any, diff: Any) -> Any:
    """The generated choice a diff is about (the first output's, by choice index)."""
    m = CHOICE.match(diff.path)
    index = int(m.group(1)) if m else 0
    return next((g for g in case.outputs[0] if g.index == index), None)


def any_field(diff: Any) -> str:
    """field_of, also for compare_to_whole's paths (`whole.choices.0.content`)."""
    return re.sub(r"^(whole)?\.?choices\.\d+\.(message\.)?", "", diff.path)


def content_field(diff: Any) -> bool:
    return field_of(diff) == "content" and isinstance(diff.vllm, str)


def complete_call(call: Any) -> bool:
    """A streamed call (compare.fold_stream's entry) with a name and JSON-object arguments."""
    if not isinstance(call, dict) or not call.get("name"):
        return False
    return json_object(call.get("arguments"))


def json_object(text: Any) -> bool:
    try:
        return isinstance(text, str) and isinstance(json.loads(text), dict)
    except ValueError:
        return False


def closed_where_cut(v: Any, o: Any) -> bool:
    """Arguments cut short: ours are the text as far as it was written, closed where it
    stopped being JSON (json_check.py), vLLM's that text left open (or less of it)."""
    if not (isinstance(v, str) and isinstance(o, str)) or v == o or not json_object(o):
        return False
    return v.startswith(o.rstrip('"}] ')) or o.startswith(v)
