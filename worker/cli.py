"""The `derender-worker` command line (docs/operate/cli.md): a parser built from each
command's flag table (`worker.commands`), and one error boundary for all of them.

Only the standard library is imported here at first: `run` puts its SIGTERM handler in
place (worker/run/stop_signal.py) before the commands and what they load are imported."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from worker.commands.common import event_loop_factory as event_loop_factory
    from worker.commands.common import tune_gc as tune_gc

PROG = "derender-worker"


def __getattr__(name: str) -> Any:
    # (Re-exported for the benches, imported when asked for.)
    if name in ("event_loop_factory", "tune_gc"):
        from worker.commands import common

        return getattr(common, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class CommandParser(argparse.ArgumentParser):
    """A command's parser: an unknown flag is its own usage error (argparse would hand it
    up to the top-level parser, whose usage does not show the command's flags)."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


class _Version(argparse.Action):
    """`--version`: the installed distribution's version, looked up only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kw: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> NoReturn:
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version(PROG)
        except PackageNotFoundError:
            found = "unknown (not installed)"
        print(f"{PROG} {found}")
        parser.exit()


def build_parser(environ: Mapping[str, str] | None = None) -> argparse.ArgumentParser:
    """Every command's parser; `environ` (default os.environ) gives the DERENDER_* values."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Turn LLM engine token streams into OpenAI-shaped responses.",
    )
    from worker.commands import COMMANDS
    from worker.flags import add_flag_list

    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser)
    for command in COMMANDS:
        p = sub.add_parser(command.name, help=command.help, description=command.description)
        add_flag_list(p, command.flags, environ)
    return parser


def _command_of(argv: Sequence[str]) -> str:
    """The command an argv names (for errors raised while it is being parsed)."""
    from worker.commands import COMMANDS

    names = {c.name for c in COMMANDS}
    return next((a for a in argv if a in names), "")


def main(argv: Sequence[str] | None = None) -> int:
    own = argv is None  # the process's own command line, not a caller's (tests, scripts)
    argv = sys.argv[1:] if argv is None else list(argv)
    if own and argv[:1] == ["run"]:  # (the top level has no option but --version)
        from worker.run import stop_signal

        stop_signal.install()
    from worker.commands import COMMANDS
    from worker.errors import EXIT_INTERRUPTED, EXIT_UNREACHABLE, EXIT_USAGE, CommandError

    command = _command_of(argv)
    try:
        args = build_parser().parse_args(argv)
        run = next(c.run for c in COMMANDS if c.name == args.command)
        return run(args)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except CommandError as exc:
        return _fail(command, str(exc), exc.exit_code)
    except OSError as exc:
        # A server that refused or dropped the connection, else a file or a port (a reader
        # that closed our stdout, BrokenPipeError, is neither: exit 2 as for a file).
        reach = isinstance(exc, ConnectionError) and not isinstance(exc, BrokenPipeError)
        return _fail(command, str(exc), EXIT_UNREACHABLE if reach else EXIT_USAGE)
    except ValueError as exc:  # (the adapters' word for a bad value: a Redis URL, a TTL)
        return _fail(command, str(exc), EXIT_USAGE)


def _fail(command: str, message: str, code: int) -> int:
    print(f"{PROG} {command}: {message}" if command else f"{PROG}: {message}", file=sys.stderr)
    return code
