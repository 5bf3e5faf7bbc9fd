"""The command line as a user meets it: `--version`, a command's own usage on a bad flag,
and an expected failure as one line and its exit code, never a traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from worker.cli import main
from worker.commands import COMMANDS
from worker.errors import EXIT_UNREACHABLE, EXIT_USAGE, ConfigError

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str, stdin: bytes = b"", env: dict[str, str] | None = None, timeout: float = 60):
    """`derender-worker *args` as a process (the console script's `main`)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("DERENDER_")}
    return subprocess.run(
        [sys.executable, "-m", "worker", *args],
        input=stdin,
        capture_output=True,
        env=environ | (env or {}),
        cwd=ROOT,
        timeout=timeout,
        check=False,
    )


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def one_line(stderr: bytes, prefix: str) -> str:
    lines = stderr.decode().splitlines()
    assert len(lines) == 1, stderr.decode()
    assert lines[0].startswith(prefix), lines[0]
    assert "Traceback" not in lines[0]
    return lines[0]


def test_version_prints_the_distribution_s_version() -> None:
    done = cli("--version")
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode() == f"derender-worker {version('derender-worker')}\n"


@pytest.mark.parametrize("name", [c.name for c in COMMANDS])
def test_a_bad_flag_prints_the_command_s_own_usage(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([name, "--bogus-flag"])
    assert exited.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"usage: derender-worker {name} ")
    assert f"derender-worker {name}: error: unrecognized arguments: --bogus-flag" in err


def test_a_bad_flag_value_is_the_command_s_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["tail", "--requests", "many"])
    assert exited.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("usage: derender-worker tail ")
    assert "argument --requests: invalid int value: 'many'" in err


@pytest.mark.parametrize("name", ["publish", "tail"])
def test_an_unreachable_broker_is_one_line_and_exit_3(name: str, tmp_path: Path) -> None:
    records = tmp_path / "in.jsonl"
    records.write_text('{"request_id": "r", "type": "end"}\n')
    where = f"127.0.0.1:{closed_port()}"
    args = [name, "--bootstrap-servers", where] + ([str(records)] if name == "publish" else [])
    done = cli(*args)
    assert done.returncode == EXIT_UNREACHABLE
    line = one_line(done.stderr, f"derender-worker {name}: ")
    assert where in line and "answers" in line


