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
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.e2e.engine import Engine
    from tests.e2e.gateways import Gateway, TopicWatch
    from tests.e2e.loop import Loop
    from tests.integration.harness import WorkerProcess

ENV_ENGINE_URL = "DERENDER_E2E_ENGINE_URL"
# Modules that need the engine (and everything else of the session).
E2E_MODULES = (
    "test_engine_oracle.py",
    "test_gateway_oracle.py",
    "test_formats_oracle.py",
    "test_gateway_faults.py",
)
# Tests that end something the session shares (the engine): they run last.
RUN_LAST = ("test_an_engine_killed_mid_stream_fails_the_client_and_aborts_the_request",)
# The fault cases run after the oracle cases (they stop and kill things).
FAULTS_MODULE = "test_gateway_faults.py"
# How long the worker may take to join its group and take its partitions.
WORKER_READY_TIMEOUT_S = 60.0

TIMINGS: dict[str, float] = {}
REPLY_PARTITIONS = (1, 3)
# The two gateway replicas' reply partitions (of the output topic's four).
GATEWAY_PARTITIONS = {"a": (0, 1), "b": (2, 3)}
# Test families for the summary: (name, outcome) → count, and seconds.
FAMILIES: Counter[tuple[str, str]] = Counter()
FAMILY_S: Counter[str] = Counter()


def e2e_selected(config: pytest.Config) -> bool:
    expr = config.getoption("markexpr", "") or ""
    return re.search(r"(?<!not )\be2e\b", expr) is not None


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path.name in E2E_MODULES and not e2e_selected(config):
        return True
    return None


def pytest_sessionstart(session: pytest.Session) -> None:
    TIMINGS["session_start"] = time.monotonic()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        if getattr(item, "originalname", item.name) in RUN_LAST:
            return 2
        return 1 if item.path.name == FAULTS_MODULE else 0

    items.sort(key=rank)


def family(nodeid: str) -> str:
    """A test's family for the summary: its module and function, without parameters."""
    path, _, name = nodeid.partition("::")
    return f"{Path(path).stem.removeprefix('test_')}: {name.split('[')[0].removeprefix('test_')}"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not report.nodeid.startswith("tests/e2e/"):
        return
    FAMILY_S[family(report.nodeid)] += report.duration
    if report.when == "call" or report.outcome != "passed":
        FAMILIES[family(report.nodeid), report.outcome] += 1


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
        if TALLY["through the gateways"]:
            terminalreporter.write_line(
                f"  {TALLY['through the gateways']} of them through the two gateway replicas"
            )
        for d in DIFFERENCES:
            if TALLY[d.id]:
                terminalreporter.write_line(f"  {d.id}: {TALLY[d.id]}")
    if FAMILIES:
        terminalreporter.write_line("by family (tests, seconds):")
        for name in sorted({f for f, _ in FAMILIES}):
            outcomes = ", ".join(f"{n} {o}" for (f, o), n in sorted(FAMILIES.items()) if f == name)
            terminalreporter.write_line(f"  {name}: {outcomes}; {FAMILY_S[name]:.0f}s")
    from tests.e2e.gateways import NOTES

    for case, what in NOTES:
        terminalreporter.write_line(f"{case}: {what}")
    if "engine_start" in TIMINGS:
        terminalreporter.write_line(
            f"engine start to /health: {TIMINGS['engine_start']:.0f}s, "
            f"first request: {TIMINGS['engine_warm_up']:.0f}s"
        )
    terminalreporter.write_line(f"session: {time.monotonic() - TIMINGS['session_start']:.0f}s")
    for key, path in LOGS.items():
        terminalreporter.write_line(f"{key.replace('_', ' ')}: {path}")


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


@pytest.fixture(scope="session")
def topic_watch(kafka_bootstrap: str, e2e_topics: dict[str, str]) -> Iterator[TopicWatch]:
    """Every record of the session's input and output topics, as they come."""
    from tests.e2e.gateways import TopicWatch

    with TopicWatch(kafka_bootstrap, [e2e_topics["input"], e2e_topics["output"]]) as watch:
        yield watch


@pytest.fixture(scope="session")
def start_gateway(
    engine_url: str, kafka_bootstrap: str, e2e_topics: dict[str, str], e2e_dir: Path
) -> Iterator[Callable[..., Gateway]]:
    """Starts `derender-worker gateway` replicas on the session's topics (in front of the
    session's engine unless told otherwise); all stopped at the session's end."""
    from tests.e2e import gateways as gw

    started: list[Gateway] = []

    def start(
        name: str, partitions: tuple[int, ...], *extra: str, engine: str | None = None
    ) -> Gateway:
        log = e2e_dir / f"gateway-{name}.log"
        LOGS[f"gateway_{name}_log"] = str(log)
        g = gw.start_gateway(
            name, partitions, engine or engine_url, kafka_bootstrap, e2e_topics, log, extra
        )
        started.append(g)
        return g

    try:
        yield start
    finally:
        for g in started:
            g.process.stop()


@pytest.fixture(scope="session")
def gateways(
    start_gateway: Callable[..., Gateway], e2e_worker: WorkerProcess
) -> dict[str, Gateway]:
    """Two replicas, each owning two of the output topic's four partitions."""
    return {name: start_gateway(name, parts) for name, parts in GATEWAY_PARTITIONS.items()}


@pytest.fixture(autouse=True)
def _close_gateway_clients() -> Iterator[None]:
    yield
    from tests.e2e.gateways import close_clients

    close_clients()
