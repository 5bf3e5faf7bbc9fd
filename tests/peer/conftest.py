"""The parity session: three vLLM 0.33.0 render servers, our registries, the tally.

The parity tests run only when the marker expression selects `peer` (`make parity` runs
`pytest -m peer tests/peer`); otherwise their modules are not even collected, so
`make test` needs neither vLLM nor httpx. The servers start concurrently on free
127.0.0.1 ports at the first parity test and stop at the session's end, also on
failure. At the end the tally is written to `.parity/` and printed in one line.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.peer.parity import Prompts, Tally
from worker.config import load_registry
from worker.core.model import Registry

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / ".parity"
# Modules that need the servers (and httpx).
PEER_MODULES = ("test_parity.py",)

TALLY = Tally()


def peer_selected(config: pytest.Config) -> bool:
    expr = config.getoption("markexpr", "") or ""
    return re.search(r"(?<!not )\bpeer\b", expr) is not None


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path.name in PEER_MODULES and not peer_selected(config):
        return True
    return None


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if TALLY.outcomes:
        TALLY.write(OUT)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if TALLY.outcomes:
        terminalreporter.write_sep("=", "vLLM parity")
        terminalreporter.write_line(TALLY.line())
        terminalreporter.write_line(f"details: {OUT / 'summary.json'}, {OUT / 'failures.txt'}")
        if TALLY.log_dir:
            terminalreporter.write_line(f"vLLM server logs: {TALLY.log_dir}")


@pytest.fixture(scope="session")
def tally() -> Tally:
    return TALLY


@pytest.fixture(scope="session")
def prompts() -> Prompts:
    return Prompts()


@pytest.fixture(scope="session")
def peers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """`on`: parsers; `off`: none; `lax`: parsers with VLLM_ENFORCE_STRICT_TOOL_CALLING=0.

    DERENDER_PEER_SERVERS=on=PORT,off=PORT,lax=PORT uses servers already running on
    127.0.0.1 instead (while developing: they start once)."""
    from tests.peer.vllm_server import (
        MODEL_DIR,
        VENV,
        Peer,
        Running,
        Server,
        running_servers,
        start_servers,
    )

    servers: dict[str, Server] | dict[str, Running]
    if os.environ.get("DERENDER_PEER_SERVERS"):
        servers = running_servers(os.environ["DERENDER_PEER_SERVERS"])
    elif not (VENV / "bin" / "vllm").exists() or not (MODEL_DIR / "config.json").exists():
        pytest.fail(
            f"no vLLM peer at {VENV} / {MODEL_DIR}: run `bash tests/peer/setup_peer.sh` "
            "(or `make parity`)",
            pytrace=False,
        )
    else:
        logs = tmp_path_factory.mktemp("vllm-logs")
        TALLY.log_dir = str(logs)
        servers = start_servers(["on", "off", "lax"], logs)
    clients = {name: Peer(s) for name, s in servers.items()}
    try:
        yield clients
    finally:
        for c in clients.values():
            c.close()
        for s in servers.values():
            s.stop()


@pytest.fixture(scope="session")
def registries() -> dict[str, Registry]:
    """Our side, with the same DeepSeek V4 tokenizer and parsers as each server."""
    built_in = load_registry()  # DeepSeek V4 with both parsers, eos (1,), strict tool calling
    name = built_in.default
    on = built_in.models[name]
    assert on.eos_token_ids == (1,), on.eos_token_ids
    lax = dataclasses.replace(on, strict_tool_calling=False)
    off = dataclasses.replace(on, reasoning_parser=None, tool_parser=None)
    return {
        "on": built_in,
        "lax": Registry({name: lax}, default=name),
        "off": Registry({name: off}, default=name),
    }
