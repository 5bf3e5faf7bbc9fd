"""The output record as a consumer sees it, and `Seen`: which outputs are repeats (no broker)."""

from __future__ import annotations

import pytest

from worker.constants import CHUNK, DONE_KIND, ERROR, H_KIND, H_PART, H_REQUEST_ID, H_SEQ, RESPONSE
from worker.wire.output import Output, Seen, from_record


def out(rid: str, seq: int, part: int, kind: str = CHUNK) -> Output:
    value = b"[DONE]" if kind == DONE_KIND else b'{"n": "%d.%d"}' % (seq, part)
    return Output(rid, seq, part, kind, value)


def test_an_output_is_new_once_and_a_redelivered_suffix_is_dropped() -> None:
    seen = Seen()
    first = [out("a", 0, 0), out("a", 0, 1), out("a", 1, 0), out("a", 2, 0)]
    assert [seen.first(o) for o in first] == [True] * 4
    # A redelivery repeats the batch's outputs from some point on, then goes further.
    again = [out("a", 1, 0), out("a", 2, 0), out("a", 3, 0), out("a", 3, 1, DONE_KIND)]
    assert [seen.first(o) for o in again] == [False, False, True, True]
    assert not seen.first(out("a", 3, 1, DONE_KIND))


def test_requests_are_apart() -> None:
    seen = Seen()
    assert seen.first(out("a", 5, 0))
    assert seen.first(out("b", 0, 0))  # below a's place, but b's first
    assert not seen.first(out("b", 0, 0))


def test_an_error_in_a_refused_outputs_place_comes_through_once() -> None:
    seen = Seen()
    for o in (out("a", 0, 0), out("a", 1, 1), out("a", 2, 0), out("a", 2, 1, DONE_KIND)):
        assert seen.first(o)
    # (1, 0) was refused by the broker; its error is written after the rest of the batch.
    assert seen.first(out("a", 1, 0, ERROR))
    assert not seen.first(out("a", 1, 0, ERROR))
    # A chunk below the highest place is a repeat, whatever it says.
    assert not seen.first(out("a", 1, 0))


def test_errors_of_unreadable_seqs_come_through_once() -> None:
    seen = Seen()
    assert seen.first(out("a", 0, 0))
    assert seen.first(out("a", -1, 0, ERROR))
    assert not seen.first(out("a", -1, 0, ERROR))


def test_memory_is_bounded_and_the_least_recently_active_goes_first() -> None:
    seen = Seen(remember=2)
    seen.first(out("a", 0, 0))
    seen.first(out("b", 0, 0))
    seen.first(out("a", 1, 0))  # a is now the most recent
    seen.first(out("c", 0, 0))
    assert len(seen) == 2 and "a" in seen and "c" in seen and "b" not in seen
    # What the bound costs: b's repeat, after b was forgotten, looks new.
    assert seen.first(out("b", 0, 0))
    seen.forget("b")
    assert "b" not in seen and len(seen) == 1


def test_remember_must_be_positive() -> None:
    with pytest.raises(ValueError, match="remember must be at least 1"):
        Seen(remember=0)


def test_from_record_reads_the_identity_headers() -> None:
    headers = [
        (H_REQUEST_ID, b"chatcmpl-1"),
        (H_SEQ, b"4"),
        (H_PART, b"1"),
        (H_KIND, b"done"),
        ("traceparent", b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
    ]
    o = from_record(b"chatcmpl-1", b"[DONE]", headers, partition=2, offset=17)
    assert o is not None
    assert (o.request_id, o.seq, o.part, o.kind, o.partition, o.offset) == (
        "chatcmpl-1", 4, 1, "done", 2, 17,
    )  # fmt: skip
    assert list(o.headers) == [H_REQUEST_ID, H_SEQ, H_PART, H_KIND, "traceparent"]
    assert o.done and o.end and o.json() is None
    assert o.sse() == b"data: [DONE]\n\n"


def test_a_record_without_the_identity_headers_is_no_output() -> None:
    assert from_record(b"x", b"{}", []) is None
    assert from_record(b"x", b"{}", [(H_SEQ, b"one"), (H_PART, b"0")]) is None
    # The key stands in for a missing request id header.
    o = from_record(b"x", b"{}", [(H_SEQ, b"0"), (H_PART, b"0")])
    assert o is not None and o.request_id == "x" and o.kind == CHUNK


@pytest.mark.parametrize(
    ("kind", "end", "done"),
    [
        (CHUNK, False, False),
        (RESPONSE, True, False),
        (ERROR, False, False),
        (DONE_KIND, True, True),
    ],
)
def test_which_kinds_end_a_request(kind: str, end: bool, done: bool) -> None:
    o = out("a", 0, 0, kind)
    assert (o.end, o.done) == (end, done)


def test_an_output_parses_and_hashes() -> None:
    o = out("a", 3, 2)
    assert o.json() == {"n": "3.2"}
    assert o.sse() == b'data: {"n": "3.2"}\n\n'
    assert len({o, out("a", 3, 2)}) == 1
