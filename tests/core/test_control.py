"""Early stop (`--control-topic`): a `control` output exactly when the worker
finished a request before its engine did, once, at that record, through the one loop.

The words of vLLM's stop-test stub tokenizer: 1 "one", 2 "two", 3 "three", 4 "number", 5 "<eos>".
"""

from __future__ import annotations

import json
import random
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from tests.support.examples import examples
from tests.support.helpers import Run, chunk, end, registry
from worker.adapters.state.memory_store import MemoryStore
from worker.constants import CONTROL, SKIPPED
from worker.core.model import Registry
from worker.wire.control import ControlRecord


def _run(words: Tokenizer, control: bool = True, **model: Any) -> Run:
    return Run(registry(words, **model), control=control)


def controls(run: Run) -> list[dict[str, Any]]:
    return [json.loads(o.value) for o in run.outputs if o.kind == CONTROL]


def test_a_stop_string_mid_stream_sends_one_control_record_at_its_record(
    words: Tokenizer,
) -> None:
    run = _run(words)
    run.feed(chunk("r", 0, [1, 2], chat_request={"stop": ["three"]}))
    assert controls(run) == []
    run.feed(chunk("r", 1, [3, 4]))  # "three" fires: the engine goes on
    assert controls(run) == [
        {
            "v": 1,
            "request_id": "r",
            "action": "abort",
            "reason": "stop",
            "error": None,
            "seq": 1,
            "output_tokens": 4,
        }
    ]
    # The control record is the record's last output, keyed and headed like the others.
    last = run.outputs[-1]
    assert last.kind == CONTROL and last.key == "r"
    assert dict(last.headers)["derender-kind"] == b"control"
    assert dict(last.headers)["derender-seq"] == b"1"
    # The tokens the engine sends meanwhile say nothing, cost no tokenizer work and are
    # counted as skipped; no second control record; the end closes the stream.
    before = len(run.outputs)
    run.feed(chunk("r", 2, [1, 2]), chunk("r", 3, [4], "length"))
    assert run.outputs[before:] == [] and run.last is not None
    assert run.last.result.results == {SKIPPED: 2}
    run.feed(end("r", 4))
    assert [o.kind for o in run.outputs[before:]] == ["done"]
    assert len(controls(run)) == 1
    (raw,) = [o.value for o in run.outputs if o.kind == CONTROL]
    assert msgspec.json.decode(raw, type=ControlRecord).seq == 1  # the wire type reads it


@pytest.mark.parametrize(
    ("records", "why"),
    [
        # The engine finished in the very record the stop string fired in.
        ([chunk("r", 0, [1, 2, 3, 4], "stop", chat_request={"stop": ["three"]})], "same record"),
        # The engine's own finish, no stop string.
        ([chunk("r", 0, [1, 2]), chunk("r", 1, [3], "length")], "engine length"),
        # An end: the engine's own end of the stream.
        ([chunk("r", 0, [1, 2]), end("r", 1)], "end"),
        # A whole response record.
        (
            [
                {
                    "request_id": "r",
                    "seq": 0,
                    "type": "response",
                    "generate_response": {
                        "choices": [{"index": 0, "token_ids": [1, 2, 3], "finish_reason": "stop"}]
                    },
                }
            ],
            "response",
        ),
    ],
)
def test_no_control_record_when_the_engine_ended_it(
    words: Tokenizer, records: list[dict[str, Any]], why: str
) -> None:
    run = _run(words)
    for rec in records:
        run.feed(rec)
    assert controls(run) == [], why


INVALID = "invalid_record"


@pytest.mark.parametrize(
    ("records", "code"),
    [
        ([chunk("r", 0, [1]), chunk("r", 2, [2])], "sequence_gap"),
        ([chunk("r", 3, [1])], "state_missing"),
        ([chunk("r", 0, [1]), {"request_id": "r", "seq": 1, "generate_chunk": 7}], INVALID),
        ([chunk("r", 0, [1], chat_request={"n": 0})], "invalid_request_error"),
    ],
)
def test_a_failure_of_a_live_request_sends_one_control_record_with_its_code(
    words: Tokenizer, records: list[dict[str, Any]], code: str
) -> None:
    run = _run(words)
    for rec in records:
        run.feed(rec)
    (c,) = controls(run)
    assert c["reason"] == "error" and c["error"] == code
    assert c["seq"] == records[-1]["seq"]
    run.feed(chunk("r", records[-1]["seq"] + 1, [1]))  # skipped: failed, no second one
    assert len(controls(run)) == 1


def test_an_output_over_the_bound_fails_the_request_and_stops_the_engine(
    words: Tokenizer,
) -> None:
    run = _run(words)
    run.reg.max_output_bytes = 300
    run.feed(chunk("r", 0, [1]))
    run.feed(chunk("r", 1, [4] * 60))
    (c,) = controls(run)
    assert (c["reason"], c["error"], c["seq"]) == ("error", "invalid_request_error", 1)


def test_a_corrupt_state_fails_the_request_and_stops_the_engine(words: Tokenizer) -> None:
    run = _run(words)
    run.feed(chunk("r", 0, [1]))
    run.plant("r", 0, b"\xc1 not msgpack")
    run.feed(chunk("r", 1, [2]))
    (c,) = controls(run)
    assert (c["reason"], c["error"]) == ("error", "state_corrupt")


