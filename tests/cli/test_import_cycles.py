"""No import circle in worker/: a module's imports form a graph without cycles, at module
level and counting the imports deferred into functions."""

from __future__ import annotations

import graphlib
from pathlib import Path

import pytest

from tests.cli.import_graph import import_graph


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return None


@pytest.mark.parametrize("deferred", [False, True], ids=["module-level", "with-deferred"])
def test_worker_has_no_import_circle(deferred: bool) -> None:
    graph = import_graph(deferred=deferred)
    assert graph.get("worker.run.runner"), "the graph found no imports"
    found = cycle(graph)
    assert found is None, " -> ".join(found or [])


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "worker" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_circle_is_found_at_module_level_and_deferred(tmp_path: Path) -> None:
    """The check can fail: a circle through a relative import, a submodule imported from
    its package, and one hidden in a function (the way cli and serve's command were)."""
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from . import b\n",
            "b.py": "from worker.sub import c\n",
            "sub/__init__.py": "",
            "sub/c.py": "import worker.a\n",
            "cli.py": "def main():\n    from worker.serve import run\n",
            "serve.py": "def run():\n    from worker.cli import main\n",
        },
    )
    assert set(cycle(import_graph(root)) or []) == {"worker.a", "worker.b", "worker.sub.c"}
    graph = import_graph(root, deferred=True)
    graph["worker.sub.c"].clear()
    assert set(cycle(graph) or []) == {"worker.cli", "worker.serve"}
    assert cycle({k: set() for k in graph}) is None


def test_type_checking_imports_are_not_module_level(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import worker.b\n",
            "b.py": "import worker.a\n",
        },
    )
    assert cycle(import_graph(root)) is None
    assert cycle(import_graph(root, deferred=True)) is not None
