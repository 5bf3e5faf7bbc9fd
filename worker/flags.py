"""The flag machinery `run` and `serve` share: a flag, its `DERENDER_<FLAG>` variable,
and for a secret one its `--<flag>-file` form (and `DERENDER_<FLAG>_FILE`), a file holding
the value, the way Kubernetes mounts a secret."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from worker import constants

# What the `--<flag>-file` form of a secret flag is called, and its variable.
SECRET_FILE_SUFFIX = "-file"


def env_name(flag: str) -> str:
    """The variable a flag also reads: `--some-flag` → `DERENDER_SOME_FLAG`."""
    return constants.ENV_PREFIX + flag.upper().replace("-", "_")


class SettingsError(ValueError):
    pass


@dataclass(frozen=True)
class Flag:
    name: str  # the long flag without dashes, e.g. "bootstrap-servers"
    default: Any
    help: str
    type: Callable[[str], Any] = str
    secret: bool = False  # never logged

    @property
    def env(self) -> str:
        return env_name(self.name)

    @property
    def attr(self) -> str:
        return self.name.replace("-", "_")


def add_flag_list(
    parser: argparse.ArgumentParser, flags: list[Flag], environ: dict[str, str] | None = None
) -> None:
    """Each flag, its `DERENDER_*` variable as its default, and for a secret one also
    `--<flag>-file` (and `DERENDER_<FLAG>_FILE`): a file holding the value, the way
    Kubernetes mounts a secret (`read_secret_files` reads it)."""
    env = os.environ if environ is None else environ
    for f in flags:
        raw = env.get(f.env)
        try:
            default = f.default if raw is None else f.type(raw)
        except ValueError:
            raise SettingsError(f"{f.env}: invalid value {raw!r}") from None
        shown = "***" if f.secret and f.default else repr(f.default)
        parser.add_argument(
            f"--{f.name}",
            type=f.type,
            default=default,
            help=f"{f.help} [env {f.env}; default {shown}]",
        )
        if f.secret:
            file_flag = f.name + SECRET_FILE_SUFFIX
            parser.add_argument(
                f"--{file_flag}",
                default=env.get(env_name(file_flag)),
                metavar="PATH",
                help=f"read --{f.name} from this file (one trailing newline dropped) "
                f"[env {env_name(file_flag)}]",
            )


def read_secret_files(args: argparse.Namespace, flags: list[Flag]) -> None:
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


def secret_values(flags: list[Flag], values: object) -> list[str]:
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
