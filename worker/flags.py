"""The one flag system every command uses: a `Flag` table per command builds its parser,
gives each flag its `DERENDER_<FLAG>` variable, and writes docs/operate/cli.md.

A secret flag also has a `--<flag>-file` form (and `DERENDER_<FLAG>_FILE`), a file
holding the value, the way Kubernetes mounts a secret.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from worker import constants
from worker.errors import ConfigError

# What the `--<flag>-file` form of a secret flag is called, and its variable.
SECRET_FILE_SUFFIX = "-file"

# How a flag is given: `--name VALUE`, a positional VALUE, a bare `--name` (on/off), or
# `--name VALUE` any number of times (a list).
Kind = Literal["option", "positional", "switch", "repeated"]
SWITCH_VALUES = {"1": True, "true": True, "yes": True, "on": True}
SWITCH_VALUES |= {"0": False, "false": False, "no": False, "off": False, "": False}


def env_name(flag: str) -> str:
    """The variable a flag also reads: `--some-flag` → `DERENDER_SOME_FLAG`."""
    return constants.ENV_PREFIX + flag.upper().replace("-", "_")


class SettingsError(ConfigError, ValueError):
    """A flag's value (or its variable's) that the command cannot use."""


@dataclass(frozen=True)
class Flag:
    name: str  # the long flag without dashes, e.g. "bootstrap-servers"
    default: Any
    help: str
    type: Callable[[str], Any] = str
    secret: bool = False  # never logged
    kind: Kind = "option"
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    short: str | None = None  # a one-letter alias, e.g. "-o"
    # The variable it reads when not the derived DERENDER_<NAME> (e.g. publish's --topic
    # reads DERENDER_INPUT_TOPIC, as `run`'s --input-topic); "" for none.
    variable: str | None = None

    @property
    def env(self) -> str:
        """The variable, or "" when the flag reads none (a positional, a repeated flag)."""
        if self.variable is not None:
            return self.variable
        if self.kind in ("positional", "repeated"):
            return ""
        return env_name(self.name)

    @property
    def attr(self) -> str:
        return self.name.replace("-", "_")


class _FromEnvironment(str):
    """A default read from a variable: converted (and refused) only when its command runs,
    so one bad variable does not break every other command."""

    variable: str


def _convert(f: Flag) -> Callable[[str], Any]:
    def convert(raw: str) -> Any:
        if not isinstance(raw, _FromEnvironment):
            return f.type(raw)  # (argparse names the flag in its usage error)
        try:
            value = f.type(raw)
        except (ValueError, TypeError, argparse.ArgumentTypeError):
            value = None
        else:
            if f.choices is None or value in f.choices:
                return value
        # (Not a ValueError: argparse lets it through to main's one-line boundary.)
        expected = f" (expected {', '.join(f.choices)})" if f.choices else ""
        raise ConfigError(f"{raw.variable}: invalid value {str(raw)!r}{expected}")

    convert.__name__ = getattr(f.type, "__name__", "value")
    return convert


def _switch(raw: str) -> bool:
    value = SWITCH_VALUES.get(raw.strip().lower())
    if value is None:
        raise ValueError(raw)
    return value


def _from_env(f: Flag, env: Mapping[str, str]) -> Any:
    raw = env.get(f.env) if f.env else None
    if raw is None:
        return f.default
    value = _FromEnvironment(raw)
    value.variable = f.env
    return value


class _Switch(argparse.Action):
    """`--name` sets True; its variable's value (1/0, yes/no, ...) is converted by its
    `type` at parse time, as an option's is."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kw: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, **kw)

    def __call__(self, parser: argparse.ArgumentParser, namespace: Any, *_: Any) -> None:
        setattr(namespace, self.dest, True)


def shown_default(f: Flag) -> str:
    if f.kind == "switch":
        return "off"
    if f.secret and f.default:
        return "***"
    return repr(f.default)


def add_flag_list(
    parser: argparse.ArgumentParser,
    flags: Sequence[Flag],
    environ: Mapping[str, str] | None = None,
) -> None:
    """Each flag, its `DERENDER_*` variable as its default, and for a secret one also
    `--<flag>-file` (and `DERENDER_<FLAG>_FILE`): a file holding the value, the way
    Kubernetes mounts a secret (`read_secret_files` reads it)."""
    env = os.environ if environ is None else environ
    for f in flags:
        where = f"env {f.env}; " if f.env else ""
        if f.kind == "positional":
            parser.add_argument(
                f.attr,
                nargs="?",
                default=f.default,
                type=_convert(f),
                metavar=f.metavar or f.attr,
                help=f"{f.help} [default {f.default!r}]",
            )
            continue
        kw: dict[str, Any] = {"default": _from_env(f, env)}
        if f.kind == "switch":
            switch = Flag(f.name, False, "", _switch)
            kw |= {"action": _Switch, "type": _convert(switch)}
            kw["help"] = f"{f.help} [{where}default off]"
        else:
            kw |= {"type": _convert(f), "choices": f.choices, "metavar": f.metavar}
            kw["action"] = "append" if f.kind == "repeated" else "store"
            kw["help"] = f"{f.help} [{where}default {shown_default(f)}]"
        parser.add_argument(*filter(None, (f.short, f"--{f.name}")), **kw)
        if f.secret:
            file_flag = f.name + SECRET_FILE_SUFFIX
            parser.add_argument(
                f"--{file_flag}",
                default=env.get(env_name(file_flag)),
                metavar="PATH",
                help=f"read --{f.name} from this file (one trailing newline dropped) "
                f"[env {env_name(file_flag)}]",
            )


def read_secret_files(args: argparse.Namespace, flags: Sequence[Flag]) -> None:
    """Replace each secret flag's value by its `--<flag>-file`'s content, when given."""
    for f in flags:
        if not f.secret:
            continue
        file_attr = (f.name + SECRET_FILE_SUFFIX).replace("-", "_")
        path = getattr(args, file_attr, None)
        if not path:
            continue
        if getattr(args, f.attr) not in (None, f.default):
            raise SettingsError(
                f"--{f.name} and --{f.name}{SECRET_FILE_SUFFIX} are both set "
                f"({f.env} counts as --{f.name}): keep one"
            )
        try:
            with open(path, encoding="utf-8") as fh:
                value = fh.read()
        except OSError as exc:
            raise SettingsError(
                f"--{f.name}{SECRET_FILE_SUFFIX}: cannot read {path}: {exc.strerror}"
            ) from None
        value = value.removesuffix("\n").removesuffix("\r")
        if not value:
            raise SettingsError(f"--{f.name}{SECRET_FILE_SUFFIX}: {path} is empty")
        setattr(args, f.attr, value)


def secret_values(flags: Sequence[Flag], values: object) -> list[str]:
    """The strings of `values`' secret flags the logs must never show: each value, and
    the passwords inside a URL (`redis://user:pw@…`, a seed list, `ssl_password=`)."""
    out: list[str] = []
    for f in flags:
        value = getattr(values, f.attr, None) if f.secret else None
        if not value:
            continue
        out.append(str(value))
        for item in str(value).split(","):
            try:
                password = urlsplit(item.strip()).password
            except ValueError:
                password = None
            if password:
                out += [password, unquote(password)]
            out += re.findall(r"[?&]ssl_password=([^&,]*)", item)
    return out


@dataclass(frozen=True)
class Command:
    """One `derender-worker <name>`: its flag table and what it runs (exit code back)."""

    name: str
    help: str  # one line, in the top-level usage
    description: str | None
    flags: Sequence[Flag]
    run: Callable[[argparse.Namespace], int]
