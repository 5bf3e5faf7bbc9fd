"""The graph of worker/'s imports: module-level ones (what runs when a module is imported)
and, with `deferred`, those inside functions too (a circle there is a circle of design)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "worker"


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _module_level(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Imports a module runs when imported: its top level, class bodies and the branches of
    if/try/with, not function bodies nor `if TYPE_CHECKING:` blocks."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            if not _type_checking(node):
                yield from _module_level(node.body)
            yield from _module_level(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody):
                yield from _module_level(block)
            for handler in node.handlers:
                yield from _module_level(handler.body)
        elif isinstance(node, ast.With | ast.ClassDef):
            yield from _module_level(node.body)


def _targets(
    node: ast.Import | ast.ImportFrom, name: str, is_package: bool, known: set[str]
) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:  # relative: from the module's package, up `level - 1` more
        base = name.split(".") if is_package else name.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        module = ".".join([*base, *([node.module] if node.module else [])])
    else:
        module = node.module or ""
    # `from pkg import sub` imports the submodule pkg.sub; `from mod import name`, mod.
    return [f"{module}.{a.name}" if f"{module}.{a.name}" in known else module for a in node.names]


def _every_import(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node


def import_graph(root: Path = ROOT, deferred: bool = False) -> dict[str, set[str]]:
    """Each module of worker/ and the modules of worker/ it imports."""
    imports = _every_import if deferred else _module_level
    files = {module_name(p, root): p for p in sorted((root / PACKAGE).rglob("*.py"))}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in imports(tree.body):
            for target in _targets(node, name, path.name == "__init__.py", set(files)):
                if target in files and target != name:
                    graph[name].add(target)
    return graph
