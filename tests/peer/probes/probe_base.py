"""What every probe of probe_cases.py shares: the tool set, the request extras (tools,
tool_choice none / required / named, include_reasoning false), a probe case `P` and a
family's `Probe` (tokenizer, EOS, cases), and the two call texts most families wrap."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tokenizers import Tokenizer

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "days": {"type": "integer"},
                    "include_hourly": {"type": "boolean"},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_current_date",
            "description": "Today",
            "parameters": {"type": "object", "properties": {}},
        },
    },
]
T = {"tools": "@0"}
NONE = {"tools": "@0", "tool_choice": "none"}
REQUIRED = {"tools": "@0", "tool_choice": "required"}
NAMED = {"tools": "@0", "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}
HIDE = {"include_reasoning": False}


@dataclass(frozen=True)
class P:
    label: str
    text: str
    request: dict[str, Any] = field(default_factory=dict)
    finish: str = "stop"  # "stop" (EOS appended) or "length"
    messages: list[dict[str, Any]] | None = None
    ids: list[int] | None = None  # instead of encoding `text`


@dataclass(frozen=True)
class Probe:
    tokenizer: Callable[[], Tokenizer]
    eos: int
    cases: list[P]


WEATHER = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
DATE = '{"name": "get_current_date", "arguments": {}}'
