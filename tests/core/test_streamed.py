"""`stream.streamed`, the streamed record in one frame, says and does what `on_chunk` does.

Every chunk record of a request is fed both ways, from two copies of the state before
it: where `streamed` takes the record, its outputs and the state it leaves must equal
`on_chunk`'s byte for byte; where it declines (None), it must leave the state untouched
(the record then takes `on_chunk`). The request itself runs on through `derender.step`,
so the states are the real ones: parsers on and off, plain text, markers, tool calls,
multi-byte characters cut across records, and the options that make it decline.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from tokenizers import Tokenizer

from tests.core.parsers.shared.samples import GOLDEN, render_deepseek_v4, tools_for
from tests.support.helpers import registry
from worker.core import derender
from worker.core.derender import step
from worker.core.model import Registry
from worker.core.records.stream import on_chunk, streamed
from worker.core.state import ACTIVE, RequestState, decode_state, encode_state
from worker.wire.inbound import ChunkRecord, decode_record

TEXTS = {
    "golden": render_deepseek_v4(GOLDEN),
    "plain": "the model thinks a while about the answer</think>and then it says the answer",
    "marks": "a < b and 😀 東京 <b>x</b> <｜DSML｜ \n\n</think>🎉 then <｜end▁of▁sentence｜> done ",
}

# Request options, and whether the streamed path must take some records under them
# (True), none (False), or may (None: with `n: 2`, a choice's records before the other
# choice's first one).
OPTIONS: dict[str, tuple[dict[str, Any], bool | None]] = {
    "none": ({}, True),
    "usage": ({"stream_options": {"include_usage": True}}, True),
    "tools": ({"tools": tools_for(GOLDEN)}, True),
    "no_reasoning": ({"include_reasoning": False}, True),
    "specials_shown": ({"skip_special_tokens": False}, True),
    "logprobs_asked": ({"logprobs": True, "top_logprobs": 1}, True),
    "continuous_usage": (
        {"stream_options": {"include_usage": True, "continuous_usage_stats": True}},
        False,
    ),
    "stop": ({"stop": ["answer"]}, False),
    "n2": ({"n": 2}, None),
    "completion": ({"api": "completion"}, False),  # (the record's api, not a request field)
}


@pytest.fixture(scope="module")
def regs(deepseek: Tokenizer) -> dict[str, Registry]:
    on = registry(
        deepseek, name="deepseek-v4", reasoning_parser="deepseek_v4", tool_parser="deepseek_v4"
    )
    return {"on": on, "off": registry(deepseek, name="deepseek-v4")}


# Request ids JSON escapes; a request's id may come back with another `created` (the
# chunk's JSON around its delta is remembered by request id: render.chat_head).
RIDS = ["r", 'a "quoted" \\ </script> 東京 \u2028 \x01 id']


def _records(
    tok: Tokenizer, text: str, request: dict[str, Any], rng: random.Random, most: int
) -> list[dict[str, Any]]:
    """The request's chunk records: 1..`most` ids each, now and then engine metrics or
    a `stop_reason`, the last of each choice finishing (with `n: 2` the two interleave)."""
    ids = tok.encode(text, add_special_tokens=False).ids
    n = request.get("n", 1)
    cuts: list[tuple[int, list[int], bool]] = []
    for index in range(n):
        i = 0
        while i < len(ids):
            k = rng.randint(1, most)
            cuts.append((index, ids[i : i + k], i + k >= len(ids)))
            i += k
    if n > 1:  # interleaved, each choice in order
        by = [[c for c in cuts if c[0] == index] for index in range(n)]
        cuts = []
        while any(by):
            cuts.append(rng.choice([q for q in by if q]).pop(0))
    rid = rng.choice(RIDS)
    recs = []
    for seq, (index, chunk_ids, last) in enumerate(cuts):
        choice = {"index": index, "token_ids": chunk_ids, "finish_reason": "stop" if last else None}
        gen: dict[str, Any] = {"choices": [choice]}
        if rng.random() < 0.05:
            gen["metrics"] = {"num_generation_tokens": seq}
        if rng.random() < 0.05:  # (the schema lets any chunk carry one: passed through)
            choice["stop_reason"] = 7
        rec: dict[str, Any] = {"request_id": rid, "seq": seq, "generate_chunk": gen}
        if seq == 0:
            if request.get("api") == "completion":
                rec["api"], rec["completion_request"] = "completion", {}
            else:
                rec["chat_request"] = request
            rec["created"] = rng.choice([1, 1_700_000_000, 2**40])
        recs.append(rec)
    return recs


def _copy(state: RequestState) -> RequestState:
    return decode_state(encode_state(state))


def _both_ways(reg: Registry, recs: list[dict[str, Any]]) -> int:
    """Feed the records through `step`, each chunk also both ways; how many records
    `streamed` took."""
    taken = 0
    state: RequestState | None = None
    for value in recs:
        rec: ChunkRecord = decode_record(json.dumps(value).encode(), None)
        if state is not None and state.status == ACTIVE and rec.seq == state.seq + 1:
            assert rec.generate_chunk is not None
            tabs = derender._tables(state, None, reg)
            model = reg.models[state.model]
            a, b = _copy(state), _copy(state)
            a.seq = b.seq = rec.seq
            before = encode_state(a)
            got = streamed(a, rec.request_id, rec.generate_chunk, model, tabs)
            if got is None:
                assert encode_state(a) == before, f"declined seq {rec.seq} but changed the state"
            else:
                taken += 1
                want = on_chunk(b, rec.request_id, rec.generate_chunk, model, tabs)
                assert got == want, f"seq {rec.seq}"
                assert encode_state(a) == encode_state(b), f"seq {rec.seq}"
        st = step(state, rec, reg)
        assert st.error is None, st.outputs
        assert isinstance(st.state, RequestState)
        state = st.state
    return taken


@pytest.mark.parametrize("parsers", ["on", "off"])
@pytest.mark.parametrize("option", sorted(OPTIONS))
@pytest.mark.parametrize("text", sorted(TEXTS))
def test_streamed_says_and_does_what_on_chunk_does(
    regs: dict[str, Registry], deepseek: Tokenizer, parsers: str, option: str, text: str
) -> None:
    request, takes = OPTIONS[option]
    rng = random.Random(f"{parsers}/{option}/{text}")
    taken = 0
    for most in (1, 1, 3):  # one id per record (the streamed case), and up to three
        recs = _records(deepseek, TEXTS[text], request, rng, most)
        taken += _both_ways(regs[parsers], recs)
    if takes:
        assert taken >= 10  # the path is there to be compared
    elif takes is not None:
        assert taken == 0  # options that need the general path never take this one


@pytest.mark.parametrize("most", [1, 8])
def test_nearly_every_record_of_a_plain_stream_takes_the_streamed_path(
    regs: dict[str, Registry], deepseek: Tokenizer, most: int
) -> None:
    recs = _records(deepseek, TEXTS["plain"] + " and so on" * 20, {}, random.Random(0), most)
    assert len(recs) >= 10
    for r in recs:  # (no metrics, no stop reason: plain streamed records)
        r["generate_chunk"].pop("metrics", None)
        r["generate_chunk"]["choices"][0].pop("stop_reason", None)
    for reg in regs.values():
        _both_ways(reg, recs)  # (the detokenizer learns the ids' texts: the general path)
        # Then all but the opening record and the finishing one.
        assert _both_ways(reg, recs) == len(recs) - 2
