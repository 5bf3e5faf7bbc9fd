"""The request's tools as the scanners read them: looked up by name, built once.

A request brings its tools at seq 0 and they never change, so they are not part of the
per-choice parser state: the core keeps them in the request's tables (core/tables.py),
stored once beside the state and compiled once per distinct content, and hands the table
to every feed. A lookup by name is one dict access whatever the number of tools (an agent
request with hundreds of MCP tools costs a record what a plain one does).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from worker.core.parsers.arguments.convert import UNKNOWN
from worker.core.parsers.language.state import ToolSchema


class ToolTable:
    """The request tools' names and parameter types, in request order."""

    __slots__ = ("_by_name", "schemas")

    def __init__(self, schemas: Sequence[ToolSchema]) -> None:
        self.schemas = tuple(schemas)
        by_name: dict[str, ToolSchema] = {}
        for s in self.schemas:
            by_name.setdefault(s.name, s)  # a repeated name: the first one, as vLLM reads
        self._by_name = by_name

    def __bool__(self) -> bool:
        return bool(self.schemas)

    def __len__(self) -> int:
        return len(self.schemas)

    def known(self, name: str) -> bool:
        return name in self._by_name

    def types(self, name: str) -> dict[str, str]:
        """The parameter types of the tool `name` (empty when there is no such tool)."""
        s = self._by_name.get(name)
        return s.types if s is not None else {}

    def required(self, name: str) -> list[str]:
        """The parameters the tool `name` requires (filled only for formats that check
        them: `ToolSchema.required`)."""
        s = self._by_name.get(name)
        return s.required if s is not None else []

    def schema(self, name: str, key: str) -> Any:
        """The JSON Schema of a tool's parameter (None when not declared; filled only for
        formats that type nested values: `ToolSchema.params`)."""
        s = self._by_name.get(name)
        return s.params.get(key) if s is not None else None

    def type_of(self, name: str, key: str) -> str:
        """The schema type of a tool's parameter (UNKNOWN when not declared)."""
        s = self._by_name.get(name)
        return s.types.get(key, UNKNOWN) if s is not None else UNKNOWN


NO_TOOLS = ToolTable(())
