"""The docs promise what the code does: every `run` flag, metric, alert, command, registry
bound and start-up error line named on the site exists, and everything that exists is
named there."""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import msgspec
import pytest
import yaml

from worker.cli import build_parser
from worker.config import Limits
from worker.gateway.metrics import GatewayMetrics
from worker.observe.metrics import Metrics
from worker.run.processes import Supervisor
from worker.serve.app import ServeMetrics
from worker.settings import FLAGS, from_args

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def section(text: str, title: str) -> str:
    """The body of the `## title` (or deeper) section, up to the next heading of its level."""
    match = re.search(rf"^(#+) {re.escape(title)}\s*$", text, re.M)
    assert match, f"no section {title!r}"
    level = len(match.group(1))
    end = re.compile(rf"^#{{1,{level}}} ", re.M).search(text, match.end())
    return text[match.end() : end.start() if end else len(text)]


def table_rows(text: str) -> list[list[str]]:
    """A Markdown table's body rows as cells (header and rule rows left out)."""
    rows = [line for line in text.splitlines() if line.startswith("|")]
    cells = [[c.strip() for c in re.split(r"(?<!\\)\|", r)[1:-1]] for r in rows]
    return [c for c in cells[2:] if c]


def spans(cell: str) -> list[str]:
    """The `code spans` of a table cell, `\\|` unescaped."""
    return [s.replace("\\|", "|") for s in re.findall(r"`([^`]+)`", cell)]


CONFIGURATION = page("operate/configuration.md")
KNOWN_FLAGS = {f.name for f in FLAGS} | {f"{f.name}-file" for f in FLAGS if f.secret}


def test_every_run_flag_is_documented() -> None:
    documented = CONFIGURATION + page("operate/cli.md")
    missing = [f.name for f in FLAGS if f"`--{f.name}`" not in documented]
    assert not missing, f"docs/operate lacks run flags: {missing}"


def test_documented_flags_exist() -> None:
    documented = set(re.findall(r"`--([a-z-]+)`", CONFIGURATION))
    unknown = documented - KNOWN_FLAGS
    assert documented and not unknown, f"configuration.md names unknown flags: {sorted(unknown)}"


def test_the_flag_table_holds_every_run_flag_with_its_default() -> None:
    rows = table_rows(section(CONFIGURATION, "`run` flags"))
    seen: dict[str, str] = {}
    for flags_cell, default_cell, _ in rows:
        names = re.findall(r"`--([a-z-]+)`", flags_cell)
        defaults = [d.strip().strip("`") for d in default_cell.split(" / ")]
        for i, name in enumerate(names):
            seen[name] = defaults[i] if len(defaults) == len(names) else default_cell
    assert set(seen) == {f.name for f in FLAGS}, set(seen) ^ {f.name for f in FLAGS}
    for f in FLAGS:
        if f.default is None or f.name == "models":
            continue  # "unset" / "built-in"
        # an int flag's default may be written 10000 and a float's 30 for 30.0
        assert seen[f.name] in (str(f.default), f"{f.default:g}" if f.type is float else ""), (
            f"--{f.name}: documented default {seen[f.name]!r}, the code's {f.default!r}"
        )


def test_every_metric_is_documented_and_exists() -> None:
    families = {m.name for m in Metrics().registry.collect()}
    supervisor = Supervisor(from_args(build_parser().parse_args(["run"])))
    families |= {m.name for m in supervisor.registry.collect()}  # run --processes N
    families |= {m.name for m in ServeMetrics().registry.collect()}  # serve's /metrics
    families |= {m.name for m in GatewayMetrics().registry.collect()}  # gateway's /metrics
    text = page("operate/metrics.md")
    documented = {re.sub(r"_total$", "", n) for n in re.findall(r"`(derender_[a-z_]+)", text)}
    assert families <= documented, f"metrics.md lacks metrics: {sorted(families - documented)}"
    assert documented <= families, f"metrics.md names unknown metrics: {documented - families}"


def test_every_alert_and_recording_rule_is_documented() -> None:
    rules = yaml.safe_load((ROOT / "deploy/prometheus/rules/derender.yml").read_text())
    shipped = {r.get("alert") or r["record"] for g in rules["groups"] for r in g["rules"]}
    text = page("operate/metrics.md")
    documented = {
        s for row in table_rows(text) for s in spans(row[0]) if re.fullmatch(r"[\w:]+", s)
    }
    documented = {d for d in documented if d.startswith(("Derender", "derender:"))}
    assert shipped == documented, f"shipped only: {shipped - documented}, docs only: " + str(
        documented - shipped
    )


def all_docs() -> str:
    pages = [p.read_text(encoding="utf-8") for p in sorted(DOCS.rglob("*.md"))]
    pages += [(ROOT / n).read_text(encoding="utf-8") for n in ("README.md", "CONTRIBUTING.md")]
    return "\n".join(pages)


