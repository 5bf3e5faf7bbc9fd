"""`core.step` is total: every way a record can go wrong comes back as a Step, never raised.

These call the core directly (no pipeline, no store): a record in, the Step out, with
the outputs, the failed state and the blob the shell would write.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from tokenizers import Tokenizer

from tests.support.helpers import chunk, end
from worker.core import (
    CorruptState,
    Registry,
    RequestState,
    Step,
    decode_state,
    encode_state,
    load_state,
    step,
    step_invalid,
)
from worker.core import derender as core_derender
from worker.core.errors import INTERNAL_ERROR, INVALID_RECORD, INVALID_REQUEST, STATE_CORRUPT
from worker.core.model import DEFAULT_MAX_OUTPUT_BYTES, Model
from worker.core.state import ACTIVE, DONE, FAILED
from worker.wire.inbound import ChunkRecord, decode_record

CREATED = 1767225600


@pytest.fixture
def reg(deepseek: Tokenizer) -> Registry:
    return Registry({"m": Model(name="m", tokenizer=deepseek)}, default="m")


def record(value: dict[str, Any]) -> ChunkRecord:
    return decode_record(json.dumps(value).encode(), value["request_id"])


def ids_of(tok: Tokenizer, text: str) -> list[int]:
    return list(tok.encode(text, add_special_tokens=False).ids)


def opened(reg: Registry, tok: Tokenizer, api: str = "chat") -> RequestState:
    """A live request after its seq-0 record."""
    st = step(None, record(chunk("r", 0, ids_of(tok, "Hi"), created=CREATED, api=api)), reg)
    assert st.result == "ok" and st.state is not None
    return st.state


def error_of(st: Step) -> dict[str, Any]:
    assert st.outputs[0].kind == "error"
    body: dict[str, Any] = json.loads(st.outputs[0].value)["error"]
    return body


def assert_stored(st: Step) -> None:
    """The blob is the state as the store will hold it (the shell writes it as is)."""
    assert st.state is not None and st.blob is not None
    assert st.blob == encode_state(st.state)
    assert decode_state(st.blob) == st.state


# -- the blob ---------------------------------------------------------------------------


def test_a_step_carries_the_blob_of_the_state_to_store(reg: Registry, deepseek: Tokenizer) -> None:
    st = step(None, record(chunk("r", 0, ids_of(deepseek, "Hi"))), reg)
    assert st.result == "ok"
    assert_stored(st)
    assert st.exception is None


def test_a_duplicate_has_nothing_to_store(reg: Registry, deepseek: Tokenizer) -> None:
    state = opened(reg, deepseek)
    st = step(state, record(chunk("r", 0, ids_of(deepseek, "Hi"))), reg)
    assert (st.result, st.outputs, st.blob) == ("duplicate", [], None)


def test_a_skipped_record_stores_its_seq(reg: Registry, deepseek: Tokenizer) -> None:
    failed = RequestState(seq=3, status=FAILED)
    st = step(failed, record(end("r", 4)), reg)
    assert st.result == "skipped"
    assert [o.kind for o in st.outputs] == ["done"]
    assert_stored(st)
    assert st.state is not None and (st.state.seq, st.state.status) == (4, DONE)


# -- internal error ---------------------------------------------------------------------


def test_an_exception_inside_the_core_fails_the_request_and_is_handed_back(
    reg: Registry, deepseek: Tokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = opened(reg, deepseek)
    boom = RuntimeError("boom")

    def broken(*args: Any) -> None:
        raise boom

    monkeypatch.setattr(core_derender, "on_chunk", broken)
    st = step(state, record(chunk("r", 1, ids_of(deepseek, " there"))), reg)
    assert st.result == "error"
    assert error_of(st) == {
        "message": "internal error: RuntimeError: boom",
        "type": "invalid_request_error",
        "param": None,
        "code": INTERNAL_ERROR,
    }
    assert len(st.outputs) == 1
    assert st.exception is boom  # for the caller to log, with its traceback
    assert st.state is not None
    assert (st.state.seq, st.state.status) == (1, FAILED)
    assert (st.state.api, st.state.model, st.state.created) == ("chat", "m", CREATED)
    assert_stored(st)


def test_an_internal_error_on_end_still_closes_the_stream(
    reg: Registry, deepseek: Tokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = opened(reg, deepseek)

    def broken(*args: Any, **kwargs: Any) -> None:
        raise KeyError("x")

    monkeypatch.setattr(core_derender, "on_end", broken)
    st = step(state, record(end("r", 1)), reg)
    assert [o.kind for o in st.outputs] == ["error", "done"]
    assert error_of(st)["code"] == INTERNAL_ERROR
    assert st.state is not None and st.state.status == DONE
    assert isinstance(st.exception, KeyError)


def test_an_internal_error_message_that_json_cannot_carry_is_escaped(
    reg: Registry, deepseek: Tokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any) -> None:
        raise ValueError("bad \ud800 text")  # a lone surrogate

    monkeypatch.setattr(core_derender, "on_chunk", broken)
    st = step(None, record(chunk("r", 0, [1])), reg)
    assert error_of(st)["message"] == "internal error: ValueError: bad \\ud800 text"


# -- unstorable state -------------------------------------------------------------------


def test_a_state_msgpack_cannot_hold_fails_the_request_with_a_bare_state(
    reg: Registry, deepseek: Tokenizer
) -> None:
    """msgspec's JSON decoder takes `created: 2**70`; msgpack holds at most 64 bits."""
    st = step(None, record(chunk("r", 0, ids_of(deepseek, "Hi"), created=2**70)), reg)
    assert st.result == "error"
    err = error_of(st)
    assert err["code"] == INVALID_REQUEST
    assert err["message"].startswith("a number is out of range: ")
    # The failed state drops api, model and created: created is the number that did not fit.
    assert st.state == RequestState(seq=0, status=FAILED)
    assert_stored(st)
    assert st.exception is None


