"""`worker`'s public names: each resolves, each is on the API page, and none is imported
before it is used (so `import worker` and the core load no Kafka or Redis client)."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import pytest

import worker

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "integrate" / "python-api.md"
CLIENTS = ("aiokafka", "redis", "worker.tools.publisher", "worker.tools.output_reader")


def _imported_after(code: str) -> set[str]:
    """The client modules loaded by `code`, in a fresh interpreter."""
    probe = f"{code}\nimport sys\nprint(' '.join(m for m in {CLIENTS!r} if m in sys.modules))"
    proc = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return set(proc.stdout.split())


@pytest.mark.parametrize("name", worker.__all__)
def test_every_public_name_resolves(name: str) -> None:
    value = getattr(worker, name)
    assert value is not None
    if name != "__version__":
        assert value.__doc__, f"{name} has no docstring"
    assert name in dir(worker)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Reader'"):
        _ = worker.Reader  # type: ignore[attr-defined]


def test_the_version_is_the_installed_distributions() -> None:
    assert worker.__version__ == importlib.metadata.version("derender-worker")
    assert re.fullmatch(r"\d+\.\d+\.\d+\S*", worker.__version__)


@pytest.mark.parametrize(
    "code",
    [
        "import worker",
        "import worker; worker.__version__; worker.ChunkRecord; worker.Output",
        "import worker.core.derender",
        "from worker.core.derender import step",
        "import worker.wire.output",
    ],
)
def test_importing_loads_no_client(code: str) -> None:
    assert _imported_after(code) == set()


def test_the_reader_loads_its_client_when_used() -> None:
    # (the check above can fail: the probe sees a client once something imports it)
    assert "aiokafka" in _imported_after("import worker; worker.OutputReader")


def test_every_public_name_is_on_the_api_page() -> None:
    page = PAGE.read_text(encoding="utf-8")
    headings = set(re.findall(r"^#+ `([\w.]+)", page, flags=re.MULTILINE))
    missing = [n for n in worker.__all__ if n not in headings]
    assert not missing, f"{PAGE.name} has no section for {missing}"
