"""docs/operate/cli.md, written from the flag tables: every command's synopsis,
description and flags (each with its variable and default), and the exit codes.

    python -m worker.commands.reference docs/operate/cli.md

tests/cli/test_reference.py fails when the page is not what this writes.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path

from worker.commands import COMMANDS
from worker.errors import EXIT_CODES
from worker.flags import SECRET_FILE_SUFFIX, Command, Flag, env_name

HEADER = """\
<!-- Generated from the flag tables (worker/commands/, worker/settings.py) by
     `python -m worker.commands.reference docs/operate/cli.md`: edit the tables and
     run it again, not this page (tests/cli/test_reference.py checks they agree). -->

# CLI reference

Every command is `derender-worker <command> [flags]`; `derender-worker <command> --help`
lists its flags, and `derender-worker --version` prints the installed version.

Each flag can also be set by the environment variable in its row (`DERENDER_` and the
flag's name in capitals, dashes as underscores; `publish --topic` and `tail --topic` read
`run`'s `DERENDER_INPUT_TOPIC` and `DERENDER_OUTPUT_TOPIC`). A flag on the command line
wins over its variable. A switch's variable takes `1`, `true`, `yes` or `on` (or `0`,
`false`, `no`, `off`). A secret flag also has a `--<flag>-file` form (and its variable):
a file holding the value, the way Kubernetes mounts a secret, so that the value shows
neither in `ps` nor in the environment.

A failure the command expects (a bad flag or file, a broker that does not answer, a
refused login) is one line on stderr, `derender-worker <command>: <what went wrong>`,
and one of the [exit codes](#exit-codes).
"""


def _text(text: str) -> str:
    """Markdown for a help text: `<`, `>` and `|` escaped outside code spans."""
    parts = text.split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;")
    return "`".join(parts).replace("|", "\\|")


def _default(f: Flag) -> str:
    if f.kind == "switch":
        return "off"
    if f.default is None:
        return "unset"
    return f"`{f.default}`"


def _name(f: Flag) -> str:
    if f.kind == "positional":
        return f"`{f.metavar or f.attr}` (argument)"
    flag = f"--{f.name} {f.metavar}" if f.metavar else f"--{f.name}"
    if f.short:
        flag = f"{f.short}, {flag}"
    return f"`{flag}` (repeatable)" if f.kind == "repeated" else f"`{flag}`"


def _help(f: Flag) -> str:
    named = f.choices is None or all(c in f.help for c in f.choices)
    extra = "" if named else f" (one of: {', '.join(f.choices or ())})"
    return _text(f.help + extra)


def _rows(flags: Sequence[Flag]) -> list[str]:
    rows = ["| Flag | Variable | Default | Description |", "|---|---|---|---|"]
    for f in flags:
        variable = f"`{f.env}`" if f.env else "none"
        rows.append(f"| {_name(f)} | {variable} | {_default(f)} | {_help(f)} |")
        if f.secret:
            file_flag = f.name + SECRET_FILE_SUFFIX
            rows.append(
                f"| `--{file_flag} PATH` | `{env_name(file_flag)}` | unset | "
                f"read `--{f.name}` from this file (one trailing newline dropped) |"
            )
    return rows


def _synopsis(c: Command) -> str:
    positional = [f"[{f.metavar or f.attr}]" for f in c.flags if f.kind == "positional"]
    return " ".join(["derender-worker", c.name, "[flags]", *positional])


def _command(c: Command) -> list[str]:
    # (A sentence starts in capitals, a name such as vLLM as it is spelled.)
    first = c.help[0].upper() if c.help[1:2].islower() else c.help[0]
    lines = [f"## {c.name}", "", _text(first + c.help[1:]) + "."]
    if c.description:
        lines += ["", _text(c.description)]
    lines += ["", "```text", _synopsis(c), "```", ""]
    return [*lines, *_rows(c.flags), ""]


def render() -> str:
    lines = [HEADER, "| Command | What it does |", "|---|---|"]
    lines += [f"| [`{c.name}`](#{c.name}) | {_text(c.help)} |" for c in COMMANDS]
    lines.append("")
    for c in COMMANDS:
        lines += _command(c)
    lines += ["## Exit codes", "", "| Code | Meaning |", "|---|---|"]
    lines += [f"| {code} | {_text(meaning)} |" for code, meaning in EXIT_CODES]
    text = "\n".join(lines) + "\n"
    return re.sub(r"\n{3,}", "\n\n", text)


def main(argv: Sequence[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if len(args) != 1:
        print("usage: python -m worker.commands.reference PAGE.md", file=sys.stderr)
        return 2
    Path(args[0]).write_text(render(), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
