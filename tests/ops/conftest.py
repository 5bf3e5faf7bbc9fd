"""The `ops` marker: checks that need a Go build the first time (tests/ops/k8scheck:
minutes on 2 cores), run by `make ops-check` (`pytest -m ops tests/ops`), which .ci/run
calls after `make test`. Modules listed here are collected only when `-m` selects `ops`;
the rest of tests/ops is in `make test`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

OPS_MODULES = {"test_k8s_manifests.py"}


def ops_selected(config: pytest.Config) -> bool:
    expr = config.getoption("markexpr", "") or ""
    return re.search(r"(?<!not )\bops\b", expr) is not None


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "ops: make ops-check only (a Go build the first time)")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path.name in OPS_MODULES and not ops_selected(config):
        return True
    return None
