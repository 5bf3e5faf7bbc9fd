"""vLLM 0.33.0's GPU-less render server as a local peer: start, wait, stop; and its client.

Only loopback: every server listens on 127.0.0.1, every URL here is http://127.0.0.1:<port>.
The venv and model folder come from `tests/peer/setup_peer.sh` (under
`${DERENDER_PEER_HOME:-~/.cache/derender-peer}`). Imported only when the peer tests run
(it needs httpx, the `peer` extra).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.peer.drive import (
    GLM_MODEL,
    GPTOSS_MODEL,
    LLAMA_MODEL,
    M3_MODEL,
    MINIMAX_MODEL,
    MODEL,
    QWEN_MODEL,
    RECORDED,
)

HOST = "127.0.0.1"
PEER_HOME = Path(os.environ.get("DERENDER_PEER_HOME", Path.home() / ".cache" / "derender-peer"))
VENV = PEER_HOME / "venv"
MODEL_DIR = PEER_HOME / "models" / "dsv4"
LLAMA_DIR = PEER_HOME / "models" / "llama32"
GLM_DIR = PEER_HOME / "models" / "glm47"
MINIMAX_DIR = PEER_HOME / "models" / "minimax"
QWEN_DIR = PEER_HOME / "models" / "qwen3"
GPTOSS_DIR = PEER_HOME / "models" / "gptoss"
M3_DIR = PEER_HOME / "models" / "minimax_m3"
# The recorded families' folders (tests/peer/recorded/recorded_models.py; minimax_m3 is M3_DIR).
RECORDED_FOLDERS = (
    "nemotron_v3",
    "granite_thinking_parser",
    "ling3",
    "poolside_v1",
    "gemma4",
    "functiongemma",
    "kimi_k3",
    "llama4",
    # The long tail (tests/peer/recorded/recorded_longtail.py).
    "phi4_mini_json",
    "internlm",
    "jamba",
    "gigachat3",
    "apertus",
    "lfm2",
    "plamo3",
    "dots",
    "xlam",
    # MiniCPM and the response-template parsers (tests/peer/recorded/recorded_minicpm.py).
    "minicpmv",
    "minicpm5",
    "template",
    "granite",
    "olmo3",
    "step3",
    "ernie45",
    "hunyuan_a13b",
    "hy",
    "hy_suffix",
    "inkling",
    "k2_horizon",
    "muse",
)
RECORDED_DIRS = tuple(PEER_HOME / "models" / name for name in RECORDED_FOLDERS)
MODEL_DIRS = (
    MODEL_DIR,
    LLAMA_DIR,
    GLM_DIR,
    MINIMAX_DIR,
    QWEN_DIR,
    GPTOSS_DIR,
    M3_DIR,
    *RECORDED_DIRS,
)

DSV4_PARSERS = (
    "--reasoning-parser",
    "deepseek_v4",
    "--tool-call-parser",
    "deepseek_v4",
    "--enable-auto-tool-choice",
)
LLAMA_PARSERS = ("--tool-call-parser", "llama3_json", "--enable-auto-tool-choice")
AUTO_TOOLS = ("--enable-auto-tool-choice",)
GLM_PARSERS = ("--reasoning-parser", "glm45", "--tool-call-parser", "glm45", *AUTO_TOOLS)
MINIMAX_PARSERS = ("--tool-call-parser", "minimax_m2", *AUTO_TOOLS)
QWEN_PARSERS = ("--reasoning-parser", "qwen3", *AUTO_TOOLS)
# gpt-oss (Harmony): vLLM selects HarmonyParser by model_type gpt_oss and always sets the
# openai_gptoss reasoning parser itself (flag or not).
GPTOSS_PARSERS = (
    "--reasoning-parser",
    "openai_gptoss",
    "--tool-call-parser",
    "openai",
    *AUTO_TOOLS,
)
# The Harmony system prompt carries the current date: pinned. oss-harmony embeds its
# vocabulary: no TIKTOKEN_ENCODINGS_BASE needed (an inherited one must point at a valid
# o200k_base.tiktoken).
GPTOSS_ENV = {"VLLM_SYSTEM_START_DATE": "2025-06-28"}
M3_PARSERS = ("--reasoning-parser", "minimax_m3", "--tool-call-parser", "minimax_m3", *AUTO_TOOLS)
SERVER_ENV = {
    # vLLM cannot infer a device on a GPU-less machine; the render server needs none.
    "VLLM_TARGET_DEVICE": "cpu",
    "HF_HUB_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}


@dataclass(frozen=True)
class ServerSpec:
    """One render server configuration: a model folder, its served name, parser flags and
    environment."""

    name: str
    model_dir: Path
    served_name: str
    parser_args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)


LAX = {"VLLM_ENFORCE_STRICT_TOOL_CALLING": "0"}
# The servers of test_parity.py.
PARITY_SPECS = {
    # DeepSeek V4: parsers on, off, and on with strict tool calling off.
    "on": ServerSpec("on", MODEL_DIR, MODEL, DSV4_PARSERS),
    "off": ServerSpec("off", MODEL_DIR, MODEL),
    "lax": ServerSpec("lax", MODEL_DIR, MODEL, DSV4_PARSERS, LAX),
    # Llama 3.2: no parser, the llama3_json tool parser (no reasoning parser), and that
    # parser with strict tool calling off.
    "llama-off": ServerSpec("llama-off", LLAMA_DIR, LLAMA_MODEL),
    "llama-tools": ServerSpec("llama-tools", LLAMA_DIR, LLAMA_MODEL, LLAMA_PARSERS),
    "llama-lax": ServerSpec("llama-lax", LLAMA_DIR, LLAMA_MODEL, LLAMA_PARSERS, LAX),
    # GLM-4.7: the glm45 parsers, strict tool calling on and off.
    "glm-on": ServerSpec("glm-on", GLM_DIR, GLM_MODEL, GLM_PARSERS),
    "glm-lax": ServerSpec("glm-lax", GLM_DIR, GLM_MODEL, GLM_PARSERS, LAX),
    # MiniMax M2: the minimax_m2 tool parser with the minimax_m2 reasoning parser, and with
    # minimax_m2_append_think (no separation: the trace stays in the content).
    "minimax-on": ServerSpec(
        "minimax-on",
        MINIMAX_DIR,
        MINIMAX_MODEL,
        ("--reasoning-parser", "minimax_m2", *MINIMAX_PARSERS),
    ),
    "minimax-append": ServerSpec(
        "minimax-append",
        MINIMAX_DIR,
        MINIMAX_MODEL,
        ("--reasoning-parser", "minimax_m2_append_think", *MINIMAX_PARSERS),
    ),
    # Qwen3: the qwen3 reasoning parser with the hermes (JSON in <tool_call>) and the
    # qwen3_coder (XML in <tool_call>) tool parsers.
    "qwen-hermes": ServerSpec(
        "qwen-hermes", QWEN_DIR, QWEN_MODEL, (*QWEN_PARSERS, "--tool-call-parser", "hermes")
    ),
    "qwen-coder": ServerSpec(
        "qwen-coder", QWEN_DIR, QWEN_MODEL, (*QWEN_PARSERS, "--tool-call-parser", "qwen3_coder")
    ),
    # gpt-oss: the `openai` tool parser with openai_gptoss, and openai_gptoss alone (calls
    # dropped).
    "gptoss-on": ServerSpec("gptoss-on", GPTOSS_DIR, GPTOSS_MODEL, GPTOSS_PARSERS, GPTOSS_ENV),
    "gptoss-reasoning": ServerSpec("gptoss-reasoning", GPTOSS_DIR, GPTOSS_MODEL, (), GPTOSS_ENV),
    # MiniMax M3: the minimax_m3 reasoning and tool parsers (its real chat template).
    "minimax_m3-on": ServerSpec("minimax_m3-on", M3_DIR, M3_MODEL, M3_PARSERS),
}


def _recorded(family: str, folder: str, reasoning: str | None, tools: str) -> ServerSpec:
    """A recorded family's server, `<family>-recorded`: the folder and parser flags its
    answers were recorded with, served (as then) under the folder's name."""
    flags: tuple[str, ...] = ("--reasoning-parser", reasoning) if reasoning else ()
    flags += ("--tool-call-parser", tools, *AUTO_TOOLS)
    name = f"{family}-{RECORDED}"
    return ServerSpec(name, PEER_HOME / "models" / folder, folder, flags)


