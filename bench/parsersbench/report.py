"""The markdown report of both parts."""

from __future__ import annotations

import datetime
import os
import platform

import msgspec
import tokenizers
from common import (  # bench/common.py (the script's folder is on sys.path)
    code_version,
    cpu_model,
    fmt_rate,
)

from parsersbench.positions import PositionRow
from parsersbench.profile import EARLY, LATE, REPLAY_WINDOW, TARGET_RATIO, WINDOW, Profile
from parsersbench.throughput import RateRow

# -- report -------------------------------------------------------------------------------


def machine() -> dict[str, str]:
    return {
        "cpu": cpu_model(),
        "nproc": str(os.cpu_count()),
        "python": platform.python_version(),
        "tokenizers": tokenizers.__version__,
        "msgspec": msgspec.__version__,
        "code": code_version(),
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def _cell(text: str) -> str:
    """Text for a Markdown table cell (a `|` would end the cell, even in code)."""
    return text.replace("|", "\\|")


def report(
    positions: list[PositionRow],
    rates: list[RateRow],
    info: dict[str, str],
    elapsed: float,
    prof: Profile,
) -> str:
    lines = [
        f"# Parser benchmark, {datetime.date.today().isoformat()}",
        "",
        "`.venv/bin/python bench/parsers_bench.py` (see its docstring for what is timed).",
        "",
        "Machine: " + ", ".join(f"{k} {v}" for k, v in info.items()),
        "",
        f"## A. Per-chunk cost at token {EARLY:,} vs token {LATE:,} (1 token per record)",
        "",
        f"Target: ratio ≤ {TARGET_RATIO}. Ours is timed over {WINDOW} records at each "
        f"position, the replay baseline over {REPLAY_WINDOW}; best of {prof.rounds} passes "
        f"over the table × {prof.repeats} runs (replay {max(1, prof.repeats // 3)}), the two "
        "positions round robin.",
        "",
        "| format | reasoning / tool parser | tokenizer | generation | per record | "
        f"µs at {EARLY} | µs at {LATE:,} | ratio | state bytes at {EARLY} / {LATE:,} |",
        "|---|---|---|---|---|--:|--:|--:|--:|",
    ]
    for p in positions:
        f = p.fmt
        size = f"{p.state_bytes[0]} / {p.state_bytes[1]}" if p.ours else ""
        mark = (" ✓" if p.ratio <= TARGET_RATIO else " ✗") if p.ours else ""
        parsers = f"`{f.reasoning or '—'}` / `{f.tools or '—'}`"
        lines.append(
            f"| {f.family} | {parsers} | {f.tokenizer} | {_cell(f.generation)} | {p.what} | "
            f"{p.early_us:.2f} | {p.late_us:.2f} | {p.ratio:.2f}{mark} | {size} |"
        )
    over = [r for r in positions if r.ours and r.ratio > TARGET_RATIO]
    checks = [r for r in positions if r.problem]
    lines.append("")
    for row in over:
        lines.append(
            f"- Over the target: {row.fmt.family} {row.fmt.generation} ({row.fmt.phase}), "
            f"ratio {row.ratio:.2f} ({row.early_us:.2f} → {row.late_us:.2f} µs)."
        )
    for row in checks:
        lines.append(
            f"- Phase check, {row.fmt.family} {row.fmt.generation}: expected only "
            f"{row.fmt.phase} events, saw {row.problem}."
        )
    if not over and not checks:
        lines.append("Every row within the target; every window emitted only its phase's events.")
    lines += [
        "",
        "## B. Tokens/s of the per-record path, one whole generation",
        "",
        "| path | tokens/record | tokens/s | µs/token | median/best |",
        "|---|--:|--:|--:|--:|",
    ]
    for r in rates:
        lines.append(
            f"| {r.what} | {r.chunk} | {fmt_rate(r.tokens_per_s)} | "
            f"{1e6 / r.tokens_per_s:.2f} | {r.median_s / r.best_s:.2f} |"
        )
    lines += ["", f"Run time {elapsed:.0f} s.", ""]
    return "\n".join(lines)
