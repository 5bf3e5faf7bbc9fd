"""Go modules for the manifest checks, from the Go module proxy into
$DERENDER_OPS_CACHE (default ~/.cache/derender-ops; the network reaches package registries,
not GitHub): KEDA's CRDs from the
`github.com/kedacore/keda/v2` module at the version tests/autoscale/keda builds against,
and tests/ops/k8scheck, built once per source change.

`python -m tests.ops.gomod` builds k8scheck (make ops-check runs it first: a cold build
downloads ~30 MB of modules and compiles k8s.io/api, minutes on 2 cores)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENV_CACHE = "DERENDER_OPS_CACHE"
K8SCHECK_SRC = ROOT / "tests" / "ops" / "k8scheck"
KEDA_GO_MOD = ROOT / "tests" / "autoscale" / "keda" / "go.mod"
KEDA_MODULE = "github.com/kedacore/keda/v2"
BUILD_TIMEOUT_S = 1800


def go() -> str:
    path = shutil.which("go")
    assert path, "go not found: the manifest checks need Go >= 1.26 (https://go.dev/dl)"
    return path


def cache_dir() -> Path:
    """The cache folder, made if missing: every user of it starts here, so a fresh
    machine (or a new $DERENDER_OPS_CACHE) needs no step of its own."""
    chosen = os.environ.get(ENV_CACHE)
    folder = (Path(chosen) if chosen else Path.home() / ".cache" / "derender-ops").absolute()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def go_env(cache: Path) -> dict[str, str]:
    return {
        **os.environ,
        "GOMODCACHE": str(cache / "mod"),
        "GOCACHE": str(cache / "build"),
        "GOFLAGS": "-mod=mod",
    }


def keda_version() -> str:
    """The KEDA release tests/autoscale/keda (make autoscale's oracle) is built against."""
    found = re.search(
        rf"^\s*(?:require\s+)?{re.escape(KEDA_MODULE)} (v\S+)", KEDA_GO_MOD.read_text(), re.M
    )
    assert found, f"no {KEDA_MODULE} in {KEDA_GO_MOD}"
    return found.group(1)


def module_dir(module: str, version: str) -> Path:
    """The module's files, downloaded through the Go module proxy once."""
    cache = cache_dir()
    done = subprocess.run(
        [go(), "mod", "download", "-json", f"{module}@{version}"],
        capture_output=True,
        text=True,
        env=go_env(cache),
        # Outside any Go module: `go mod download` then fetches just this one.
        cwd=cache,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return Path(json.loads(done.stdout)["Dir"])


def k8scheck() -> Path:
    """tests/ops/k8scheck built into the cache, named by its sources' digest (a change to
    main.go, go.mod or go.sum builds a new one)."""
    digest = hashlib.sha256()
    for name in ("main.go", "go.mod", "go.sum"):
        digest.update((K8SCHECK_SRC / name).read_bytes())
    cache = cache_dir()
    binary = cache / f"k8scheck-{digest.hexdigest()[:12]}"
    if not binary.exists():
        partial = binary.with_suffix(".partial")
        done = subprocess.run(
            [go(), "build", "-ldflags=-s -w", "-o", str(partial), "."],
            capture_output=True,
            text=True,
            env=go_env(cache),
            cwd=K8SCHECK_SRC,
            timeout=BUILD_TIMEOUT_S,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        partial.rename(binary)
    return binary


if __name__ == "__main__":
    print(k8scheck())
