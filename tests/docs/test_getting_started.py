"""docs/getting-started.md says what `derender-worker demo` shows: the numbers of requests
it states (with and without `--short`) and the transcript it quotes are the demo's own."""

from __future__ import annotations

import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
README = (ROOT / "README.md").read_text(encoding="utf-8")
DEMO = [str(Path(sys.executable).parent / "derender-worker"), "demo", "--fast"]

BROKER = r"^  broker  (kafka \d+\.\d+\.\d+|tansu) +127\.0\.0\.1:\d+$"

pytestmark = pytest.mark.integration


@cache
def demo(*flags: str) -> str:
    done = subprocess.run([*DEMO, *flags], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def streamed(output: str) -> int:
    m = re.search(r"^streaming (\d+) interleaved requests", output, re.M)
    assert m, output[:2000]
    return int(m.group(1))


def stated(text: str, pattern: str) -> int:
    m = re.search(pattern, text)
    assert m, f"no match for {pattern!r}"
    return int(m.group(1))


def test_the_number_of_requests_is_the_demos() -> None:
    assert stated(PAGE, r"\*\*(\d+) interleaved\s+requests\*\*") == streamed(demo())
    assert stated(README, r"(\d+) interleaved requests") == streamed(demo())


def test_the_short_run_is_the_demos() -> None:
    assert stated(PAGE, r"--short`\s+streams\s+\*\*(\d+) requests\*\*") == streamed(demo("--short"))


def test_the_quoted_output_is_the_demos() -> None:
    """Every line of the page's demo transcript is in the demo's output (an elided line
    `…` aside; the broker and redis lines with their addresses and broker name)."""
    section = PAGE[PAGE.index("## See it work") : PAGE.index("## Run the tests")]
    quoted = re.findall(r"```text\n(derender-worker demo\n.*?)```", section, re.S)
    assert quoted, "the page quotes no demo output"
    output = demo()
    for line in quoted[0].splitlines():
        if line == "…":
            continue
        if line.startswith("  broker  "):
            assert re.search(BROKER, line)
            assert re.search(BROKER, output, re.M)
        elif line.startswith("  redis   "):
            assert re.search(r"^  redis   redis-server redis://127\.0\.0\.1:\d+/0$", output, re.M)
        else:
            assert line in output.splitlines(), f"{line!r} is not in the demo's output"