# The recorded families (tests/core/parsers/vllm_answers/, run live by test_recorded.py).
# vLLM 0.33.0 has no nemotron_v3 or granite tool parser: those two were served with
# qwen3_coder. The Llama 4 families are one folder under two tool parsers.
RECORDED_SPECS = {
    s.name: s
    for s in (
        _recorded("nemotron_v3", "nemotron_v3", "nemotron_v3", "qwen3_coder"),
        _recorded(
            "granite_thinking_parser",
            "granite_thinking_parser",
            "granite_thinking_parser",
            "qwen3_coder",
        ),
        _recorded("ling3", "ling3", "ling3", "ling3"),
        _recorded("poolside_v1", "poolside_v1", "poolside_v1", "poolside_v1"),
        _recorded("gemma4", "gemma4", "gemma4", "gemma4"),
        _recorded("functiongemma", "functiongemma", None, "functiongemma"),
        _recorded("minimax_m3", "minimax_m3", "minimax_m3", "minimax_m3"),
        _recorded("kimi_k3", "kimi_k3", "kimi_k3", "kimi_k3"),
        _recorded("llama4_pythonic", "llama4", None, "llama4_pythonic"),
        _recorded("llama4_json", "llama4", None, "llama4_json"),
        # The long tail: tool parsers only, one folder each.
        _recorded("phi4_mini_json", "phi4_mini_json", None, "phi4_mini_json"),
        _recorded("internlm", "internlm", None, "internlm"),
        _recorded("jamba", "jamba", None, "jamba"),
        _recorded("gigachat3", "gigachat3", None, "gigachat3"),
        _recorded("apertus", "apertus", None, "apertus"),
        _recorded("lfm2", "lfm2", None, "lfm2"),
        _recorded("plamo3", "plamo3", "plamo3", "plamo3"),
        _recorded("dots", "dots", None, "dots"),
        _recorded("xlam", "xlam", None, "xlam"),
        # MiniCPM-V (served with qwen3_coder: vLLM has no minicpmv tool parser), MiniCPM5,
        # and one folder with a response_template under the hf and the beam parsers.
        _recorded("minicpmv", "minicpmv", "minicpmv", "qwen3_coder"),
        _recorded("minicpm5", "minicpm5", None, "minicpm5"),
        _recorded("hf", "template", "hf", "hf"),
        _recorded("beam", "template", "beam", "beam"),
        # Cohere Command A: one folder, the cmd3 and the cmd4 parsers (vLLM runs both
        # through the cohere_melody library, which the peer venv needs).
        _recorded("cohere_command3", "cohere", "cohere_command3", "cohere_command3"),
        _recorded("cohere_command4", "cohere", "cohere_command4", "cohere_command4"),
        # Granite 3.x: one folder, the granite parsers and granite-20b-functioncalling's.
        _recorded("granite", "granite", "granite", "granite"),
        _recorded("granite_20b_fc", "granite", None, "granite-20b-fc"),
        _recorded("olmo3", "olmo3", "olmo3", "olmo3"),
        _recorded("step3", "step3", "step3", "step3"),
        _recorded("ernie45", "ernie45", "ernie45", "ernie45"),
        _recorded("hunyuan_a13b", "hunyuan_a13b", "hunyuan_a13b", "hunyuan_a13b"),
        # HY3 / HY4: one folder, each generation's parsers.
        _recorded("hy_v3", "hy", "hy_v3", "hy_v3"),
        _recorded("hy_v4", "hy", "hy_v4", "hy_v4"),
        _recorded("hy_v3_suffix", "hy_suffix", "hy_v3", "hy_v3"),
        _recorded("hy_v4_suffix", "hy_suffix", "hy_v4", "hy_v4"),
        _recorded("inkling", "inkling", "inkling", "inkling"),
        _recorded("k2_horizon", "k2_horizon", "k2_horizon", "k2_horizon"),
        # Muse: one folder, Spark's parsers and Glimmer's (musespark1x is muse's class).
        _recorded("muse", "muse", "muse", "muse"),
        _recorded("muse_glimmer", "muse", "muse_glimmer", "muse_glimmer"),
    )
}
# Every server by name.
SPECS = {**PARITY_SPECS, **RECORDED_SPECS}


