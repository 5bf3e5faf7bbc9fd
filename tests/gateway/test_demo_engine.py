"""`derender-worker demo --engine-url`: the demo's questions through a gateway to an engine
(here the stand-in engine; `make demo ENGINE=vllm` uses the real one)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.gateway.stand_in import StandInEngine
from tests.integration.harness import ROOT
from worker.config import DEFAULT_REGISTRY_TOML
from worker.tools.demo import CONVERSATION

pytestmark = pytest.mark.integration


def demo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "worker", "demo", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def test_the_demo_asks_its_questions_through_the_gateway(engine: StandInEngine) -> None:
    done = demo("--engine-url", engine.url, "--short")
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "gateway http://127.0.0.1:" in out and f"engine {engine.url}" in out
    assert "asking 3 questions through the gateway" in out
    asked = [question for _, question, _, _ in (*CONVERSATION[:2], CONVERSATION[-1])]
    # Each answer is the engine's, derendered by the worker and streamed back.
    for question in asked:
        assert engine.answer_text(question) in out
    assert sorted(g["x_text"] for g in engine.generated) == sorted(asked)
    assert "summary: 3 requests, " in out and "stopped the gateway" in out


def test_an_engine_model_the_registry_does_not_know_is_one_line(
    engine: StandInEngine, tmp_path: Path
) -> None:
    models = tmp_path / "models.toml"
    models.write_text(DEFAULT_REGISTRY_TOML.replace('"deepseek-v4"', '"other"'), encoding="utf-8")
    done = demo("--engine-url", engine.url, "--models", str(models))
    assert done.returncode == 2, done.stderr
    assert "the engine serves 'deepseek-v4', which the worker's model registry" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not engine.generated
