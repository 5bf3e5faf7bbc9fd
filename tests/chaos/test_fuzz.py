"""Bad-input fuzz: a seeded corpus of random and mutated records (tests/chaos/fuzz.py).

- In process, 20 000 records through decode_batch/process_batch: no exception escapes,
  every record is counted exactly once, every outcome leaves its trace (a dead letter, an
  error output), and the outputs do not depend on how the records were batched.
- Through a running worker, thousands of them mixed with good requests: the worker stays
  up (and exits 0 on SIGTERM), the good requests are exact, and everything it publishes
  (outputs, dead letters, result counts) equals the in-process pipeline's answer.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from tokenizers import Tokenizer

from tests.chaos.fuzz import Item, corpus
from tests.chaos.tools import (
    FIXED_TS_MS,
    Record,
    Tail,
    oracle,
    per_request,
    wait_counted,
    worker_registry,
)
from tests.integration.harness import (
    WorkerProcess,
    interleave,
    make_generations,
    publish,
    read_all,
    verify,
)
from tests.support.helpers import Run as LoopRun
from tests.support.servers import free_port
from worker.batch.pipeline import decode_batch, process_batch
from worker.constants import H_KIND, H_PART, H_REQUEST_ID, H_SEQ
from worker.core import errors
from worker.ports import InRecord, OutRecord

pytestmark = pytest.mark.chaos

LIMIT = 16 * 1024  # --max-record-bytes: the corpus has records just over it
CODES = {
    errors.INVALID_REQUEST,
    errors.INVALID_RECORD,
    errors.MODEL_NOT_FOUND,
    errors.SEQUENCE_GAP,
    errors.STATE_MISSING,
    errors.STATE_CORRUPT,
}


def vocab_size() -> int:
    reg = worker_registry()
    return reg.models[reg.default].vocab_size


@dataclass
class Run:
    outputs: list[OutRecord] = field(default_factory=list)
    dead: list[OutRecord] = field(default_factory=list)
    results: Counter[str] = field(default_factory=Counter)
    per_record: list[tuple[Counter[str], list[OutRecord], list[OutRecord]]] = field(
        default_factory=list
    )


def run(items: list[Item], sizes: Callable[[], int]) -> Run:
    """The corpus through the one loop in batches of `sizes()` records, memory store."""
    ins = [InRecord(it.value, it.key, FIXED_TS_MS, f"fuzz/{i}") for i, it in enumerate(items)]
    loop = LoopRun(worker_registry())
    out = Run()
    at = 0
    while at < len(ins):
        batch = ins[at : at + sizes()]
        at += len(batch)
        res = loop.feed_records(batch, LIMIT).result
        out.outputs += res.outputs
        out.dead += res.dead_letters
        out.results.update(res.results)
        if len(batch) == 1:
            out.per_record.append((res.results, res.outputs, res.dead_letters))
    return out


def test_fuzz_in_process() -> None:
    items = corpus(seed=7001, count=20_000, vocab_size=vocab_size(), max_record_bytes=LIMIT)
    rng = random.Random(7002)
    batched = run(items, lambda: rng.choice([1, 7, 64, 500]))
    one_by_one = run(items, lambda: 1)

    # Batching changes nothing, and every record is counted exactly once.
    assert batched.outputs == one_by_one.outputs
    assert batched.dead == one_by_one.dead
    assert batched.results == one_by_one.results
    assert sum(batched.results.values()) == len(items)
    assert_traces(items, one_by_one)
    # Every output is a well-formed payload with its headers.
    for o in batched.outputs:
        h = {k: v.decode() for k, v in o.headers}
        assert h[H_REQUEST_ID] == o.key and h[H_KIND] == o.kind and int(h[H_PART]) >= 0
        assert int(h[H_SEQ]) >= -1
        if o.kind == "done":
            assert o.value == b"[DONE]"
            continue
        body = json.loads(o.value)
        if o.kind == "error":
            assert body["error"]["code"] in CODES, body
            assert body["error"]["message"]
    for d in batched.dead:
        assert dict(d.headers)["derender-error"]
    # The corpus reaches every outcome.
    assert min(batched.results[k] for k in ("ok", "error", "dlq", "skipped", "duplicate")) > 0
    print(f"fuzz in process: {len(items)} records, {dict(batched.results)}")


def assert_traces(items: list[Item], one_by_one: Run) -> None:
    """Each record (processed alone) is counted once and leaves the trace its result says:
    a dead letter of its very bytes, an error output, or (duplicate, skipped) nothing."""
    for it, (results, outputs, dead) in zip(items, one_by_one.per_record, strict=True):
        ((result, n),) = results.items()
        assert n == 1, (it.what, results)
        kinds = [o.kind for o in outputs]
        if result == "dlq":
            assert [d.value for d in dead] == [it.value], it.what
            assert all(k == "error" for k in kinds), (it.what, kinds)
        else:
            assert not dead, it.what
        if result == "error":
            assert kinds[0] == "error" and set(kinds) <= {"error", "done"}, (it.what, kinds)
        if result in ("duplicate", "skipped"):
            assert set(kinds) <= {"done"}, (it.what, kinds)


def chunk0(**top: object) -> bytes:
    rec = {"request_id": "p", "seq": 0, "generate_chunk": {"choices": [{"token_ids": [1]}]}}
    return json.dumps({**rec, **top}).encode()


POISON = {
    # (value, key) → (result, error code or None, dead-lettered)
    "seq beyond int64": (json.dumps({"request_id": "p", "seq": 2**70}).encode(), "p", "dlq"),
    "seq 2**64 at end": (
        json.dumps({"request_id": "p", "seq": 2**64, "type": "end"}).encode(),
        "p",
        "dlq",
    ),
    "created 2**64": (chunk0(created=2**64), "p", "error"),
    "created -2**70": (chunk0(created=-(2**70)), "p", "error"),
    "prompt_tokens 10**30": (chunk0(prompt_tokens=10**30), "p", "error"),
    "choice index 10**30": (
        json.dumps(
            {
                "request_id": "p",
                "seq": 0,
                "generate_chunk": {"choices": [{"index": 10**30, "token_ids": [1]}]},
            }
        ).encode(),
        "p",
        "error",
    ),
    "stop_token_ids 2**65": (chunk0(chat_request={"stop_token_ids": [2**65]}), "p", "error"),
    "nested 5000 deep": (chunk0()[:-1] + b', "x": ' + b"[" * 5000 + b"]" * 5000 + b"}", "p", "dlq"),
    "invalid UTF-8 in a string": (chunk0().replace(b'"p"', b'"p\xff"', 1), "p", "dlq"),
    "oversized, no key, no JSON": (b"\x00" * (LIMIT + 1), None, "dlq"),
    "key is not the request_id": (chunk0(), "q", "dlq"),
}


@pytest.mark.parametrize("case", list(POISON))
def test_poison_records_found_by_the_fuzz(case: str) -> None:
    """Records that crashed the worker (an exception out of the pipeline, so the record was
    never committed and crashed every restart) or vanished without a trace."""
    value, key, result = POISON[case]
    ins = [InRecord(value, key, FIXED_TS_MS, "poison/0")]
    res = process_batch(decode_batch(ins, LIMIT), {}, worker_registry())
    assert res.results == Counter({result: 1})
    if result == "dlq":
        assert [d.value for d in res.dead_letters] == [value]
    else:
        (err,) = res.outputs
        assert json.loads(err.value)["error"]["code"] == errors.INVALID_REQUEST
        assert "out of range" in json.loads(err.value)["error"]["message"]
        assert res.writes["p"].seq == 0  # the request is failed, and that is stored


def test_huge_n_is_refused_promptly() -> None:
    n = 2**31  # refused at once, before any choice state exists
    recs = [
        {"request_id": "n", "seq": 0, "chat_request": {"n": n}, "generate_chunk": {"choices": []}},
        {"request_id": "n", "seq": 1, "type": "abort"},
    ]
    ins = [InRecord(json.dumps(r).encode(), "n", FIXED_TS_MS) for r in recs]
    res = process_batch(decode_batch(ins, LIMIT), {}, worker_registry())
    assert len(res.outputs) <= 2, f"{len(res.outputs)} outputs"  # an error, [DONE]
    assert len(res.writes["n"].blob) < 4096, f"a state of {len(res.writes['n'].blob)} bytes"


@pytest.fixture
def topics(new_topic: Callable[..., str]) -> dict[str, str]:
    # One input partition: the corpus keeps its exact order (a mutated request_id may name
    # another fuzz request), so the in-process oracle applies record for record.
    return {
        "input": new_topic(partitions=1, prefix="in"),
        "output": new_topic(partitions=4, prefix="out"),
        "dlq": new_topic(partitions=1, prefix="dlq"),
    }


@pytest.mark.integration
def test_fuzz_through_a_running_worker(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
) -> None:
    items = corpus(seed=7101, count=5000, vocab_size=vocab_size(), max_record_bytes=LIMIT)
    # In process first: every bad record of this corpus leaves its trace; then the worker
    # must publish what the pipeline does (so the same holds for it).
    assert_traces(items, run(items, lambda: 1))
    good = make_generations(deepseek, 100, seed=7102, prefix="good")
    # The good records, in order, at random places among the bad ones.
    rng = random.Random(7103)
    bad: list[Record] = [(it.key, it.value) for it in items]
    ok: list[Record] = list(interleave(good, seed=7104))
    records: list[Record] = []
    while bad or ok:
        pick = bad if bad and (not ok or rng.random() < len(bad) / (len(bad) + len(ok))) else ok
        records.append(pick.pop(0))
    want = oracle(records, max_record_bytes=LIMIT)

    port = free_port()
    w = worker_factory("--max-record-bytes", str(LIMIT), metrics_port=port)
    with Tail(kafka_bootstrap, topics["output"]) as tail:
        asyncio.run(publish(kafka_bootstrap, topics["input"], records, FIXED_TS_MS))
        results = wait_counted(port, len(records))
        outputs = tail.wait(lambda o: len(o) >= len(want.outputs), 60, "every output")
    assert w.alive, w.log_tail()
    assert results == want.results
    verify(outputs, good)
    assert per_request(outputs) == per_request(want.outputs)
    dlq = asyncio.run(
        read_all(kafka_bootstrap, topics["dlq"], lambda o: len(o) >= len(want.dead_letters), 60)
    )
    assert sorted((o.value, o.headers["derender-error"]) for o in dlq) == sorted(want.dead_letters)
    assert w.stop() == 0, w.log_tail()
    # A traceback would be the core failing on a record (an `internal_error`): a core bug.
    assert "Traceback" not in w.log_text(), w.log_text()[-5000:]
    print(f"fuzz through the worker: {len(records)} records, {dict(results)}")
