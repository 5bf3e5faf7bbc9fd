"""Injected duplicates, reorderings and gaps, and a batch that mixes good records with
malformed ones, through a running worker (docs/integrate/contract.md, "Errors").

Besides the explicit expectations below, everything the worker publishes must equal what
the in-process pipeline gives for the same records (`tools.oracle`): byte for byte, per
request, and the same dead letters.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from tokenizers import Tokenizer

from tests.chaos.tools import (
    FIXED_TS_MS,
    Record,
    Tail,
    describe,
    oracle,
    per_request,
    wait_counted,
)
from tests.integration.harness import (
    Generation,
    WorkerProcess,
    interleave,
    make_generations,
    publish,
    read_all,
    verify,
)
from tests.support.servers import free_port
from worker.core.errors import INVALID_RECORD, INVALID_REQUEST, SEQUENCE_GAP, STATE_MISSING

pytestmark = [pytest.mark.chaos, pytest.mark.integration]


def head(items: list[Any], seq: int) -> list[Any]:
    """The outputs of records before `seq`."""
    return [x for x in items if x[0] < seq]


def test_duplicated_reordered_and_gapped_records(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
) -> None:
    pool = [
        g for g in make_generations(deepseek, 80, seed=501, prefix="seq") if len(g.records) >= 4
    ]
    clean, dup, swap, drop, nostart = pool[:10], pool[10:18], pool[18:26], pool[26:34], pool[34:38]
    streams: list[list[dict[str, Any]]] = [list(g.records) for g in clean]
    for g in dup:  # every record twice in a row
        streams.append([r for r in g.records for _ in (0, 1)])
    for g in swap:  # seq 2 before seq 1
        r = g.records
        streams.append([r[0], r[2], r[1], *r[3:]])
    for g in drop:  # seq 1 never arrives
        streams.append([r for r in g.records if r["seq"] != 1])
    for g in nostart:  # seq 0 never arrives
        streams.append(list(g.records[1:]))
    records = interleave([Generation(s[0]["request_id"], [], "", s) for s in streams], seed=502)
    # And the first records of the duplicated requests once more, after their end.
    records += [g.records[0] for g in dup]

    port = free_port()
    w = worker_factory(metrics_port=port)
    with Tail(kafka_bootstrap, topics["output"]) as tail:
        asyncio.run(publish(kafka_bootstrap, topics["input"], list(records), FIXED_TS_MS))
        outputs = tail.wait_done([s[0]["request_id"] for s in streams])
        want = oracle(list(records))
        # Every record is counted once: wait for the late duplicates too.
        counted = wait_counted(port, len(records), 30)
        outputs = tail.snapshot()
    # Duplicates produce nothing: not a single repeated output.
    assert verify(outputs, clean + dup).repeats == 0
    got = per_request(outputs)
    assert got == per_request(want.outputs)
    assert counted == want.results
    assert counted["duplicate"] == sum(len(g.records) for g in dup) + len(dup) + len(swap)
    for g in swap + drop:  # seq 2 is a gap: failed there, silent after, [DONE] at the end
        rid, last = g.request_id, len(g.records) - 1
        ok = head(got[rid], 2) if g in swap else head(got[rid], 1)
        assert all(kind in ("chunk", "done") for _, _, kind, _ in ok) and ok, rid
        assert describe(got[rid][len(ok) :]) == [(2, 0, SEQUENCE_GAP), (last, 0, "done")], rid
        assert json.loads(got[rid][len(ok)][3])["error"]["param"] == "seq"
    for g in nostart:
        rid, last = g.request_id, len(g.records) - 1
        assert describe(got[rid]) == [(1, 0, STATE_MISSING), (last, 0, "done")], rid
    assert w.stop() == 0, w.log_tail()


def test_malformed_records_mixed_with_good_ones(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
) -> None:
    limit = 2048
    good = make_generations(deepseek, 30, seed=601, prefix="good")
    mid = next(
        g for g in make_generations(deepseek, 10, seed=602, prefix="mid") if len(g.records) >= 4
    )
    big = make_generations(deepseek, 1, seed=603, prefix="big")[0]
    chunk0 = {"request_id": "km-1", "seq": 0, "generate_chunk": {"choices": [{"token_ids": [1]}]}}
    huge = {**big.records[0], "generate_chunk": {"choices": [{"token_ids": [9] * (limit // 2)}]}}
    dead: list[tuple[str, bytes]] = [
        ("nj-1", b"not json {"),
        ("nj-2", b"\xff\xfe\x00garbage"),
        ("nj-3", b""),
        ("nr-1", json.dumps({"seq": 0, "type": "end"}).encode()),  # no request_id
        ("nr-2", b"[1, 2, 3]"),
        ("se-1", json.dumps({"request_id": "se-1", "seq": "zero"}).encode()),
        ("se-2", json.dumps({"request_id": "se-2", "seq": 0, "type": "bogus"}).encode()),
        ("se-3", json.dumps({"request_id": "se-3", "seq": 0, "generate_chunk": 7}).encode()),
        ("se-4", json.dumps({"request_id": "se-4", "seq": 2**70, "type": "end"}).encode()),
        ("km-key", json.dumps(chunk0).encode()),  # key ≠ request_id
        (
            mid.request_id,
            json.dumps({**mid.records[1], "generate_chunk": {"choices": "x"}}).encode(),
        ),
    ]
    oversized: list[tuple[str, bytes]] = [
        (big.request_id, json.dumps(huge).encode()),
        ("big-2", b"x" * (limit + 1)),  # not even JSON: the key names the request
    ]
    bad_streams: list[list[Record]] = [[r] for r in dead[:-1] + oversized[1:]]
    bad_streams.append([mid.records[0], dead[-1], *mid.records[2:]])
    bad_streams.append([oversized[0], *big.records[1:]])
    records: list[Record] = list(interleave(good, seed=604))
    for i, stream in enumerate(bad_streams):  # spread through the good stream
        at = (i + 1) * len(records) // (len(bad_streams) + 1)
        records[at:at] = stream

    w = worker_factory("--max-record-bytes", str(limit))
    with Tail(kafka_bootstrap, topics["output"]) as tail:
        asyncio.run(publish(kafka_bootstrap, topics["input"], records, FIXED_TS_MS))
        ids = [g.request_id for g in [*good, mid, big]]
        outputs = tail.wait_done(ids)
        want = oracle(records, max_record_bytes=limit)
        outputs = tail.wait(lambda o: len(o) >= len(want.outputs), 30, "every output")
    verify(outputs, good)
    got = per_request(outputs)
    assert got == per_request(want.outputs)
    last_mid, last_big = len(mid.records) - 1, len(big.records) - 1
    assert {rid: describe(v) for rid, v in got.items() if not rid.startswith("good")} == {
        "se-1": [(-1, 0, INVALID_RECORD)],
        "se-2": [(0, 0, INVALID_RECORD)],
        "se-3": [(0, 0, INVALID_RECORD)],
        "se-4": [(-1, 0, INVALID_RECORD)],  # a seq beyond int64 is no seq
        "km-1": [(0, 0, INVALID_RECORD)],
        mid.request_id: [
            *describe(head(got[mid.request_id], 1)),
            (1, 0, INVALID_RECORD),
            (last_mid, 0, "done"),
        ],
        big.request_id: [(0, 0, INVALID_REQUEST), (last_big, 0, "done")],
        "big-2": [(-1, 0, INVALID_REQUEST)],
    }
    for rid in (big.request_id, "big-2"):
        assert "exceeds the record size limit (2048 bytes)" in got[rid][0][3].decode()
    # The dead-letter topic has exactly the undecodable records, verbatim.
    dlq = asyncio.run(read_all(kafka_bootstrap, topics["dlq"], lambda o: len(o) >= len(dead), 30))
    assert sorted(o.value for o in dlq) == sorted(v for _, v in dead)
    assert sorted((o.value, o.headers["derender-error"]) for o in dlq) == sorted(want.dead_letters)
    for o in dlq:
        assert o.headers["derender-source"].startswith(topics["input"] + "/")
    assert w.stop() == 0, w.log_tail()
