"""Benchmark of the pure core on one CPU core, with DeepSeek V4's real tokenizer.

    .venv/bin/python bench/core_bench.py            # full run (~35 s), writes bench/results/
    .venv/bin/python bench/core_bench.py --quick    # fewer repeats and requests (~10 s)

What is timed (bench/README.md says more):

1. `DecodeStream` loop: one `tokenizers.decoders.DecodeStream` for the whole stream, no
   state leaves Rust. The floor for any incremental detokenizer built on `tokenizers`.
2. vLLM's per-token Python algorithm (vLLM 0.33.0's `detokenize_incrementally` and
   `_detokenize_delta`): piece strings, `decoder.decode` twice per id, offsets rebased per
   chunk; "lean" calls the Rust objects directly, "HF-shaped" goes through the call shape
   of transformers' fast tokenizer; its state carried as a Python object, or as JSON as its
   client does.
3. Our `Detokenizer`, with its state round-tripped through msgpack (a `RequestState`
   holding one `ChoiceState`) between chunks, and without the round trip.
4. The whole core per record: JSON record in → `decode_batch` + `process_batch` → JSON
   output records + state blob, one request; also `derender.step` alone; and batches of
   500 interleaved records from many concurrent requests against a dict store.

Every implementation's concatenated text is checked against one-shot `tok.decode(ids)`
before anything is timed. Times are best-of-N wall clock (`time.perf_counter`) after a
warm-up run; the median is reported beside the best.

The parts live in bench/corebench/: profile (sizes, row names, targets), workload (the
tokenizer and the generation), detokenizers (rows 1 and 3), vllm (row 2), core (row 4),
report (rows, timing, the markdown).
"""

from __future__ import annotations

import argparse
import datetime
import gc
import time
from collections.abc import Callable
from pathlib import Path

from common import (  # bench/common.py (the script's folder is on sys.path)
    pin_one_core,
    timed_round_robin,
)
from corebench.core import (
    content_of,
    interleave,
    pipeline_batches,
    pipeline_one_request,
    registry,
    request_records,
    step_one_request,
)
from corebench.detokenizers import (
    decodestream_list,
    decodestream_one_id,
    decodestream_per_id,
    fresh_request_state,
    ours_msgpack,
    ours_object,
)
from corebench.profile import (
    CORE,
    CORE_STEP,
    FLOOR,
    FULL,
    GC_TUNED,
    OURS,
    OURS_OBJ,
    QUICK,
    SKIP_SPECIAL,
    VLLM,
    VLLM_HF,
    VLLM_HF_JSON,
    VLLM_JSON,
)
from corebench.report import Row, check, machine, render, timed
from corebench.vllm import (
    HfFastShim,
    VllmDetokenizer,
    vllm_hf_json,
    vllm_hf_object,
    vllm_json,
    vllm_object,
)
from corebench.workload import chunked, generation_ids, load_deepseek

from worker.core.state import DONE, decode_state, encode_state
from worker.core.text.detokenize import Detokenizer
from worker.wire.inbound import decode_record

RESULTS_DIR = Path(__file__).resolve().parent / "results"


