"""`run --event-loop`: which event loop the worker runs on."""

from __future__ import annotations

import asyncio
import builtins
from typing import Any

import pytest

from worker.cli import event_loop_factory
from worker.settings import SettingsError


def _loop_type(choice: str) -> str:
    factory = event_loop_factory(choice)
    with asyncio.Runner(loop_factory=factory) as runner:
        return type(runner.get_loop()).__module__.split(".")[0]


def test_asyncio_is_asyncios_own_loop() -> None:
    assert event_loop_factory("asyncio") is None
    assert _loop_type("asyncio") == "asyncio"


def test_auto_and_uvloop_pick_uvloop_when_installed() -> None:
    pytest.importorskip("uvloop")
    assert _loop_type("auto") == "uvloop"
    assert _loop_type("uvloop") == "uvloop"


def test_without_uvloop_auto_falls_back_and_uvloop_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_import = builtins.__import__

    def no_uvloop(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "uvloop":
            raise ImportError("No module named 'uvloop'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_uvloop)
    assert event_loop_factory("auto") is None
    with pytest.raises(SettingsError, match="uvloop is not installed"):
        event_loop_factory("uvloop")
