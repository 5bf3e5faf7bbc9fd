"""What several commands share: the collector and event-loop set-up of `run` and `serve`,
the Kafka security flags of `publish` and `tail`, and their broker's failures as one line."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from worker.errors import ConfigError, Unreachable
from worker.flags import SettingsError

T = TypeVar("T")


def tune_gc() -> None:
    """A batch keeps hundreds of records' objects alive at once, which makes CPython's
    young-generation collector run constantly (bench/README.md: these settings speed the
    batch loop up). Objects that live through start-up (tokenizers, registry, compiled
    codecs) are frozen out of every later collection."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


def event_loop_factory(choice: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The loop `run` runs on: uvloop when asked for or (auto) installed; None = asyncio's."""
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise SettingsError("--event-loop uvloop: uvloop is not installed") from None
        return None
    return uvloop.new_event_loop


def kafka_security(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """`publish` and `tail`: `run`'s security flags, and the aiokafka options they make."""
    from worker.adapters.broker.kafka import security_kwargs
    from worker.settings import security_from_args

    sec = security_from_args(args)
    return sec, security_kwargs(sec)


def run_against_broker(bootstrap: str, main: Coroutine[Any, Any, T]) -> T:
    """Run a tool's coroutine; a broker that does not answer is `Unreachable` (one line,
    exit 3), where `run` would retry until its outage limit."""
    from aiokafka import errors

    try:
        return asyncio.run(main)
    except errors.KafkaConnectionError as exc:
        raise Unreachable(_without_class(str(exc), bootstrap)) from None
    except errors.KafkaTimeoutError as exc:
        raise Unreachable(f"the broker at {bootstrap} did not answer in time ({exc})") from None


def _without_class(message: str, bootstrap: str) -> str:
    """aiokafka's messages repeat their class name ("KafkaConnectionError: ...")."""
    message = message.removeprefix("KafkaConnectionError: ")
    if bootstrap not in message:
        message = f"cannot reach the broker at {bootstrap}: {message}"
    return message


def read_text_lines(path: str, stdin: Any) -> list[str]:
    """The non-blank lines of `path` (or `stdin` for "-"); ConfigError when unreadable."""
    try:
        if path == "-":
            return [line for line in stdin if line.strip()]
        with open(path, encoding="utf-8") as src:
            return [line for line in src if line.strip()]
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason})") from None
