"""Every shell and Python example in the docs runs, so a reader can paste it.

The convention (docs pages and README.md):

- a fenced ```bash or ```python block is an example: the blocks of a page run in order,
  in one temporary working folder per page, with DERENDER_BOOTSTRAP_SERVERS and
  DERENDER_REDIS_URL pointing at the session's real Kafka and redis-server (the server
  fixtures), and the page's own topics, consumer group and state prefix in
  DERENDER_INPUT_TOPIC / _OUTPUT_TOPIC / _DLQ_TOPIC / _GROUP_ID / _STATE_PREFIX, so pages
  cannot see each other's records; `serve` gets a free port in DERENDER_PORT;
- `<!-- example: background -->` on the line before a ```bash block starts it in the
  background (a long-running `run` or `serve`); it must still be alive after the page's
  later blocks ran, and is then stopped with SIGTERM;
- `<!-- example: parse-only -->` before a ```bash block: it needs infrastructure a test
  cannot give (a secured broker, Kubernetes); each `derender-worker …` command line in it
  is parsed by the CLI's own parser instead of run;
- output is ```text; configuration ```toml / ```yaml / ```json (not run; a model registry
  in ```toml must parse).

A fence in another shell or Python spelling (```sh, ```console, ```py, …) or without a
language fails, so no example is skipped silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import servers
from worker.constants import CONTROL_TOPIC, DLQ_TOPIC, INPUT_TOPIC, OUTPUT_TOPIC

ROOT = Path(__file__).resolve().parents[2]
PAGES = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
RUN_LANGS = {"bash", "python"}
# Spellings that look like examples but would not be run: use bash / python or text.
SUSPECT_LANGS = {"sh", "shell", "console", "zsh", "shell-session", "py", "python3", "pycon"}
MODES = {"background", "parse-only"}
BLOCK_TIMEOUT_S = 180
STOP_TIMEOUT_S = 30

_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
_MARK = re.compile(r"^\s*<!--\s*example:\s*([\w-]+)\s*-->\s*$")


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    mode: str | None  # None: run in the foreground

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


@dataclass
class Mark:
    page: Path
    line: int
    mode: str


def parse_page(page: Path) -> tuple[list[Block], list[Mark]]:
    """A page's fenced blocks, and the example marks that precede none of them."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    stray: list[Mark] = []
    pending: Mark | None = None
    i = 0
    while i < len(lines):
        m = _MARK.match(lines[i])
        if m:
            if pending is not None:
                stray.append(pending)
            pending = Mark(page, i + 1, m.group(1))
            i += 1
            continue
        f = _FENCE.match(lines[i])
        if f:
            indent, fence, lang = f.groups()
            body = []
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith(fence):
                body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j])
                j += 1
            mode = pending.mode if pending is not None else None
            blocks.append(Block(page, i + 1, lang.lower(), "\n".join(body) + "\n", mode))
            pending = None
            i = j + 1
            continue
        if lines[i].strip() and pending is not None:
            stray.append(pending)
            pending = None
        i += 1
    if pending is not None:
        stray.append(pending)
    return blocks, stray


ALL = {page: parse_page(page) for page in PAGES}
BLOCKS = [b for blocks, _ in ALL.values() for b in blocks]


def _id(page: Path) -> str:
    return str(page.relative_to(ROOT))


# -- checks that need no servers --------------------------------------------------------


def test_every_example_block_falls_under_the_runner() -> None:
    problems = []
    for page, (blocks, stray) in ALL.items():
        problems += [
            f"{_id(page)}:{m.line}: example mark {m.mode!r} before no block" for m in stray
        ]
        for b in blocks:
            if not b.lang:
                problems.append(f"{b.where()}: a fence without a language (bash, python, text, …)")
            elif b.lang in SUSPECT_LANGS:
                problems.append(f"{b.where()}: ```{b.lang} is never run: use bash / python or text")
            if b.mode is not None and b.mode not in MODES:
                problems.append(f"{b.where()}: unknown example mark {b.mode!r}")
            elif b.mode is not None and b.lang != "bash":
                problems.append(f"{b.where()}: example mark {b.mode!r} on a ```{b.lang} block")
    assert not problems, "\n".join(problems)


def test_the_docs_have_runnable_examples() -> None:
    """The runner finds what it should (a parser that found nothing would pass the rest)."""
    runnable = [b for b in BLOCKS if b.lang in RUN_LANGS and b.mode != "parse-only"]
    assert any(b.mode == "background" for b in runnable)
    assert {b.page.name for b in runnable} >= {"getting-started.md", "serve.md", "engine.md"}


def command_lines(code: str) -> list[list[str]]:
    """The `derender-worker …` commands of a shell block, as argv lists (continuation
    lines joined; a command ends at a pipe, `;`, `&&`, a redirection or a comment)."""
    commands = []
    for line in code.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words: list[str] = []
        for token in lexer:
            if token and set(token) <= set("();<>|&"):
                if words:
                    commands.append(words)
                words = []
                continue
            if not words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", token):
                continue  # an environment assignment before the command
            words.append(token)
        if words:
            commands.append(words)
    return [c for c in commands if c[0] == "derender-worker"]


PARSE_ONLY = [b for b in BLOCKS if b.mode == "parse-only"]


