"""docs/operate/cli.md is what `python -m worker.commands.reference` writes from the flag
tables, and it names every flag each command's parser takes."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from worker.cli import build_parser
from worker.commands import COMMANDS
from worker.commands.reference import render
from worker.errors import EXIT_CODES

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "operate" / "cli.md"


def test_the_page_is_what_the_generator_writes() -> None:
    assert PAGE.read_text(encoding="utf-8") == render(), (
        "docs/operate/cli.md is stale: run "
        "`.venv/bin/python -m worker.commands.reference docs/operate/cli.md`"
    )


def test_the_generator_writes_the_page_it_is_given(tmp_path: Path) -> None:
    out = tmp_path / "cli.md"
    subprocess.run(
        [sys.executable, "-m", "worker.commands.reference", str(out)], check=True, cwd=ROOT
    )
    assert out.read_text(encoding="utf-8") == render()


def _section(page: str, name: str) -> str:
    return page.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in build_parser({})._actions if a.dest == "command")
    assert isinstance(action, argparse._SubParsersAction)
    return dict(action.choices)


@pytest.mark.parametrize("name", [c.name for c in COMMANDS])
def test_each_command_s_section_names_every_flag_and_variable(name: str) -> None:
    section = _section(render(), name)
    parser = _subparsers()[name]
    for action in parser._actions:
        if action.dest == "help":
            continue
        shown = action.option_strings[-1] if action.option_strings else action.dest
        assert f"`{shown}" in section or f", {shown}" in section, (name, shown)
    command = next(c for c in COMMANDS if c.name == name)
    for flag in command.flags:
        if flag.env:
            assert f"`{flag.env}`" in section, (name, flag.name)


def test_the_exit_codes_are_listed() -> None:
    table = render().split("\n## Exit codes\n", 1)[1]
    for code, _ in EXIT_CODES:
        assert f"\n| {code} |" in table
