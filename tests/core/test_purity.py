"""The core stays pure: no I/O, clock, randomness, environment or asyncio
(docs/design/index.md, "The principles")."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[2] / "worker" / "core"
FORBIDDEN_MODULES = {
    "asyncio",
    "aiokafka",
    "redis",
    "prometheus_client",
    "time",
    "datetime",
    "random",
    "os",
    "socket",
    "subprocess",
    "threading",
    "logging",
    "uuid",
    "secrets",
    "io",
    "pathlib",
    "worker.adapters",
    "worker.batch.pipeline",
    "worker.cli",
    "worker.config",
}
FORBIDDEN_CALLS = {"open", "print", "input", "exec", "eval"}


def _imports(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", sorted(CORE.rglob("*.py")), ids=lambda p: p.name)
def test_core_module_is_pure(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bad = {
        name
        for name in _imports(tree)
        if any(name == m or name.startswith(m + ".") for m in FORBIDDEN_MODULES)
    }
    assert not bad, f"{path.name} imports {sorted(bad)}"
    calls = {
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    assert not calls & FORBIDDEN_CALLS, f"{path.name} calls {sorted(calls & FORBIDDEN_CALLS)}"


def test_the_check_itself_catches_an_impure_module(tmp_path: Path) -> None:
    tree = ast.parse("import time\nfrom redis import asyncio\n")
    assert _imports(tree) >= {"time", "redis"}
