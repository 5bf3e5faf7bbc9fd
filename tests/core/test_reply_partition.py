"""`reply_partition`: read from the seq-0 record, kept in the request's state through every
later record and every failure, so that each output of the request can be routed to it."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from tokenizers import Tokenizer

from tests.support.helpers import chunk, end
from worker.core import CorruptState, Registry, RequestState, decode_state, encode_state, step
from worker.core.model import Model
from worker.core.state import DONE, FAILED
from worker.wire.inbound import BadRecord, ChunkRecord, decode_record


@pytest.fixture
def reg(deepseek: Tokenizer) -> Registry:
    return Registry({"m": Model(name="m", tokenizer=deepseek)}, default="m")


def record(value: dict[str, Any]) -> ChunkRecord:
    return decode_record(json.dumps(value).encode(), value["request_id"])


def ids(tok: Tokenizer, text: str) -> list[int]:
    return list(tok.encode(text, add_special_tokens=False).ids)


def code(outputs: list[Any]) -> str:
    body: dict[str, Any] = json.loads(outputs[0].value)["error"]
    return str(body["code"])


def test_the_seq_0_record_names_it_and_the_state_keeps_it(
    reg: Registry, deepseek: Tokenizer
) -> None:
    st = step(None, record(chunk("r", 0, ids(deepseek, "Hi"), reply_partition=3)), reg)
    assert st.result == "ok" and st.state is not None and st.blob is not None
    assert st.state.reply_partition == 3
    state = decode_state(st.blob)  # through the store, as the next batch loads it
    assert state.reply_partition == 3
    # A later copy is ignored, as with the rest of the request's context.
    st = step(state, record(chunk("r", 1, ids(deepseek, " there"), reply_partition=5)), reg)
    assert st.result == "ok" and st.state is not None
    assert st.state.reply_partition == 3
    st = step(st.state, record(end("r", 2)), reg)
    assert st.state is not None and st.state.status == DONE and st.state.reply_partition == 3


def test_without_it_the_state_names_none(reg: Registry, deepseek: Tokenizer) -> None:
    st = step(None, record(chunk("r", 0, ids(deepseek, "Hi"))), reg)
    assert st.state is not None and st.state.reply_partition is None
    # (and a later record cannot add one: the outputs of a request stay on one partition)
    st = step(st.state, record(chunk("r", 1, ids(deepseek, "!"), reply_partition=1)), reg)
    assert st.state is not None and st.state.reply_partition is None


def test_a_state_stored_before_the_field_still_decodes(reg: Registry, deepseek: Tokenizer) -> None:
    st = step(None, record(chunk("r", 0, ids(deepseek, "Hi"))), reg)
    assert st.blob is not None
    fields = msgspec.msgpack.decode(st.blob)
    assert isinstance(fields, list) and fields[-1] is None  # the new field, at the end
    older = msgspec.msgpack.encode(fields[:-1])  # what a worker before it wrote
    state = decode_state(older)
    assert state == st.state and state.reply_partition is None


@pytest.mark.parametrize("bad", [-1, 2**31, "2", 1.5, True])
def test_a_value_that_is_no_partition_is_a_bad_record(bad: Any) -> None:
    value = json.dumps({"request_id": "r", "seq": 0, "reply_partition": bad}).encode()
    with pytest.raises(BadRecord, match=r"reply_partition"):
        decode_record(value, "r")


def test_the_largest_partition_number_is_storable(reg: Registry, deepseek: Tokenizer) -> None:
    st = step(None, record(chunk("r", 0, ids(deepseek, "Hi"), reply_partition=2**31 - 1)), reg)
    assert st.blob is not None and decode_state(st.blob).reply_partition == 2**31 - 1


# -- failures keep it: the error, and the [DONE] of a failed stream, go where the rest went


def test_a_request_failing_at_seq_0_keeps_the_records_partition(reg: Registry) -> None:
    st = step(
        None, record({"request_id": "r", "seq": 0, "model": "nope", "reply_partition": 4}), reg
    )
    assert code(st.outputs) == "model_not_found"
    assert st.state is not None and st.state.status == FAILED and st.state.reply_partition == 4
    assert st.blob is not None and decode_state(st.blob).reply_partition == 4
    # Its end still answers [DONE], from the failed state: the same partition.
    st = step(st.state, record(end("r", 1)), reg)
    assert [o.kind for o in st.outputs] == ["done"]
    assert st.state is not None and st.state.reply_partition == 4


def test_a_live_request_failing_later_keeps_its_partition(
    reg: Registry, deepseek: Tokenizer
) -> None:
    st = step(None, record(chunk("r", 0, ids(deepseek, "Hi"), reply_partition=6)), reg)
    assert st.state is not None
    gap = step(st.state, record(chunk("r", 5, ids(deepseek, "x"), reply_partition=0)), reg)
    assert code(gap.outputs) == "sequence_gap"
    assert gap.state is not None and gap.state.reply_partition == 6
    st = step(None, record(chunk("q", 0, ids(deepseek, "Hi"), reply_partition=6)), reg)
    assert st.state is not None
    bound = step(st.state, record(chunk("q", 1, [10**9], reply_partition=0)), reg)  # (no id)
    assert code(bound.outputs) == "invalid_request_error"
    assert bound.state is not None and bound.state.status == FAILED
    assert bound.state.reply_partition == 6


def test_an_unstorable_state_fails_with_its_partition(reg: Registry, deepseek: Tokenizer) -> None:
    # `created` past 64 bits: the state cannot be stored, the request fails bare.
    rec = record(chunk("r", 0, ids(deepseek, "Hi"), created=2**70, reply_partition=2))
    st = step(None, rec, reg)
    assert code(st.outputs) == "invalid_request_error"
    assert st.state is not None and st.state.created == 0 and st.state.reply_partition == 2


@pytest.mark.parametrize("state", [None, CorruptState("bad blob")])
def test_no_state_to_read_it_from_uses_the_records_own(
    reg: Registry, deepseek: Tokenizer, state: CorruptState | None
) -> None:
    """A record whose request has no usable state (expired, never opened, corrupt) has its
    error written where the record itself asks, if it names a partition."""
    st = step(state, record(chunk("r", 3, ids(deepseek, "x"), reply_partition=1)), reg)
    assert code(st.outputs) in {"state_missing", "state_corrupt"}
    assert st.state is not None and st.state.reply_partition == 1
    st = step(state, record(chunk("r", 3, ids(deepseek, "x"))), reg)
    assert st.state is not None and st.state.reply_partition is None


def test_a_state_naming_a_partition_is_no_larger(reg: Registry, deepseek: Tokenizer) -> None:
    plain = step(None, record(chunk("r", 0, ids(deepseek, "Hi"))), reg)
    named = step(None, record(chunk("r", 0, ids(deepseek, "Hi"), reply_partition=7)), reg)
    assert plain.blob is not None and named.blob is not None
    assert len(named.blob) == len(plain.blob)  # (a small int is one msgpack byte, as nil)
    assert isinstance(named.state, RequestState)
    assert encode_state(named.state) == named.blob
