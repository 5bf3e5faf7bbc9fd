"""`run` flags: defaults, environment variables and the errors for bad values."""

from __future__ import annotations

import argparse

import pytest

from worker.settings import (
    FLAGS,
    KafkaSecurity,
    Settings,
    SettingsError,
    add_flags,
    add_security_flags,
    from_args,
    security_from_args,
)


def _parse(argv: list[str], environ: dict[str, str] | None = None) -> Settings:
    parser = argparse.ArgumentParser()
    add_flags(parser, environ=environ or {})
    return from_args(parser.parse_args(argv))


def test_defaults_are_the_table_s() -> None:
    s = _parse([])
    for f in FLAGS:
        assert getattr(s, f.attr) == f.default, f.name


def test_environment_sets_a_default_and_the_flag_wins() -> None:
    assert _parse([], {"DERENDER_LANES": "3"}).lanes == 3
    assert _parse(["--lanes", "4"], {"DERENDER_LANES": "3"}).lanes == 4
    assert _parse([], {"DERENDER_EVENT_LOOP": "asyncio"}).event_loop == "asyncio"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--lanes", "0"], "--lanes must be at least 1"),
        (["--max-batch", "0"], "--max-batch must be at least 1"),
        (["--batch-bytes", "1000"], "--batch-bytes must be between 16384 and 1048576"),
        (["--batch-bytes", "2000000"], "--batch-bytes must be between 16384 and 1048576"),
        (["--commit-interval-ms", "-1"], r"--commit-interval-ms must be between 0 and half"),
        (["--commit-interval-ms", "5001"], r"half --transaction-timeout-ms \(5000\), got 5001"),
        (["--event-loop", "trio"], "--event-loop: expected auto, uvloop or asyncio"),
        (["--log-format", "xml"], "--log-format: expected text or json"),
        (["--redis-mode", "sentinel"], "--redis-mode: expected standalone, cluster or proxy"),
        (["--redis-wait-replicas", "-1"], "--redis-wait-replicas must be 0 or more"),
        (["--reset", "yesterday"], "--reset: expected earliest, latest or epoch ms"),
        (["--output-topic", "derender.chunks"], "must differ"),
    ],
)
def test_bad_values_are_refused_with_the_flag_named(argv: list[str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        _parse(argv)


def test_no_repr_shows_a_secret() -> None:
    """`run`'s settings and the tools' security flags are one `KafkaSecurity`: printed or
    logged whole (a traceback's locals, a debug line), neither shows the password."""
    argv = ["--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "PLAIN"]
    argv += ["--sasl-username", "u", "--sasl-password", "hunter2"]
    s = _parse(argv)
    assert isinstance(s, KafkaSecurity) and s.sasl_password == "hunter2"
    assert "hunter2" not in repr(s) and "***" in repr(s) and "'lanes': 2" in repr(s)
    parser = argparse.ArgumentParser()
    add_security_flags(parser)
    tool = security_from_args(parser.parse_args(argv))
    assert type(tool) is KafkaSecurity and tool.sasl_password == "hunter2"
    assert "hunter2" not in repr(tool)
