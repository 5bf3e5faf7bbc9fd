"""The loop in-process: CPU per record of `run_batch` with no broker and no Redis.

    .venv/bin/python bench/loop_bench.py                          # ~1 min, prints
    .venv/bin/python bench/loop_bench.py --quick                  # smaller
    .venv/bin/python bench/loop_bench.py --against /tmp/before    # side by side, writes
                                                                  # bench/results/loop-<day>.md

The workload is what a worker's loop sees from an engine streaming chat requests:
interleaved requests (random words, `</think>` in the middle: DeepSeek V4's
reasoning parser splits there), `include_usage`, the last record finishing with `stop`,
one or 8 token ids per record, 500-record batches. The adapters are the tests': a list
source, a list sink, `MemoryStore` (so what is measured is decode → load states → the
core → outputs and headers → state writes: `run_batch` minus the servers). Parsers on is
the default registry (DeepSeek V4's reasoning and tool parsers); parsers off is the same
model and tokenizer without them.

Figures are process CPU (`time.process_time`) per record, best of N, on one pinned core,
with the collector tuned as the worker tunes it (`cli.tune_gc`; `--gc-default`: CPython's
own, about 1 µs a record more); the stage split is process CPU read as each of the loop's
stages ends (`Observer.stage`), of the best run.

`--against TREE` runs this same script in TREE (another checkout, e.g. `git worktree add
/tmp/before <commit>`) and here, in alternating child processes, so a burst of other work
on a shared machine slows a run of each side rather than all runs of one. Each child also
prints a digest of every output (value and headers) and state write: the two trees must
agree byte for byte, or the comparison stops.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

# `--tree` (a child run of another checkout) must be on the path before the worker's imports.
sys.path.insert(
    0,
    sys.argv[sys.argv.index("--tree") + 1]
    if "--tree" in sys.argv
    else str(Path(__file__).resolve().parent.parent),
)
sys.path.insert(1, str(Path(__file__).resolve().parent))

from common import REPO, cpu_model, pin_one_core

from tests.support.helpers import ListSink, ListSource
from worker.adapters.state.memory_store import MemoryStore
from worker.batch.checkpoint import Checkpoint
from worker.batch.loop import run_batch, run_sync
from worker.cli import tune_gc
from worker.config import DEFAULT_REGISTRY_TOML, load_registry
from worker.core.model import Registry
from worker.ports import InRecord

WORDS = ["the", "a", "of", "stream", "token", "engine", "worker", "answer", "model", "request",
         "text", "word"]  # fmt: skip
BATCH = 500
CASES = [("on", 1), ("on", 8), ("off", 1), ("off", 8)]  # (parsers, tokens per record)


def registries() -> dict[str, Registry]:
    """Parsers on (the default registry) and off (the same entry without its parsers)."""
    plain = "\n".join(line for line in DEFAULT_REGISTRY_TOML.splitlines() if "_parser" not in line)
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write(plain)
    try:
        return {"on": load_registry(None), "off": load_registry(f.name)}
    finally:
        os.unlink(f.name)


def records(reg: Registry, requests: int, words: int, per: int, seed: int) -> list[bytes]:
    """Interleaved chunk records of `requests` chat requests, `per` token ids each."""
    tok = reg.models[reg.default].tokenizer
    rng = random.Random(seed)
    streams = []
    for n in range(requests):
        half = [" ".join(rng.choice(WORDS) for _ in range(words)) for _ in range(2)]
        ids = list(tok.encode("</think>".join(half), add_special_tokens=False).ids)
        recs = []
        for seq, i in enumerate(range(0, len(ids), per)):
            choice: dict[str, Any] = {"index": 0, "token_ids": ids[i : i + per]}
            rec: dict[str, Any] = {
                "request_id": f"r{n}",
                "seq": seq,
                "generate_chunk": {"choices": [choice]},
            }
            if seq == 0:
                rec["chat_request"] = {"stream_options": {"include_usage": True}}
            if i + per >= len(ids):
                choice["finish_reason"] = "stop"
            recs.append(json.dumps(rec).encode())
        streams.append(recs)
    out = []
    while any(streams):  # interleaved, each request in order
        q = rng.choice([q for q in streams if q])
        out.append(q.pop(0))
    return out


class Stages:
    """The loop's stages (`Observer.stage`, called as each ends), in process CPU summed
    over a run: the loop's own wall-clock figure counts whatever else the machine ran."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.last = time.process_time()

    def start(self) -> None:
        self.last = time.process_time()

    def stage(self, name: str, seconds: float) -> None:
        now = time.process_time()
        self.seconds[name] += now - self.last
        self.last = now

    def round_trip(self, kind: str, count: int = 1) -> None:
        pass

    def delivered(self, records: list[InRecord]) -> None:
        pass

    def saved(self, writes: list[Any], refused: int) -> None:
        pass