def test_every_command_is_documented() -> None:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    commands = set(sub.choices)  # type: ignore[arg-type]
    assert commands == {
        "run", "replay", "check", "publish", "tail", "demo", "servers", "serve", "gateway",
    }  # fmt: skip
    text = all_docs()
    missing = [cmd for cmd in sorted(commands) if f"derender-worker {cmd}" not in text]
    assert not missing, f"no page shows derender-worker {missing}"
    assert "make demo" in text and "make test" in text


def test_every_registry_limit_is_documented() -> None:
    names = [f.name for f in msgspec.structs.fields(Limits)]
    assert names, "Limits has no fields"
    missing = [
        n for n in names if f"| `{n}` |" not in CONFIGURATION or f"\n{n} = " not in CONFIGURATION
    ]
    assert not missing, (
        f"configuration.md lacks the bound (its table row or [limits] line): {missing}"
    )
    for n in names:
        row = next(r for r in table_rows(CONFIGURATION) if r[0] == f"`{n}`")
        default = msgspec.structs.asdict(Limits())[n]
        assert row[1].replace(",", "") == str(default), f"{n}: documented {row[1]}, is {default}"


START_UP_ERRORS = table_rows(section(CONFIGURATION, "Start-up errors"))


@pytest.mark.parametrize(
    ("arguments", "line"),
    [(spans(a)[0], spans(b)[0]) for a, b in START_UP_ERRORS],
    ids=[spans(a)[0] for a, _ in START_UP_ERRORS],
)
def test_each_documented_start_up_error_is_what_run_says(arguments: str, line: str) -> None:
    # An error raised while parsing the flags or checking the settings, as `run` prints it.
    # (Exception: which class a settings error is belongs to the CLI, not to the docs.)
    with pytest.raises(Exception) as caught:
        from_args(build_parser().parse_args(["run", *shlex.split(arguments)]))
    assert str(caught.value) == line


def raised_messages(path: Path, classes: set[str]) -> list[str]:
    """The literal text of each `raise <class>(<str or f-string>)` in a module, a
    placeholder `{}` for each value."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)):
            continue
        func = node.exc.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        if name not in classes or not node.exc.args:
            continue
        arg = node.exc.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            out.append(arg.value)
        elif isinstance(arg, ast.JoinedStr):
            out.append(
                "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in arg.values)
            )
    return out


def test_every_settings_and_registry_error_is_documented() -> None:
    """The other way round: each error the flags, settings and registry code can raise
    has its words on configuration.md (a row of the table or a line of the list)."""
    errors = ("SettingsError", "ConfigError")
    messages = []
    for module in ("worker/settings.py", "worker/flags.py", "worker/config.py"):
        if (ROOT / module).exists():
            messages += raised_messages(ROOT / module, set(errors))
    assert len(messages) > 20, messages
    text = section(CONFIGURATION, "Start-up errors").replace("\\|", "|")
    undocumented = []
    for message in messages:
        # the longest literal run is the family's words (values differ per case)
        words = max((w.strip() for w in message.split("{}")), key=len)
        if words and words not in text:
            undocumented.append(message)
    assert not undocumented, f"configuration.md lacks these errors: {undocumented}"


def refusal_templates() -> list[str]:
    """The lines the Kafka and Redis access checks stop the worker with, `{}` for each
    value (the text of every f-string there that says what to fix)."""
    out = []
    for module in (
        "worker/adapters/broker/kafka_access.py",
        "worker/adapters/state/redis_access.py",
    ):
        for node in ast.walk(ast.parse((ROOT / module).read_text(encoding="utf-8"))):
            if isinstance(node, ast.JoinedStr):
                parts = [v.value if isinstance(v, ast.Constant) else "{}" for v in node.values]
                text = "".join(parts)
                if len(text.replace("{}", "")) > 40:
                    out.append(text)
    return out


def test_every_refusal_line_on_the_security_page_is_the_code_s() -> None:
    security = page("operate/security.md")
    documented = [
        s
        for row in table_rows(security)
        for cell in row[1:]
        for s in spans(cell)
        if re.match(r"cannot run: |derender-worker( \w+)?: ", s)
    ]
    templates = refusal_templates()
    patterns = [
        re.compile(".+?".join(re.escape(p) for p in t.split("{}")), re.S) for t in templates
    ]
    assert len(documented) >= 20 and len(templates) >= 15, (len(documented), len(templates))
    kept = [d for d in documented if d.startswith("cannot run: ")]  # (the rest: settings)
    strays = [d for d in kept if not any(p.search(d) for p in patterns)]
    assert not strays, f"security.md quotes lines the code does not write: {strays}"
    unquoted = [
        t
        for t, p in zip(templates, patterns, strict=True)
        if not any(p.search(d) for d in documented)
    ]
    assert not unquoted, f"security.md lacks these refusals: {unquoted}"