def test_the_broker_from_the_environment_is_the_one_tried() -> None:
    where = f"127.0.0.1:{closed_port()}"
    done = cli("tail", env={"DERENDER_BOOTSTRAP_SERVERS": where})
    assert done.returncode == EXIT_UNREACHABLE
    assert where in one_line(done.stderr, "derender-worker tail: ")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"request_id": "r"\n', "line 1: not JSON"),
        ('{"request_id": "r", "type": "end"}\n[1, 2]\n', "line 2: expected a JSON object"),
        ('data: {"token_ids": [1]}\n', "without request_id (pass --request-id)"),
    ],
)
def test_a_bad_publish_file_is_one_line_and_exit_2(text: str, message: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(text)
    done = cli("publish", "--bootstrap-servers", f"127.0.0.1:{closed_port()}", str(bad))
    assert done.returncode == EXIT_USAGE
    line = one_line(done.stderr, f"derender-worker publish: {bad}: ")
    assert message in line


@pytest.mark.parametrize("name", ["publish", "replay"])
def test_a_missing_input_file_is_one_line_and_exit_2(name: str, tmp_path: Path) -> None:
    missing = tmp_path / "missing.jsonl"
    done = cli(name, str(missing))
    assert done.returncode == EXIT_USAGE
    line = one_line(done.stderr, f"derender-worker {name}: ")
    assert str(missing) in line and "No such file or directory" in line


def test_bad_context_json_is_one_line(tmp_path: Path) -> None:
    sse = tmp_path / "in.sse"
    sse.write_text('data: {"request_id": "r", "token_ids": [1]}\n')
    done = cli("publish", "--context", "{nope", str(sse))
    assert done.returncode == EXIT_USAGE
    assert "--context: not JSON" in one_line(done.stderr, "derender-worker publish: ")


def test_a_refused_security_setting_is_one_line() -> None:
    done = cli("tail", "--security-protocol", "SASL_SSL", "--sasl-mechanism", "GSSAPI")
    assert done.returncode == EXIT_USAGE
    assert "--sasl-mechanism: unknown mechanism" in one_line(done.stderr, "derender-worker tail: ")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--sasl-password-file", "{missing}"], "--sasl-password-file: cannot read {missing}"),
        (
            ["--security-protocol", "SSL", "--ssl-cafile", "{missing}"],
            "--ssl-cafile: cannot read {missing}",
        ),
    ],
)
def test_an_unreadable_security_file_is_one_line(
    flags: list[str], message: str, tmp_path: Path
) -> None:
    missing = str(tmp_path / "nope")
    for name in ("tail", "publish"):
        done = cli(name, *(f.format(missing=missing) for f in flags), stdin=b"")
        assert done.returncode == EXIT_USAGE
        line = one_line(done.stderr, f"derender-worker {name}: ")
        assert message.format(missing=missing) in line


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["run"], {"DERENDER_LANES": "two"}, "DERENDER_LANES: invalid value 'two'"),
        (["tail"], {"DERENDER_REQUESTS": "x"}, "DERENDER_REQUESTS: invalid value 'x'"),
        (
            ["servers"],
            {"DERENDER_KAFKA": "zookeeper"},
            "DERENDER_KAFKA: invalid value 'zookeeper' (expected apache, tansu)",
        ),
        (["run", "--lanes", "0"], {}, "--lanes must be at least 1"),
        (["serve", "--port", "70000"], {}, "--port: 70000 is not a port"),
    ],
)
def test_a_bad_value_from_a_variable_or_the_table_s_checks_is_one_line(
    args: list[str],
    env: dict[str, str],
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(args) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err == f"derender-worker {args[0]}: {message}\n"


def test_a_bad_variable_does_not_break_another_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """DERENDER_PORT is serve's: `check` (which does not read it) still runs."""
    monkeypatch.setenv("DERENDER_PORT", "eighty")
    assert main(["check", "--metrics-port", str(closed_port()), "--timeout-s", "1"]) == 1
    assert capsys.readouterr().err.startswith("derender-worker check: http://127.0.0.1:")


def test_a_switch_reads_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from worker.cli import build_parser

    assert build_parser({"DERENDER_RAW": "yes"}).parse_args(["tail"]).raw is True
    assert build_parser({"DERENDER_RAW": "0"}).parse_args(["tail"]).raw is False
    assert build_parser({}).parse_args(["tail", "--raw"]).raw is True
    assert build_parser({}).parse_args(["tail"]).raw is False
    assert build_parser({"DERENDER_RAW": "0"}).parse_args(["tail", "--raw"]).raw is True
    bad = build_parser({"DERENDER_RAW": "maybe"})  # (refused only by the command reading it)
    assert bad.parse_args(["demo"]).short is False
    with pytest.raises(ConfigError, match="DERENDER_RAW: invalid value 'maybe'"):
        bad.parse_args(["tail"])


def test_a_bad_registry_is_one_line(tmp_path: Path) -> None:
    registry = tmp_path / "models.toml"
    registry.write_text("[models.m\n")
    done = cli("replay", "--models", str(registry), "--quiet")
    assert done.returncode == EXIT_USAGE
    assert "not valid TOML" in one_line(done.stderr, "derender-worker replay: ")


def test_a_bad_redis_url_is_one_line(tmp_path: Path) -> None:
    """Found as the state store is made, before anything connects."""
    missing = tmp_path / "ca.pem"
    url = f"rediss://worker:hunter2@127.0.0.1:{closed_port()}/0?ssl_ca_certs={missing}"
    done = cli("run", "--metrics-port", "0", env={"DERENDER_REDIS_URL": url})
    assert done.returncode == EXIT_USAGE, done.stderr.decode()
    last = done.stderr.decode().strip().splitlines()[-1]
    assert last == f"derender-worker run: --redis-url: ssl_ca_certs={missing}: no such file"
    assert "Traceback" not in done.stderr.decode() and "hunter2" not in done.stderr.decode()


def test_a_repeated_flag_collects_and_a_bad_one_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from worker.cli import build_parser

    args = build_parser({}).parse_args(["publish", "--header", "a=1", "--header", "b=x=y"])
    assert args.header == [("a", "1"), ("b", "x=y")]
    assert build_parser({}).parse_args(["publish"]).header is None
    with pytest.raises(SystemExit):
        main(["publish", "--header", "novalue"])
    err = capsys.readouterr().err
    assert err.startswith("usage: derender-worker publish ")
    assert "argument --header: expected NAME=VALUE, got 'novalue'" in err