def test_an_abort_of_a_live_request_stops_the_engine_and_one_after_the_end_does_not(
    words: Tokenizer,
) -> None:
    run = _run(words)
    run.feed(chunk("a", 0, [1, 2]), {"request_id": "a", "seq": 1, "type": "abort"})
    run.feed(chunk("b", 0, [1, 2]), end("b", 1), {"request_id": "b", "seq": 2, "type": "abort"})
    assert [(c["request_id"], c["reason"], c["seq"]) for c in controls(run)] == [("a", "abort", 1)]


def test_with_n_choices_the_record_that_stops_the_last_one_sends_it(words: Tokenizer) -> None:
    run = _run(words)
    first = chunk("r", 0, [1, 3], chat_request={"n": 2, "stop": ["three"]})
    run.feed(first)  # choice 0 stopped; choice 1 not begun
    assert controls(run) == []
    run.feed(chunk("r", 1, [2, 3, 4], index=1))
    (c,) = controls(run)
    assert (c["reason"], c["seq"], c["output_tokens"]) == ("stop", 1, 5)


def _records(rng: random.Random, rid: str) -> list[dict[str, Any]]:
    ids = [rng.choice([1, 2, 3, 4]) for _ in range(rng.randint(1, 12))]
    out, seq, i = [], 0, 0
    while i < len(ids):
        size = rng.randint(1, 3)
        rec = chunk(rid, seq, ids[i : i + size], "length" if i + size >= len(ids) else None)
        if seq == 0:
            rec["chat_request"] = {"stop": [rng.choice(["two", "three", "on"])]}
        out.append(rec)
        seq += 1
        i += size
    if rng.random() < 0.3:
        out.append({"request_id": rid, "seq": seq, "type": "abort"})
    return out


@settings(max_examples=examples(60), deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_control_adds_only_control_records_and_the_same_ones_in_any_batching(
    words: Tokenizer, seed: int
) -> None:
    """Property: with control on, the outputs are those with it off plus control records
    (at most one per request, none after its last output), the same in any batching."""
    rng = random.Random(seed)
    records = [r for i in range(4) for r in _records(rng, f"r{i}")]
    rng.shuffle(records)
    records.sort(key=lambda r: (r["request_id"], r["seq"]))  # per request in order
    rng.shuffle(records)
    order: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        order.setdefault(r["request_id"], []).append(r)
    stream = [r for rs in order.values() for r in sorted(rs, key=lambda r: r["seq"])]

    def outputs(reg: Registry, control: bool, cuts: list[int]) -> list[tuple[str, bytes]]:
        run = Run(reg, control=control)
        start = 0
        for size in cuts:
            if start < len(stream):
                run.feed(*stream[start : start + size])
            start += size
        return [(o.kind, o.value) for o in run.outputs]

    reg = registry(words)
    one = [1] * len(stream)
    off = outputs(reg, False, one)
    on = outputs(reg, True, one)
    assert [o for o in on if o[0] != CONTROL] == off
    batched = [rng.randint(1, 5) for _ in range(len(stream))]
    assert outputs(reg, True, batched) == on
    seen = [json.loads(v)["request_id"] for k, v in on if k == CONTROL]
    assert len(seen) == len(set(seen))


def test_chunks_held_back_after_a_stop_leave_a_gap_that_is_no_error(words: Tokenizer) -> None:
    """The engine side drops the chunks of a stopped request (`Publisher`): its `end`
    then comes with a later seq. Before the answer was over that gap fails the request;
    after it, the end just closes it."""
    run = _run(words)
    run.feed(chunk("r", 0, [1, 2, 3], chat_request={"stop": ["two"]}))
    run.feed(end("r", 9))
    assert [o.kind for o in run.outputs] == ["chunk", "chunk", CONTROL, "done"]
    live = _run(words)
    live.feed(chunk("r", 0, [1]), end("r", 9))
    assert [o.kind for o in live.outputs if o.kind == "error"] == ["error"]


def test_a_request_id_used_again_after_its_state_expired_is_a_new_request(
    words: Tokenizer,
) -> None:
    """A stopped request's state is a tombstone for the done TTL: later records of that
    id are skipped; once it expired, seq 0 under the same id opens a new request (with
    its own stop and its own control record)."""
    clock = [0.0]
    run = Run(registry(words), MemoryStore(60, 5, now=lambda: clock[0]), control=True)
    run.feed(chunk("r", 0, [1, 2, 3], chat_request={"stop": ["two"]}), end("r", 1))
    run.feed(chunk("r", 0, [1, 2, 3], chat_request={"stop": ["two"]}))  # a repeat: inside
    assert run.last is not None and run.last.result.results == {"duplicate": 1}
    clock[0] = 6.0  # past the done TTL
    run.feed(chunk("r", 0, [1, 2, 3], chat_request={"stop": ["two"]}))
    assert run.last is not None and run.last.result.results == {"ok": 1}
    assert [c["seq"] for c in controls(run)] == [0, 0]  # one per life of the id
