"""Secret flags without a server: their `--<flag>-file` form, the values the logs mask,
and the masking itself."""

from __future__ import annotations

import argparse
import io
import logging
from pathlib import Path

import pytest

from worker.flags import SettingsError, env_name, secret_values
from worker.observe.logs import Redacting
from worker.settings import FLAGS, add_flags, from_args, to_env


def _settings(argv: list[str], environ: dict[str, str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_flags(parser, environ or {})
    return parser.parse_args(argv)


def test_a_secret_from_a_file_drops_one_trailing_newline(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("p@ss word\n")
    s = from_args(
        _settings(
            ["--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "PLAIN",
             "--sasl-username", "u", "--sasl-password-file", str(tmp_path / "pw")]
        )
    )  # fmt: skip
    assert s.sasl_password == "p@ss word"
    assert s.redacted()["sasl_password"] == "***"
    # A supervisor hands the value on, not the file (the child would see both).
    env = to_env(s)
    assert env[env_name("sasl-password")] == "p@ss word"
    assert env[env_name("sasl-password-file")] is None


def test_the_file_form_also_comes_from_the_environment(tmp_path: Path) -> None:
    (tmp_path / "url").write_text("redis://:hunter22@r:6379/0")
    s = from_args(_settings([], {env_name("redis-url-file"): str(tmp_path / "url")}))
    assert s.redis_url == "redis://:hunter22@r:6379/0"


def test_a_secret_given_twice_or_unreadable_is_refused(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("x")
    twice = _settings(
        ["--sasl-password-file", str(tmp_path / "pw")], {"DERENDER_SASL_PASSWORD": "y"}
    )
    with pytest.raises(SettingsError) as both:
        from_args(twice)
    assert str(both.value) == (
        "--sasl-password and --sasl-password-file are both set (DERENDER_SASL_PASSWORD "
        "counts as --sasl-password): keep one"
    )
    with pytest.raises(SettingsError) as missing:
        from_args(_settings(["--sasl-password-file", str(tmp_path / "nope")]))
    assert str(missing.value) == (
        f"--sasl-password-file: cannot read {tmp_path / 'nope'}: No such file or directory"
    )


def test_every_secret_flag_has_a_file_form() -> None:
    parser = argparse.ArgumentParser()
    add_flags(parser, {})
    options = {a for action in parser._actions for a in action.option_strings}
    secret = [f for f in FLAGS if f.secret]
    assert {"sasl-password", "redis-url"} <= {f.name for f in secret}
    assert all(f"--{f.name}-file" in options for f in secret)


def test_secret_values_include_the_passwords_inside_urls() -> None:
    s = from_args(
        _settings(
            ["--redis-url", "redis://u:s%40cret1@h1:1,redis://u:s%40cret1@h2:2?ssl_password=kp99",
             "--security-protocol", "SASL_SSL", "--sasl-mechanism", "PLAIN",
             "--sasl-username", "u", "--sasl-password", "sasl-pw-1"]
        )
    )  # fmt: skip
    values = set(secret_values(FLAGS, s))
    assert {"s%40cret1", "s@cret1", "kp99", "sasl-pw-1"} <= values


def test_redacting_masks_secrets_in_messages_and_exceptions() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(Redacting(logging.Formatter("%(message)s"), ["sasl-pw-1", "pw"]))
    log = logging.getLogger("test.redacting")
    log.addHandler(handler)
    try:
        try:
            raise ValueError("login sasl-pw-1 refused")
        except ValueError:
            log.error("connecting with %s", "sasl-pw-1", exc_info=True)
        log.error("a pw of two letters")
    finally:
        log.removeHandler(handler)
    text = stream.getvalue()
    assert "sasl-pw-1" not in text
    assert "connecting with ***" in text and "login *** refused" in text
    assert "a pw of two letters" in text  # (too short to mask: words stay words)
