"""Every folder outside the repository that a test or command caches into, started from
an empty one, as on a machine that never ran the project: each helper makes its folder
itself (none relies on another having run first) and leaves no open file behind.

The caches: Apache Kafka's jars and class-data archive ($DERENDER_KAFKA_HOME,
worker/adapters/local/kafka_jars.py), the Go modules of the manifest checks
($DERENDER_OPS_CACHE, tests/ops/gomod.py), the tokenizers built at test time
($DERENDER_TEST_CACHE, tests/support/vocab/tiktoken_convert.py). (`make autoscale`'s
KEDA build and tests/peer/setup_peer.sh make theirs with `mkdir -p`; .ci/run's Go too.)
A fresh Kafka resolution downloads 45 jars from Maven Central: here a stand-in `mvn`
copies them from this machine's cache instead, so all the rest runs as on a new one.
"""

from __future__ import annotations

import gc
import os
import shutil
import stat
import subprocess
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ops import gomod
from tests.support.server_fixtures import apache_required
from tests.support.vocab import tiktoken_convert
from worker.adapters.local import kafka_jars, kafka_server

VERSION = kafka_jars.DEFAULT_VERSION

# A stand-in for mvn: what `resolve_jars` runs (dependency:copy-dependencies into
# -DoutputDirectory), printing a download line as mvn does; the jars come from $JARS, or
# an empty kafka_2.13 jar is written.
FAKE_MVN = """#!/bin/sh
for arg in "$@"; do
  case "$arg" in -DoutputDirectory=*) out="${arg#-DoutputDirectory=}" ;; esac
done
mkdir -p "$out"
echo "[INFO] Downloaded from central: https://repo.example/kafka_2.13-$VERSION.jar (1 kB)"
if [ -n "$JARS" ]; then cp "$JARS"/*.jar "$out"/; else : > "$out/kafka_2.13-$VERSION.jar"; fi
"""


@pytest.fixture
def fake_mvn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return install_fake_mvn(tmp_path, monkeypatch)


def install_fake_mvn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    mvn = bin_dir / "mvn"
    mvn.write_text(FAKE_MVN)
    mvn.chmod(mvn.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("VERSION", VERSION)
    monkeypatch.delenv("JARS", raising=False)
    return mvn


@pytest.fixture
def no_unclosed_files() -> Iterator[None]:
    """Fails when the code under test leaves a file or pipe for the garbage collector
    (its ResourceWarning would otherwise fail some later test, far from the cause)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        yield
        gc.collect()
    leaks = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert leaks == []


def test_mvn_output_pipe_is_closed(tmp_path: Path, no_unclosed_files: None) -> None:
    log = tmp_path / "mvn.log"
    code = kafka_jars._run_mvn(
        ["sh", "-c", "echo '[INFO] Downloaded from central: https://r/a.jar (1 kB)'"],
        log,
        VERSION,
        time.monotonic(),
        print,
    )
    assert code == 0
    assert "Downloaded from central" in log.read_text()


def test_kafka_jars_resolve_into_an_empty_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_mvn: Path, no_unclosed_files: None
) -> None:
    root = tmp_path / "new" / "derender-kafka"  # neither folder exists yet
    monkeypatch.setenv(kafka_jars.ENV_KAFKA_HOME, str(root))
    home = kafka_jars.kafka_home(VERSION)
    home.mkdir(parents=True)  # what `kafka_server.resolve` does before its lock
    said: list[str] = []
    kafka_jars.resolve_jars(home, VERSION, said.append)
    assert kafka_jars.jars_resolved(VERSION)
    assert (home / "libs" / f"kafka_2.13-{VERSION}.jar").is_file()
    assert not (home / "libs.partial").exists()
    assert said[-1].startswith(f"resolved Apache Kafka {VERSION}: 1 jars")


@pytest.mark.integration
def test_kafka_resolve_and_start_from_an_empty_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_unclosed_files: None
) -> None:
    """All of `resolve` from an empty $DERENDER_KAFKA_HOME (the jars copied by the
    stand-in mvn from this machine's cache, resolved first if need be), the class-data
    archive recorded by a real broker start, then a broker started from the new cache."""
    if missing := kafka_jars.missing_tools():
        if apache_required():
            pytest.fail("; ".join(missing))
        pytest.skip("; ".join(missing))
    source = kafka_server.resolve(VERSION)  # before the stand-in mvn is on PATH
    install_fake_mvn(tmp_path, monkeypatch)
    monkeypatch.setenv("JARS", str(source / "libs"))
    monkeypatch.setenv(kafka_jars.ENV_KAFKA_HOME, str(tmp_path / "new" / "derender-kafka"))
    said: list[str] = []
    home = kafka_server.resolve(VERSION, said.append)
    assert home.is_relative_to(tmp_path)
    assert kafka_server.starts_from_cache(VERSION)
    assert any(line.startswith("recording a class-data archive") for line in said)
    with kafka_server.ApacheKafka(VERSION, progress=said.append) as kafka:
        assert kafka.home == home
        assert kafka_server.kafka_metadata(kafka.host, kafka.port) is not None


def test_ops_cache_is_made_by_its_first_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if shutil.which("go") is None:
        pytest.skip("no go")
    cache = tmp_path / "new" / "derender-ops"
    monkeypatch.setenv(gomod.ENV_CACHE, str(cache))
    folder = gomod.module_dir(gomod.KEDA_MODULE, gomod.keda_version())
    try:
        assert folder.is_relative_to(cache)
        assert (folder / "go.mod").is_file()
    finally:
        # Go writes its module cache read-only; its own command removes it.
        subprocess.run(
            [gomod.go(), "clean", "-modcache"], env=gomod.go_env(cache), check=True, timeout=120
        )


def test_tokenizers_are_built_into_an_empty_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DERENDER_TEST_CACHE", str(tmp_path / "new" / "derender-tests"))
    path = tiktoken_convert.gpt_oss_tokenizer_json()
    assert path.is_relative_to(tmp_path) and path.stat().st_size > 0
    folder = tiktoken_convert.o200k_base_tiktoken()
    assert (folder / "o200k_base.tiktoken").is_file()