def test_an_unstorable_state_at_end_still_closes_the_stream(reg: Registry) -> None:
    st = step(None, record({**end("r", 0), "created": -(2**70)}), reg)
    assert [o.kind for o in st.outputs] == ["error", "done"]
    assert st.state == RequestState(seq=0, status=DONE)
    assert_stored(st)


def test_a_seq_msgpack_cannot_hold_leaves_nothing_to_store(reg: Registry) -> None:
    """The shell bounds seq (MAX_SEQ) before the core sees it; the core still answers."""
    st = step(None, record(chunk("r", 2**70, [1])), reg)
    assert st.result == "error"
    assert error_of(st)["message"].startswith("a number is out of range: ")
    assert (st.state, st.blob) == (None, None)


# -- corrupt stored state ---------------------------------------------------------------


def test_load_state_gives_the_verdict_step_takes(reg: Registry, deepseek: Tokenizer) -> None:
    state = opened(reg, deepseek)
    assert load_state(None) is None
    assert load_state(encode_state(state)) == state
    verdict = load_state(b"\xc1 not msgpack")
    assert isinstance(verdict, CorruptState) and verdict.reason


def test_a_corrupt_stored_state_fails_the_request(reg: Registry, deepseek: Tokenizer) -> None:
    rec = record(chunk("r", 3, ids_of(deepseek, "Hi")))
    st = step(CorruptState("truncated"), rec, reg)
    assert st.result == "error"
    assert error_of(st) == {
        "message": "request state could not be decoded",
        "type": "invalid_request_error",
        "param": None,
        "code": STATE_CORRUPT,
    }
    assert st.state == RequestState(seq=3, status=FAILED)
    assert_stored(st)
    # The older spelling, a flag beside no state, gives the same Step.
    assert step(None, rec, reg, state_corrupt=True) == st


# -- oversized output -------------------------------------------------------------------


def test_the_default_output_bound_is_under_kafkas_default_message_size() -> None:
    assert DEFAULT_MAX_OUTPUT_BYTES == 1_000_000 < 1_048_576
    assert Registry({}, default="m").max_output_bytes == DEFAULT_MAX_OUTPUT_BYTES