# -- main -------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats and requests (~10 s)")
    ap.add_argument("--out", type=Path, help="results file (default bench/results/core-DATE.md)")
    ap.add_argument("--no-write", action="store_true", help="print only, write no file")
    ap.add_argument("--cpu", type=int, default=0, help="the one CPU to pin to (default 0)")
    args = ap.parse_args(argv)
    prof = QUICK if args.quick else FULL
    started = time.perf_counter()

    info = machine()
    pinning = pin_one_core(args.cpu)
    tok = load_deepseek()
    ids = generation_ids(tok, seed=1, n_tokens=prof.tokens)
    want = tok.decode(ids, skip_special_tokens=SKIP_SPECIAL)
    n = len(ids)

    detok = Detokenizer(tok, skip_special_tokens=SKIP_SPECIAL)
    vd = VllmDetokenizer(tok, skip_special_tokens=SKIP_SPECIAL)
    shim = HfFastShim(tok)
    reg = registry(tok)

    # 1)-3): the detokenizers alone.
    rows: list[Row] = []
    for size in (1, 8):
        chunks = chunked(ids, size)
        one = size == 1
        impls: list[tuple[str, str, Callable[[], list[str]], str]] = [
            (
                "1",
                FLOOR,
                (lambda c=chunks: decodestream_one_id(tok, c))
                if one
                else (lambda c=chunks: decodestream_per_id(tok, c)),
                "the floor" if one else "",
            ),
            (
                "1",
                "DecodeStream loop, step(list) per chunk",
                lambda c=chunks: decodestream_list(tok, c),
                "" if one else "holds the whole chunk when it ends mid-character",
            ),
            ("2", VLLM, lambda c=chunks: vllm_object(vd, c), "lower bound on vLLM"),
            ("2", VLLM_JSON, lambda c=chunks: vllm_json(vd, c), "+ JSON state each chunk"),
            (
                "2",
                VLLM_HF,
                lambda c=chunks: vllm_hf_object(shim, c),
                "transformers-shaped calls",
            ),
            (
                "2",
                VLLM_HF_JSON,
                lambda c=chunks: vllm_hf_json(shim, c),
                "transformers-shaped + JSON state",
            ),
            ("3", OURS, lambda c=chunks: ours_msgpack(detok, c), "RequestState round trip"),
            ("3", OURS_OBJ, lambda c=chunks: ours_object(detok, c), "no round trip"),
        ]
        for _, name, fn, _ in impls:
            check(f"{name} ({size}-token chunks)", "".join(fn()), want)
        timings = timed_round_robin([fn for _, _, fn, _ in impls], prof.repeats)
        for (group, name, _, note), (best, med) in zip(impls, timings, strict=True):
            rows.append(Row(group, name, size, n, len(chunks), best, med, note))

    # 4) the whole core, one request, record by record.
    for size in (1, 8):
        values = request_records(tok, "req-0", ids, size, {})
        outs, _ = pipeline_one_request(reg, "req-0", values)
        check(f"pipeline ({size}-token chunks)", content_of(outs), want)
        best, med = timed(
            lambda v=values: pipeline_one_request(reg, "req-0", v, keep=False), prof.core_repeats
        )
        note = f"1 request, {len(values)} records (incl. `end`)"
        rows.append(Row("4", CORE, size, n, len(values), best, med, note))
        recs = [decode_record(v, "req-0") for v in values]
        check(f"derender.step ({size}-token chunks)", content_of(step_one_request(reg, recs)), want)
        best, med = timed(lambda r=recs: step_one_request(reg, r, keep=False), prof.core_repeats)
        rows.append(Row("4", CORE_STEP, size, n, len(values), best, med, "records pre-decoded"))

    # 4b) many interleaved requests, batches of `batch_records`.
    per_request = [
        generation_ids(tok, seed=100 + i, n_tokens=prof.request_tokens)
        for i in range(prof.requests)
    ]
    batch_tokens = sum(len(r) for r in per_request)
    for size in (1, 8):
        streams = [request_records(tok, f"req-{i}", r, size, {}) for i, r in enumerate(per_request)]
        records = interleave(streams)
        outs, store = pipeline_batches(reg, records, prof.batch_records)
        by_request: dict[str, list[bytes]] = {}
        for key, value in outs:
            by_request.setdefault(key, []).append(value)
        for i, r in enumerate(per_request):
            check(
                f"batch req-{i} ({size}-token chunks)",
                content_of(by_request[f"req-{i}"]),
                tok.decode(r, skip_special_tokens=SKIP_SPECIAL),
            )
        assert all(decode_state(s.blob).status == DONE for s in store.values())
        best, med = timed(
            lambda rs=records: pipeline_batches(reg, rs, prof.batch_records, keep=False),
            prof.core_repeats,
        )
        batches = -(-len(records) // prof.batch_records)
        name = f"core batch: {prof.requests} requests, {prof.batch_records} records/batch"
        note = f"{len(records)} records in {batches} batches"
        rows.append(Row("4b", name, size, batch_tokens, len(records), best, med, note))
        if size == 1:
            # The same with the collector's young generation run 70× less often: how much
            # of the row above is CPython's cyclic GC (a shell setting, not the core's).
            thresholds = gc.get_threshold()
            gc.set_threshold(*GC_TUNED)
            try:
                best, med = timed(
                    lambda rs=records: pipeline_batches(reg, rs, prof.batch_records, keep=False),
                    prof.core_repeats,
                )
            finally:
                gc.set_threshold(*thresholds)
            note = f"gc.set_threshold{GC_TUNED}"
            rows.append(Row("4b", name, size, batch_tokens, len(records), best, med, note))

    # b) state size.
    sizes: dict[str, int] = {}
    streaming = request_records(tok, "req-s", ids, 1, {}, finished=False)
    _, after = pipeline_one_request(reg, "req-s", streaming)
    sizes[f"plain request, after {n} tokens (1-token chunks, still streaming)"] = after[-1]
    sizes["plain request, largest at any record of that stream"] = max(after)
    _, after = pipeline_one_request(reg, "req-s", request_records(tok, "req-s", ids, 8, {}))
    sizes["plain request, 8-token chunks, finished: after the last chunk"] = after[-2]
    sizes["plain request, tombstone after `end`"] = after[-1]
    asked = {"stream_options": {"include_usage": True}, "stop": ["</answer>", "\n\n\n"]}
    _, after = pipeline_one_request(
        reg, "req-u", request_records(tok, "req-u", ids, 1, asked, finished=False)
    )
    sizes["include_usage + 2 stop strings, largest while streaming"] = max(after)
    bare = fresh_request_state()
    for chunk in chunked(ids, 1):
        detok.step(bare.choices[0], chunk)
        bare.seq += 1
    sizes["row 3's RequestState + 1 ChoiceState after the stream"] = len(encode_state(bare))

    elapsed = time.perf_counter() - started
    report = render(info, pinning, prof, args.quick, n, rows, sizes, elapsed)
    print(report)
    if not args.no_write:
        out = args.out or RESULTS_DIR / f"core-{datetime.date.today().isoformat()}.md"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(report + "\n", encoding="utf-8")
        print(f"\nwritten to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