@pytest.mark.parametrize("block", PARSE_ONLY, ids=[b.where() for b in PARSE_ONLY])
def test_parse_only_commands_parse(block: Block) -> None:
    from worker.cli import build_parser

    commands = command_lines(block.code)
    assert commands, f"{block.where()}: a parse-only block without a derender-worker command"
    for argv in commands:
        try:
            build_parser().parse_args(argv[1:])
        except SystemExit as e:
            pytest.fail(f"{block.where()}: {shlex.join(argv)!r} does not parse (exit {e.code})")


def test_command_lines_reads_shell_lines() -> None:
    code = (
        "DERENDER_X=1 derender-worker run --lanes 2 \\\n    --processes auto | tee log\n"
        "kubectl apply -f x.yaml && derender-worker check --ready  # probe\n"
    )
    assert command_lines(code) == [
        ["derender-worker", "run", "--lanes", "2", "--processes", "auto"],
        ["derender-worker", "check", "--ready"],
    ]


TOML = [b for b in BLOCKS if b.lang == "toml" and re.search(r"^\s*\[models\.", b.code, re.M)]


@pytest.mark.parametrize("block", TOML, ids=[b.where() for b in TOML])
def test_registry_examples_parse(block: Block) -> None:
    from worker.config import parse_registry

    parse_registry(block.code, block.where())


# -- the examples, run --------------------------------------------------------------------

RUN_PAGES = [
    page
    for page, (blocks, _) in ALL.items()
    if any(b.lang in RUN_LANGS and b.mode != "parse-only" for b in blocks)
]


def _tail(path: Path, n: int = 3000) -> str:
    text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
    return text[-n:]


def _command(block: Block, folder: Path, n: int) -> list[str]:
    suffix = "py" if block.lang == "python" else "sh"
    script = folder / f".example-{n}.{suffix}"
    script.write_text(block.code, encoding="utf-8")
    if block.lang == "python":
        return [sys.executable, str(script)]
    return ["bash", "-e", "-o", "pipefail", str(script)]


def _stop(proc: subprocess.Popen[bytes]) -> int:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        return proc.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise


@pytest.mark.integration
@pytest.mark.parametrize("page", RUN_PAGES, ids=[_id(p) for p in RUN_PAGES])
def test_page_examples_run(
    page: Path,
    kafka_bootstrap: str,
    redis_url: str,
    new_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    # The default names too, for examples that spell them (existing ones are kept).
    for names, partitions in (([INPUT_TOPIC, OUTPUT_TOPIC, CONTROL_TOPIC], 4), ([DLQ_TOPIC], 1)):
        servers.run_in_thread(
            lambda n=names, p=partitions: asyncio.run(servers.create_topics(kafka_bootstrap, n, p))
        )
    tag = uuid.uuid4().hex[:8]
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "DERENDER_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "DERENDER_REDIS_URL": redis_url,
        "DERENDER_INPUT_TOPIC": new_topic(partitions=4, prefix="docs-in"),
        "DERENDER_OUTPUT_TOPIC": new_topic(partitions=4, prefix="docs-out"),
        "DERENDER_DLQ_TOPIC": new_topic(partitions=1, prefix="docs-dlq"),
        "DERENDER_GROUP_ID": f"docs-{tag}",
        "DERENDER_STATE_PREFIX": f"docs{tag}:",
        "DERENDER_METRICS_PORT": "0",
        "DERENDER_PORT": str(servers.free_port()),
        "PYTHONUNBUFFERED": "1",
    }
    blocks = [b for b in ALL[page][0] if b.lang in RUN_LANGS and b.mode != "parse-only"]
    background: list[tuple[Block, subprocess.Popen[bytes], Path]] = []
    try:
        for n, block in enumerate(blocks):
            cmd = _command(block, tmp_path, n)
            log = tmp_path / f".example-{n}.log"
            if block.mode == "background":
                with log.open("wb") as out:
                    proc = subprocess.Popen(
                        cmd,
                        cwd=tmp_path,
                        env=env,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                background.append((block, proc, log))
                continue
            try:
                done = subprocess.run(
                    cmd,
                    cwd=tmp_path,
                    env=env,
                    capture_output=True,
                    timeout=BLOCK_TIMEOUT_S,
                )
            except subprocess.TimeoutExpired:
                pytest.fail(f"{block.where()}: still running after {BLOCK_TIMEOUT_S} s")
            assert done.returncode == 0, (
                f"{block.where()} exited {done.returncode}:\n{block.code}\n"
                f"--- stdout\n{done.stdout.decode(errors='replace')[-3000:]}\n"
                f"--- stderr\n{done.stderr.decode(errors='replace')[-3000:]}"
            )
        for block, proc, log in background:
            assert proc.poll() is None, (
                f"{block.where()}: the background example exited {proc.returncode} before "
                f"the page's later examples finished:\n{_tail(log)}"
            )
    finally:
        codes = [(block, _stop(proc), log) for block, proc, log in background]
    for block, code, log in codes:
        # (bash forwards the signal's 143 when it did not exec the command itself)
        assert code in (0, 143, -signal.SIGTERM), (
            f"{block.where()}: exited {code} on SIGTERM:\n{_tail(log)}"
        )
