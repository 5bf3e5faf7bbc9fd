"""Debian's `prometheus` as a local process for the live check (tests/ops/test_live.py):
the shipped deploy/prometheus/prometheus.yml with only its targets rewritten, its rules/
beside it, an HTTP API client for /api/v1/query and /api/v1/targets."""

from __future__ import annotations

import copy
import json
import math
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from tests.ops.promql import CONFIG, PROMETHEUS
from tests.support.servers import free_port

START_TIMEOUT_S = 60.0


def adapted_config(targets: dict[str, list[str]]) -> dict[str, Any]:
    """prometheus.yml as shipped, each job's static targets replaced by `targets[job]`
    (every job must be given). Nothing else changes: intervals, rule_files, job names."""
    config = yaml.safe_load(CONFIG.read_text())
    adapted = copy.deepcopy(config)
    jobs = {job["job_name"] for job in adapted["scrape_configs"]}
    assert jobs == set(targets), f"jobs in prometheus.yml: {sorted(jobs)}"
    for job in adapted["scrape_configs"]:
        (static,) = job["static_configs"]
        static["targets"] = targets[job["job_name"]]
    # Only the addresses differ.
    blank = copy.deepcopy(adapted)
    for a, b in zip(blank["scrape_configs"], config["scrape_configs"], strict=True):
        a["static_configs"][0]["targets"] = b["static_configs"][0]["targets"]
    assert blank == config
    return dict(adapted)


class Prometheus:
    """`prometheus` on a free loopback port, its data and config in `workdir`: the
    adapted config next to a copy of deploy/prometheus/rules, so the config's relative
    rule_files resolve as in the shipped layout."""

    def __init__(self, workdir: Path, targets: dict[str, list[str]]) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        binary = shutil.which("prometheus")
        assert binary, "prometheus not found: apt-get install prometheus (.ci/run does)"
        self.config = workdir / "prometheus.yml"
        self.config.write_text(yaml.safe_dump(adapted_config(targets), sort_keys=False))
        shutil.copytree(PROMETHEUS / "rules", workdir / "rules")
        self.port = free_port()
        self.log = workdir / "prometheus.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [
                    binary,
                    f"--config.file={self.config}",
                    f"--storage.tsdb.path={workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"prometheus exited:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self._url("/-/ready"), timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"prometheus not ready in {START_TIMEOUT_S:.0f}s:\n{self.log_tail()}")

    def _url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def api(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(self._url(f"/api/v1/{path}{query}"), timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's samples (a vector's; a scalar's as one sample)."""
        data = self.api("query", query=expr)
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": data["result"]}]
        return list(data["result"])

    def targets(self) -> list[dict[str, Any]]:
        return list(self.api("targets")["activeTargets"])

    def rule_groups(self) -> list[dict[str, Any]]:
        return list(self.api("rules")["groups"])

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def has_data(samples: list[dict[str, Any]]) -> bool:
    """A non-empty result with at least one number (a quantile over no observations is
    NaN: a series, but no data)."""
    return any(not math.isnan(float(s["value"][1])) for s in samples)
