"""The tables of test_tool_cases.py and test_tool_cases_markers.py: a `Case`, the ways it runs
(NS whole, S streamed in several chunkings, CHARS character deltas), `check`, and the Qwen
marker tokenizer both files use (a module-scoped fixture)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from tokenizers import Tokenizer

from tests.core.parsers.shared.harness import (
    QWEN_ADDED,
    QWEN_SPECIAL,
    Parser,
    Result,
    marker_tokenizer,
)

NS, S, CHARS = "NS", "S", "chars"


@dataclass(frozen=True)
class Case:
    id: str
    text: str
    content: str | None
    calls: tuple[tuple[str, Any], ...] = ()
    modes: tuple[str, ...] = (NS, S)
    exact: bool = False  # arguments compared as text
    deviation: str = ""


def _results(p: Parser, case: Case) -> list[tuple[str, Result]]:
    out: list[tuple[str, Result]] = []
    if NS in case.modes:
        out.append(("NS", p.whole(case.text)))
    if S in case.modes:
        out += [(f"S {how}", r) for how, r in p.all_streams(case.text)]
    if CHARS in case.modes:
        out += [(f"{n} chars", p.stream_chars(case.text, n)) for n in (1, 5, 7)]
    return out


def check(p: Parser, case: Case) -> None:
    for how, got in _results(p, case):
        assert got.reasoning is None, f"{case.id} {how}"
        assert got.content == case.content, f"{case.id} {how}"
        assert got.names() == [n for n, _ in case.calls], f"{case.id} {how}"
        for (name, want), (_, args) in zip(case.calls, got.calls, strict=True):
            if case.exact:
                assert args == want, f"{case.id} {how} {name}"
            else:
                assert json.loads(args) == want, f"{case.id} {how} {name}"


@pytest.fixture(scope="module")
def qwen_tok() -> Tokenizer:
    return marker_tokenizer(added=QWEN_ADDED, special=QWEN_SPECIAL)