def _die_with_parent() -> None:
    """Linux: the server gets SIGTERM if the test process dies without stopping it."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class Server:
    """One `vllm launch render` process (its own session, so it stops with its children)."""

    def __init__(self, spec: ServerSpec, log_dir: Path) -> None:
        self.spec = spec
        self.port = free_port()
        self.log_path = log_dir / f"vllm-{spec.name}.log"
        vllm = VENV / "bin" / "vllm"
        cmd = [str(vllm), "launch", "render", str(spec.model_dir), "--host", HOST]
        cmd += ["--port", str(self.port), "--served-model-name", spec.served_name]
        cmd += spec.parser_args
        env = {**os.environ, **SERVER_ENV, **spec.env}
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        self.url = f"http://{HOST}:{self.port}"

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def wait_ready(self, deadline: float) -> None:
        with httpx.Client(timeout=2.0) as c:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"vLLM server {self.spec.name!r} exited with {self.proc.returncode}; "
                        f"log {self.log_path}:\n{self.log_tail()}"
                    )
                try:
                    if c.get(f"{self.url}/health").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.5)
        raise TimeoutError(
            f"vLLM server {self.spec.name!r} not ready on port {self.port}; "
            f"log {self.log_path}:\n{self.log_tail()}"
        )

    def stop(self, timeout: float = 20.0) -> None:
        if self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout)


def start_servers(names: list[str], log_dir: Path, timeout: float = 600.0) -> dict[str, Server]:
    """Start the servers concurrently and wait for all; on any failure stop them all."""
    servers: dict[str, Server] = {}
    try:
        for name in names:
            servers[name] = Server(SPECS[name], log_dir)
        deadline = time.monotonic() + timeout
        for s in servers.values():
            s.wait_ready(deadline)
    except BaseException:
        for s in servers.values():
            s.stop()
        raise
    return servers


class Batches:
    """Servers started a few at a time, in the order the tests need them: asked for one that
    is not running, it stops those that are and starts that one with the next `size - 1`
    of `order` not started yet (concurrently, as start_servers does). The tests of one
    server come together, so each starts once and at most `size` run at any time (~1.3 GB
    each), while a batch still shares the start-up cost (~25 s for one server, ~47 s for
    three on two cores)."""

    def __init__(self, order: list[str], log_dir: Path, size: int) -> None:
        self.order = order
        self.log_dir = log_dir
        self.size = size
        self.started: set[str] = set()
        self.servers: dict[str, Server] = {}
        self.peers: dict[str, Peer] = {}

    def peer(self, name: str) -> Peer:
        if name not in self.peers:
            self.stop()
            at = self.order.index(name) + 1 if name in self.order else len(self.order)
            later = [n for n in self.order[at:] if n not in self.started and n != name]
            batch = [name, *later[: self.size - 1]]
            self.servers = start_servers(batch, self.log_dir)
            self.started.update(batch)
            self.peers = {n: Peer(s) for n, s in self.servers.items()}
        return self.peers[name]

    def stop(self) -> None:
        for p in self.peers.values():
            p.close()
        for s in self.servers.values():
            s.stop()
        self.peers, self.servers = {}, {}


class Running:
    """A server someone else started (DERENDER_PEER_SERVERS): used, never stopped."""

    def __init__(self, name: str, port: int) -> None:
        self.spec = SPECS[name]
        self.port = port
        self.url = f"http://{HOST}:{port}"

    def log_tail(self, lines: int = 40) -> str:
        return "(server started outside the test session: no log here)"

    def stop(self) -> None:
        pass


def running_servers(spec: str, needed: list[str] | None = None) -> dict[str, Running]:
    """`on=18100,off=18101,lax=18102,llama-off=18103,…`: servers already listening on
    127.0.0.1 (every name of `needed`, default every name of PARITY_SPECS)."""
    out = {}
    for item in spec.split(","):
        name, _, port = item.strip().partition("=")
        out[name] = Running(name, int(port))
    missing = set(PARITY_SPECS if needed is None else needed) - set(out)
    if missing:
        raise ValueError(f"DERENDER_PEER_SERVERS lacks {sorted(missing)}")
    with httpx.Client(timeout=5.0) as c:
        for s in out.values():
            c.get(f"{s.url}/health").raise_for_status()
    return out


@dataclass
class Reply:
    status: int
    body: Any


class Peer:
    """The derender protocol of one server: render, whole responses, streaming calls."""

    def __init__(self, server: Server | Running) -> None:
        self.server = server
        self.http = httpx.Client(base_url=server.url, timeout=120.0)
        self.calls = 0

    def close(self) -> None:
        self.http.close()

    def post(self, path: str, body: dict[str, Any]) -> Reply:
        self.calls += 1
        try:
            r = self.http.post(path, json=body)
        except httpx.TransportError as exc:
            raise RuntimeError(
                f"vLLM server {self.server.spec.name!r} did not answer {path}: {exc!r}\n"
                f"{self.server.log_tail()}"
            ) from None
        try:
            data = r.json()
        except ValueError:
            data = r.text
        return Reply(r.status_code, data)

    def render_chat(self, chat_request: dict[str, Any]) -> list[int]:
        r = self.post("/v1/chat/completions/render", chat_request)
        if r.status != 200:
            raise RuntimeError(f"render failed: HTTP {r.status}: {r.body}")
        return list(r.body["token_ids"])

    def render_completion(self, completion_request: dict[str, Any]) -> list[list[int]]:
        r = self.post("/v1/completions/render", completion_request)
        if r.status != 200:
            raise RuntimeError(f"render failed: HTTP {r.status}: {r.body}")
        return [list(g["token_ids"]) for g in r.body]