def run_all(reg: Registry, values: list[bytes], stages: Stages | None = None) -> Any:
    source, sink, store = ListSource(), ListSink(), MemoryStore()
    checkpoint = Checkpoint(source, store)
    writes = []
    for i in range(0, len(values), BATCH):
        batch = source.batch([InRecord(v) for v in values[i : i + BATCH]])
        if stages is not None:
            stages.start()
        report = run_sync(
            run_batch(
                batch,
                registry=reg,
                sink=sink,
                checkpoint=checkpoint,
                max_record_bytes=1 << 20,
                **({"observer": stages} if stages is not None else {}),
            )
        )
        writes.append(report.writes)
    return sink, writes


def digest(sink: Any, writes: list[Any]) -> str:
    """Every output's value and headers, and every state write's fields, in order."""
    h = hashlib.sha256()
    for o in sink.outputs:
        h.update(o.value)
        for k, v in o.headers:
            h.update(k.encode() + b"=" + v + b";")
    for ws in writes:
        for w in ws:
            h.update(repr((w.request_id, w.seq, w.blob, w.done, w.expected_seq)).encode())
    return h.hexdigest()[:16]


def measure(requests: int, words: int, rounds: int, gc_default: bool) -> dict[str, Any]:
    """Every case, `rounds` runs each, round robin; best process CPU per record. The
    collector is tuned as the worker tunes it (`cli.tune_gc`), unless `gc_default`."""
    regs = registries()
    work = {c: (regs[c[0]], records(regs[c[0]], requests, words, c[1], seed=1)) for c in CASES}
    if not gc_default:
        tune_gc()
    out: dict[str, Any] = {}
    for case, (reg, values) in work.items():  # warm-up, and the digest
        out[f"{case[0]}/{case[1]}"] = {
            "records": len(values),
            "digest": digest(*run_all(reg, values)),
        }
    best: dict[tuple[str, int], float] = {c: float("inf") for c in CASES}
    split: dict[tuple[str, int], dict[str, float]] = {}
    for _ in range(rounds):
        for case, (reg, values) in work.items():
            gc.collect(0)  # (the young generation only: what tune_gc froze stays frozen)
            stages = Stages()
            t0 = time.process_time()
            run_all(reg, values, stages)
            t = time.process_time() - t0
            if t < best[case]:
                best[case], split[case] = t, dict(stages.seconds)
    for case, (_, values) in work.items():
        n = len(values)
        row = out[f"{case[0]}/{case[1]}"]
        row["us"] = best[case] / n * 1e6
        row["stages"] = {k: v / n * 1e6 for k, v in split[case].items()}
    return out


def commit_of(tree: Path) -> str:
    run = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True, text=True
    )
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no", "--", "worker"],
        cwd=tree,
        capture_output=True,
        text=True,
    ).stdout.strip()
    sha = run.stdout.strip() or "unknown"
    return f"{sha} (worker/ has uncommitted changes)" if dirty else sha


def child(tree: Path, args: argparse.Namespace, rounds: int) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--json", "--tree", str(tree), "--rounds", str(rounds)]
    cmd += ["--quick"] if args.quick else []
    cmd += ["--gc-default"] if args.gc_default else []
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    return json.loads(run.stdout.splitlines()[-1])  # type: ignore[no-any-return]


