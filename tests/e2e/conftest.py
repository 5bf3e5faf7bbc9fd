"""The end-to-end session: a real vLLM engine (tests/e2e/engine.py), Apache Kafka and Redis
(the fixtures of tests/support/server_fixtures.py), one `derender-worker run` with a model
registry entry for the engine's model, and the loop that plays the engine side
(tests/e2e/loop.py).

These tests run only when the marker expression selects `e2e` (`make e2e` runs
`pytest -m e2e tests/e2e`); otherwise their modules are not even collected, so `make test`
needs no engine. The engine starts once per session on a free port (~40 s) and stops at its
end, also on failure; `DERENDER_E2E_ENGINE_URL=http://127.0.0.1:PORT` uses one already
running instead (while developing: `python -m tests.e2e.engine engine.log` starts one).
"""

from __future__ import annotations

import asyncio
import os
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.e2e.engine import Engine
    from tests.e2e.loop import Loop
    from tests.integration.harness import WorkerProcess

ENV_ENGINE_URL = "DERENDER_E2E_ENGINE_URL"
# Modules that need the engine (and everything else of the session).
E2E_MODULES = ("test_engine_oracle.py",)
# How long the worker may take to join its group and take its partitions.
WORKER_READY_TIMEOUT_S = 60.0

TIMINGS: dict[str, float] = {}
REPLY_PARTITIONS = (1, 3)


def e2e_selected(config: pytest.Config) -> bool:
    expr = config.getoption("markexpr", "") or ""
    return re.search(r"(?<!not )\be2e\b", expr) is not None


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path.name in E2E_MODULES and not e2e_selected(config):
        return True
    return None


def pytest_sessionstart(session: pytest.Session) -> None:
    TIMINGS["session_start"] = time.monotonic()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if not e2e_selected(config) or "session_start" not in TIMINGS:
        return
    stats = terminalreporter.stats
    counts = {k: len(stats.get(k, [])) for k in ("passed", "failed", "error", "skipped")}
    terminalreporter.write_sep("=", "e2e: the loop against vLLM's coupled server")
    terminalreporter.write_line(", ".join(f"{v} {k}" for k, v in counts.items() if v) or "none")
    from tests.e2e.differences import DIFFERENCES, TALLY

    if TALLY["comparisons"]:
        terminalreporter.write_line(
            f"{TALLY['comparisons']} answers compared with the coupled server: "
            f"{TALLY['identical']} identical, "
            f"{TALLY['with documented differences']} with documented differences"
        )
        for d in DIFFERENCES:
            if TALLY[d.id]:
                terminalreporter.write_line(f"  {d.id}: {TALLY[d.id]}")
    if "engine_start" in TIMINGS:
        terminalreporter.write_line(
            f"engine start to /health: {TIMINGS['engine_start']:.0f}s, "
            f"first request: {TIMINGS['engine_warm_up']:.0f}s"
        )
    terminalreporter.write_line(f"session: {time.monotonic() - TIMINGS['session_start']:.0f}s")
    for key in ("engine_log", "worker_log"):
        if key in LOGS:
            terminalreporter.write_line(f"{key.replace('_', ' ')}: {LOGS[key]}")


LOGS: dict[str, str] = {}


@pytest.fixture(scope="session")
def e2e_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("e2e")


@pytest.fixture(scope="session")
def engine(e2e_dir: Path) -> Iterator[Engine | str]:
    """The engine: started here (an `Engine`), or the URL of one already running."""
    from tests.e2e.engine import EngineError, start_engine

    if url := os.environ.get(ENV_ENGINE_URL):
        yield url.rstrip("/")
        return
    log = e2e_dir / "engine.log"
    LOGS["engine_log"] = str(log)
    try:
        running = start_engine(log)
    except EngineError as e:
        pytest.fail(str(e), pytrace=False)
    TIMINGS["engine_start"] = running.started_s
    TIMINGS["engine_warm_up"] = running.warm_up_s
    with running:
        yield running


@pytest.fixture(scope="session")
def engine_url(engine: Engine | str) -> str:
    return engine if isinstance(engine, str) else engine.url


@pytest.fixture(scope="session")
def e2e_topics(kafka_bootstrap: str) -> dict[str, str]:
    from tests.support import servers

    tag = uuid.uuid4().hex[:8]
    names = {"input": f"e2e-in-{tag}", "output": f"e2e-out-{tag}", "dlq": f"e2e-dlq-{tag}"}
    for key, partitions in (("input", 4), ("output", 4), ("dlq", 1)):
        servers.run_in_thread(
            lambda k=key, p=partitions: asyncio.run(
                servers.create_topics(kafka_bootstrap, [names[k]], p)
            )
        )
    return names


@pytest.fixture(scope="session")
def e2e_worker(
    kafka_bootstrap: str, redis_url: str, e2e_topics: dict[str, str], e2e_dir: Path
) -> Iterator[WorkerProcess]:
    """One `derender-worker run` on the session's topics, serving the engine's model."""
    from tests.e2e.engine import write_registry
    from tests.integration.harness import WorkerProcess

    log = e2e_dir / "worker.log"
    LOGS["worker_log"] = str(log)
    worker = WorkerProcess(
        kafka_bootstrap,
        redis_url,
        e2e_topics["input"],
        e2e_topics["output"],
        e2e_topics["dlq"],
        f"e2e-{uuid.uuid4().hex[:8]}",
        f"e2e{uuid.uuid4().hex[:8]}:",
        extra=["--models", str(write_registry(e2e_dir / "models.toml"))],
        log_path=log,
    ).start()
    try:
        yield worker
    finally:
        if worker.alive:
            worker.stop()


@pytest.fixture(scope="session")
def loop(
    engine_url: str, kafka_bootstrap: str, e2e_topics: dict[str, str], e2e_worker: WorkerProcess
) -> Iterator[Loop]:
    """Our side: render → generate → records on the input topic → the worker → its
    outputs read back from its reply partitions (tests/e2e/loop.py), on its own event loop
    thread."""
    from tests.e2e.loop import Loop

    # Replies on two of the output topic's four partitions, as one gateway replica of two.
    with Loop(
        engine_url,
        kafka_bootstrap,
        e2e_topics["input"],
        e2e_topics["output"],
        reply_partitions=REPLY_PARTITIONS,
    ) as ours:
        ours.worker_check = lambda: (
            None if e2e_worker.alive else f"the worker exited; log {e2e_worker.log_path}"
        )
        yield ours
