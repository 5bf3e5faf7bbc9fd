"""The README is the front door: every `run` flag, metric and command it promises exists,
and everything that exists is in it."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

from worker.cli import build_parser
from worker.observe.metrics import Metrics
from worker.run.processes import Supervisor
from worker.settings import FLAGS, from_args

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def test_every_run_flag_is_documented() -> None:
    missing = [f.name for f in FLAGS if f"`--{f.name}`" not in README]
    assert not missing, f"README lacks flags: {missing}"


def test_documented_flags_exist() -> None:
    known = {f.name for f in FLAGS}
    table = README[README.index("## Configuration") : README.index("### Model registry")]
    documented = set(re.findall(r"`--([a-z-]+)`", table))
    assert documented and documented <= known, f"unknown flags: {sorted(documented - known)}"


def test_every_metric_is_documented_and_exists() -> None:
    families = {m.name for m in Metrics().registry.collect()}
    supervisor = Supervisor(from_args(build_parser().parse_args(["run"])))
    families |= {m.name for m in supervisor.registry.collect()}  # run --processes N
    section = README[README.index("## Metrics") : README.index("## Layout")]
    documented = {re.sub(r"_total$", "", n) for n in re.findall(r"`(derender_[a-z_]+)", section)}
    assert families <= documented, f"README lacks metrics: {sorted(families - documented)}"
    assert documented <= families, f"README names unknown metrics: {sorted(documented - families)}"


def test_every_command_is_documented() -> None:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    commands = set(sub.choices)  # type: ignore[arg-type]
    assert commands == {"run", "replay", "check", "publish", "tail", "demo", "servers", "serve"}
    for cmd in commands:
        assert f"derender-worker {cmd}" in README
    assert "make demo" in README and "make test" in README


def test_every_registry_limit_is_documented() -> None:
    from worker.config import Limits

    names = [f.name for f in msgspec.structs.fields(Limits)]
    assert names, "Limits has no fields"
    missing = [n for n in names if f"| `{n}` |" not in README or f"\n{n} = " not in README]
    assert not missing, f"README lacks the bound (its table row or [limits] line): {missing}"