STAGES = ["decode", "redis_load", "core", "produce", "redis_save", "commit"]


def table(results: dict[str, dict[str, Any]]) -> str:
    """One row per case; columns: each tree's µs/record and its stage split."""
    names = list(results)
    head = "| parsers / ids per record | records | " + " | ".join(f"{n} µs/record" for n in names)
    if len(names) == 2:
        head += " | after / before"
    lines = [head + " |", "|" + "---|" * head.count("|")]
    for case in results[names[0]]:
        row = [case, str(results[names[0]][case]["records"])]
        row += [f"{results[n][case]['us']:.2f}" for n in names]
        if len(names) == 2:
            a, b = (results[n][case]["us"] for n in names)
            row.append(f"{b / a:.2f}×")
        lines.append("| " + " | ".join(row) + " |")
    lines += [
        "",
        "Stage split (µs of process CPU per record, read as each stage ends; best run):",
        "",
    ]
    lines.append("| case | tree | " + " | ".join(STAGES) + " |")
    lines.append("|" + "---|" * (len(STAGES) + 2))
    for case in results[names[0]]:
        for n in names:
            st = results[n][case]["stages"]
            lines.append(
                f"| {case} | {n} | " + " | ".join(f"{st.get(s, 0.0):.2f}" for s in STAGES) + " |"
            )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer requests and rounds")
    ap.add_argument("--json", action="store_true", help="one JSON line (a child run)")
    ap.add_argument("--tree", help="measure the worker of this checkout (a child run)")
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--against", help="another checkout: run both, alternating, side by side")
    ap.add_argument("--alternations", type=int, default=3)
    ap.add_argument("--out", help="write the Markdown report here")
    ap.add_argument(
        "--gc-default", action="store_true", help="CPython's collector as is, not the worker's"
    )
    args = ap.parse_args()
    requests, words = (100, 30) if args.quick else (300, 30)
    rounds = args.rounds or (2 if args.quick else 5)
    pinned = pin_one_core(1)
    if args.json:
        print(json.dumps(measure(requests, words, rounds, args.gc_default)))
        return
    trees = (
        {"this": Path(args.tree or REPO)}
        if args.against is None
        else {"before": Path(args.against), "after": REPO}
    )
    best: dict[str, dict[str, Any]] = {}
    alternations = args.alternations if args.against else 1
    for _ in range(alternations):
        for name, tree in trees.items():
            got = child(tree, args, rounds)
            mine = best.setdefault(name, got)
            for case, row in got.items():
                if row["us"] < mine[case]["us"]:
                    mine[case] = row
    if len(best) == 2:
        for case in best["before"]:
            if best["before"][case]["digest"] != best["after"][case]["digest"]:
                sys.exit(f"outputs differ between the trees ({case}): not the same work")
    load = os.getloadavg()
    day = datetime.date.today().isoformat()
    desc = ", ".join(f"{n} = {commit_of(t)}" for n, t in trees.items())
    report = (
        f"# bench/loop_bench.py, {day}\n\n"
        f"Machine: {cpu_model()}, {os.cpu_count()} CPUs, {pinned}; load average "
        f"{load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (1 / 5 / 15 min) at the end; "
        f"code: {desc}.\n\n"
        f"{requests} interleaved chat requests (~{2 * words} words each, `</think>` in the "
        f"middle, usage on), {BATCH}-record batches, `MemoryStore`, a list sink; "
        + ("CPython's default collector" if args.gc_default else "the worker's collector settings")
        + " (`cli.tune_gc`). Process CPU "
        f"per record, best of {rounds * alternations} runs"
        + (
            f" ({alternations} alternations of the two trees; the digests of their outputs "
            "and state writes agreed)"
            if args.against
            else ""
        )
        + ".\n\n"
        + table(best)
        + "\n"
    )
    print(report)
    if args.out:
        Path(args.out).write_text(report, encoding="utf-8")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