def test_an_output_over_max_output_bytes_fails_the_request(deepseek: Tokenizer) -> None:
    rec = record(chunk("r", 0, ids_of(deepseek, "Hello world " * 20), created=CREATED))
    model = Model(name="m", tokenizer=deepseek)
    fits = step(None, rec, Registry({"m": model}, default="m", max_output_bytes=10_000))
    assert fits.result == "ok"
    size = len(fits.outputs[0].value)

    st = step(None, rec, Registry({"m": model}, default="m", max_output_bytes=size - 1))
    assert st.result == "error"
    assert error_of(st) == {
        "message": f"chunk output of {size} bytes exceeds the output size limit "
        f"(max_output_bytes = {size - 1} bytes)",
        "type": "invalid_request_error",
        "param": None,
        "code": INVALID_REQUEST,
    }
    assert len(st.outputs) == 1  # the oversized output is not sent
    assert st.state is not None
    assert (st.state.seq, st.state.status, st.state.created) == (0, FAILED, CREATED)
    assert_stored(st)


def test_an_oversized_whole_response_fails_the_request(deepseek: Tokenizer) -> None:
    ids = ids_of(deepseek, "word " * 50)
    rec = record(
        {
            "request_id": "r",
            "seq": 0,
            "type": "response",
            "generate_response": {
                "request_id": "r",
                "choices": [{"index": 0, "token_ids": ids, "finish_reason": "length"}],
            },
        }
    )
    reg = Registry({"m": Model(name="m", tokenizer=deepseek)}, default="m", max_output_bytes=100)
    st = step(None, rec, reg)
    assert st.result == "error"
    assert error_of(st)["message"].startswith("response output of ")
    assert "max_output_bytes = 100 bytes" in error_of(st)["message"]
    assert st.state is not None and st.state.status == FAILED


# -- records the shell could not read: the error code is the caller's -------------------


def test_step_invalid_takes_the_error_code(reg: Registry, deepseek: Tokenizer) -> None:
    state = opened(reg, deepseek)
    reason = "record of 9000000 bytes exceeds the record size limit (8388608 bytes)"
    st = step_invalid(state, "r", 1, reason, INVALID_REQUEST)
    assert st.result == "error"
    assert error_of(st) == {
        "message": reason,
        "type": "invalid_request_error",
        "param": None,
        "code": INVALID_REQUEST,
    }
    assert st.state is not None
    assert (st.state.seq, st.state.status, st.state.model) == (1, FAILED, "m")
    assert_stored(st)


def test_step_invalid_defaults_to_invalid_record(reg: Registry, deepseek: Tokenizer) -> None:
    state = opened(reg, deepseek)
    st = step_invalid(state, "r", 1, "invalid ChunkRecord: Expected `int`")
    assert error_of(st)["code"] == INVALID_RECORD


def test_step_invalid_without_a_seq_reports_and_leaves_the_state(
    reg: Registry, deepseek: Tokenizer
) -> None:
    state = opened(reg, deepseek)
    before = msgspec.structs.replace(state)
    st = step_invalid(state, "r", None, "invalid ChunkRecord: seq", INVALID_RECORD)
    assert st.result == "error" and len(st.outputs) == 1
    assert st.state == before and st.state.status == ACTIVE
    assert_stored(st)
    assert step_invalid(None, "r", None, "x").state is None


def test_step_invalid_sequences_like_step(reg: Registry, deepseek: Tokenizer) -> None:
    state = opened(reg, deepseek)
    assert step_invalid(state, "r", 0, "x").result == "duplicate"
    failed = RequestState(seq=2, status=FAILED)
    st = step_invalid(failed, "r", 3, "x")
    assert (st.result, st.outputs) == ("skipped", [])
    assert st.state is not None and st.state.seq == 3
    assert_stored(st)
    # A corrupt stored state is no state to step_invalid.
    assert step_invalid(CorruptState(), "r", 1, "x").state == RequestState(seq=1, status=FAILED)
