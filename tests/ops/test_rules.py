"""deploy/prometheus/: the config and rules pass promtool's checks, every alert is
unit-tested (`promtool test rules` on synthetic series, firing and quiet), and every
series the rules, dashboard and HPA read is one the worker or serve exports."""

from __future__ import annotations

import re
import subprocess

import yaml

from tests.ops.promql import (
    CONFIG,
    PROMETHEUS,
    RULE_TESTS,
    RULES,
    dashboard_exprs,
    exported_names,
    hpa_exprs,
    promtool,
    rules,
)


def run(*args: str) -> str:
    done = subprocess.run(
        [promtool(), *args], capture_output=True, text=True, timeout=60, cwd=PROMETHEUS
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    return out


def test_promtool_check_config_loads_every_rule_file() -> None:
    out = run("check", "config", str(CONFIG))
    assert f"SUCCESS: {len(RULES)} rule files found" in out
    assert RULES, "no rule files under deploy/prometheus/rules"


def test_promtool_check_rules() -> None:
    out = run("check", "rules", *map(str, RULES))
    assert f"SUCCESS: {len(rules())} rules found" in out


def test_promtool_test_rules() -> None:
    assert RULE_TESTS
    out = run("test", "rules", *map(str, RULE_TESTS))
    assert "SUCCESS" in out and "FAILED" not in out


def _tests() -> list[dict]:
    return [t for path in RULE_TESTS for t in yaml.safe_load(path.read_text())["tests"]]


def test_every_alert_is_tested_firing_and_quiet() -> None:
    fired: set[str] = set()
    quiet: set[str] = set()
    for test in _tests():
        for case in test.get("alert_rule_test", []):
            (fired if case["exp_alerts"] else quiet).add(case["alertname"])
    alerts = {r["alert"] for r in rules() if "alert" in r}
    assert len(alerts) >= 8
    assert alerts <= fired, f"never seen firing: {sorted(alerts - fired)}"
    assert alerts <= quiet, f"never seen quiet: {sorted(alerts - quiet)}"
    assert fired | quiet <= alerts, f"tests of unknown alerts: {sorted(fired | quiet - alerts)}"


def test_every_recording_rule_has_a_value_test() -> None:
    tested = {c["expr"] for t in _tests() for c in t.get("promql_expr_test", [])}
    recorded = {r["record"] for r in rules() if "record" in r}
    assert recorded and recorded <= tested, f"untested: {sorted(recorded - tested)}"


def test_every_alert_says_what_and_how_bad() -> None:
    for rule in rules():
        if "alert" in rule:
            assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
            assert rule["annotations"]["summary"] and rule["annotations"]["description"]


def test_rules_dashboard_and_hpa_read_only_exported_series() -> None:
    names = exported_names()
    exprs = [r["expr"] for r in rules()] + list(dashboard_exprs().values())
    exprs += list(hpa_exprs('job="x"', "instance").values())
    used = {n for e in exprs for n in re.findall(r"\bderender_[a-z0-9_]+", e)}
    assert used and used <= names, f"unknown metrics: {sorted(used - names)}"
    recorded = {r["record"] for r in rules() if "record" in r}
    used_recorded = {n for e in exprs for n in re.findall(r"\bderender:[a-z0-9_:]+", e)}
    assert used_recorded <= recorded, f"unknown recording rules: {used_recorded - recorded}"
