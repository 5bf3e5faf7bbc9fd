"""pyproject.toml as setuptools and pip read it: valid without a deprecation warning, the
version in one place, package-data that exists, and constraints.txt pinning everything
the requirements bring."""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import tomllib
import warnings
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version
from setuptools.config.pyprojecttoml import apply_configuration
from setuptools.dist import Distribution

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = ROOT / "pyproject.toml"
CONSTRAINTS = ROOT / "constraints.txt"


def project() -> dict[str, Any]:
    return tomllib.loads(PYPROJECT.read_text())


def apply(path: Path) -> Distribution:
    """What setuptools' build backend does with a pyproject.toml."""
    return apply_configuration(Distribution(), path)


def test_setuptools_reads_it_without_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a deprecation banner is a warning first
        dist = apply(PYPROJECT)
    assert dist.metadata.license_expression == "Apache-2.0"
    assert dist.get_version() == project()["project"]["version"]


def test_the_old_license_table_would_be_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check above can fail: the TOML table this project had warns."""
    old = 'license = { text = "Apache-2.0" }\n'  # (license-files needs a string license)
    text = re.sub(
        r'^license = "Apache-2.0"\nlicense-files = .*\n', old, PYPROJECT.read_text(), flags=re.M
    )
    assert old in text
    (tmp_path / "pyproject.toml").write_text(text)
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    monkeypatch.chdir(tmp_path)
    with pytest.warns(Warning, match="license"):
        apply(tmp_path / "pyproject.toml")


def test_the_build_backend_is_new_enough_for_an_spdx_license() -> None:
    (requirement,) = (Requirement(r) for r in project()["build-system"]["requires"])
    assert requirement.name == "setuptools"
    assert not requirement.specifier.contains("76.9"), "setuptools < 77 reads no SPDX license"


def test_package_data_names_files_that_exist() -> None:
    package_data = project()["tool"]["setuptools"]["package-data"]
    for package, patterns in package_data.items():
        folder = ROOT / package.replace(".", "/")
        for pattern in patterns:
            assert list(folder.glob(pattern)), f"package-data {package}: {pattern} matches nothing"


def test_the_version_is_written_only_in_pyproject() -> None:
    """worker.__version__ comes from the installed metadata, which pyproject.toml fills."""
    import worker

    version = project()["project"]["version"]
    assert importlib.metadata.version("derender-worker") == version
    assert worker.__version__ == version
    literal = re.compile(rf"""["']{re.escape(version)}["']""")
    copies = [p for p in (ROOT / "worker").rglob("*.py") if literal.search(p.read_text())]
    assert not copies, f"the version written again in {copies}"


# constraints.txt ------------------------------------------------------------------------


def pins() -> dict[str, Version]:
    found = {}
    for line in CONSTRAINTS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep, f"constraints.txt: {line!r} is not name==version"
            found[canonicalize_name(name)] = Version(version)
    return found


def top_requirements() -> list[Requirement]:
    """Every requirement pyproject.toml lists: dependencies, each extra, each group."""
    meta = project()
    texts = list(meta["project"]["dependencies"])
    for extra in meta["project"]["optional-dependencies"].values():
        texts += extra
    for group in meta["dependency-groups"].values():
        texts += [item for item in group if isinstance(item, str)]  # not include-group
    return [Requirement(t) for t in texts]


def applies(req: Requirement, extras: set[str]) -> bool:
    if req.marker is None:
        return True
    return any(req.marker.evaluate({"extra": e}) for e in extras or {""})


def pin_problems(pinned: dict[str, Version]) -> list[str]:
    """What `pinned` lacks: each requirement and, for what is installed here, each of
    its dependencies all the way down, pinned within its range at the installed version
    (`make venv` installs from constraints.txt)."""
    problems = []
    todo = [(req, True) for req in top_requirements() if applies(req, set())]
    seen: set[str] = set()
    while todo:
        req, top = todo.pop()
        name = canonicalize_name(req.name)
        if name not in pinned:
            problems.append(f"{req.name} is not pinned")
            continue
        if top and not req.specifier.contains(pinned[name], prereleases=True):
            problems.append(f"{req.name}=={pinned[name]} is outside {req}")
        if name in seen:
            continue
        seen.add(name)
        try:
            dist = importlib.metadata.distribution(req.name)
        except importlib.metadata.PackageNotFoundError:
            continue  # a group `make venv` leaves out (bench, peer)
        if Version(dist.version) != pinned[name]:
            problems.append(f"{req.name} {dist.version} is installed, {pinned[name]} pinned")
        for text in dist.requires or []:
            sub = Requirement(text)
            if applies(sub, set(req.extras)):
                todo.append((sub, False))
    return problems


def test_constraints_pin_every_requirement_and_what_it_brings() -> None:
    assert pin_problems(pins()) == [], "run `make constraints` and commit constraints.txt"


def test_a_missing_or_stale_pin_is_found() -> None:
    pinned = pins()
    # starlette's own dependency (not in pyproject.toml), and a pin out of range.
    del pinned["anyio"]
    pinned["msgspec"] = Version("0.1")
    problems = pin_problems(pinned)
    assert "anyio is not pinned" in problems
    assert any(p.startswith("msgspec==0.1 is outside") for p in problems)
