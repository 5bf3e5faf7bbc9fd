"""What ships is what users run: every module in worker/ is reached from the console
script, the package's public API or a command the Makefile runs with `python -m`; test
fixtures live under tests/. And the wheel holds worker/ and its package-data only."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORKER = ROOT / "worker"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in WORKER.rglob("*.py")}


def imported_by(path: Path, known: set[str]) -> set[str]:
    """The worker modules `path` imports, at the top or inside a function, absolute or
    relative, or names as a string (importlib, `python -m`)."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value]
        found |= {n for n in names if n in known}
    return found


def entry_points() -> set[str]:
    """The console script's module, the package itself, `python -m worker`, and what the
    Makefile runs as `python -m worker...` (make schemas)."""
    makefile = (ROOT / "Makefile").read_text()
    scripts = {"worker.cli"}
    return scripts | {"worker", "worker.__main__"} | set(re.findall(r"-m (worker[\w.]*)", makefile))


def unreached() -> set[str]:
    known = modules()
    seen: set[str] = set()
    todo = list(entry_points())
    while todo:
        name = todo.pop()
        if name in seen or name not in known:
            continue
        seen.add(name)
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # its packages run first
        todo += imported_by(known[name], set(known))
    return set(known) - seen


def test_every_shipped_module_is_used_by_a_command_or_the_api() -> None:
    assert unreached() == set(), "only tests use these: move them under tests/"


def test_the_console_script_is_an_entry_point() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert {target.partition(":")[0] for target in scripts.values()} <= entry_points()


def test_the_wheel_holds_the_package_only(tmp_path: Path) -> None:
    # Built from a copy: setuptools' build/ folder would otherwise be left in the checkout,
    # and files it kept from an earlier build could hide what this one holds.
    source = tmp_path / "source"
    shutil.copytree(WORKER, source / "worker", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(tmp_path),
            str(source),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    # What `pip install` shows a user: no deprecation banner, nor any other warning.
    assert "Warning" not in done.stderr, done.stderr
    (wheel,) = tmp_path.glob("derender_worker-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"worker"}
    assert "worker/py.typed" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    shipped = {n for n in names if n.endswith(".py")}
    assert shipped == {p.relative_to(ROOT).as_posix() for p in WORKER.rglob("*.py")}
