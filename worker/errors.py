"""The failures a command expects, and the exit code each ends with.

`worker.cli.main` turns a `CommandError` into one line on stderr,
`derender-worker <command>: <message>`, and its `exit_code`; anything else is a bug and
keeps its traceback. `EXIT_CODES` is the table docs/operate/cli.md prints.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_INTERRUPTED = 130

EXIT_CODES: tuple[tuple[int, str], ...] = (
    (EXIT_OK, "done (`run` and `serve`: stopped by SIGTERM or SIGINT)"),
    (
        EXIT_FAILED,
        "the command ran and failed: `run` gave up after `--outage-limit-s` of Redis or the "
        "broker failing; `check` found the worker not alive (or not ready); `servers` lost "
        "a server",
    ),
    (
        EXIT_USAGE,
        "usage or configuration: an unknown flag, a bad flag or `DERENDER_*` value, an "
        "unreadable or invalid file (model registry, input, secret), a login, certificate "
        "or ACL the broker or Redis refuses, a missing topic, a port already in use",
    ),
    (
        EXIT_UNREACHABLE,
        "a server the command needs does not answer: `publish` and `tail` when no broker of "
        "`--bootstrap-servers` does (`run` waits for its servers instead, up to "
        "`--outage-limit-s`)",
    ),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C) before the command finished"),
)


class CommandError(Exception):
    """An expected failure: one line, no traceback, `exit_code`."""

    exit_code = EXIT_FAILED


class ConfigError(CommandError):
    """Cannot run as configured: a flag, a variable or a file is wrong, or a server
    refuses the login or a right. Nothing is retried: someone must change something."""

    exit_code = EXIT_USAGE


class Unreachable(CommandError):
    """A server the command needs does not answer (a tool, unlike `run`, does not wait)."""

    exit_code = EXIT_UNREACHABLE
