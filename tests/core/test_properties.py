"""Properties of the whole core over random chunkings, through the real batch pipeline.

The oracle is the one-shot decode: for every chunking, interleaving and batching, the
concatenated deltas equal it (cut at the first stop string when one is set), the
non-streaming response says the same, and replays are byte-identical.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from tests.core.test_detokenize import PIECES, split
from tests.support.examples import examples
from tests.support.helpers import Run, chunk, end, registry

texts = st.lists(st.sampled_from(PIECES), min_size=1, max_size=20).map("".join)
_settings = settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def cuts(n: int) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(1, max(n - 1, 1)), max_size=8).map(lambda c: sorted(set(c)))


def records_for(
    rid: str, index: int, ids: list[int], chunk_cuts: list[int]
) -> list[tuple[int, list[int], str | None]]:
    parts = split(ids, [c for c in chunk_cuts if c < len(ids)])
    return [(index, p, "stop" if i == len(parts) - 1 else None) for i, p in enumerate(parts)]


@pytest.fixture(params=["deepseek", "llama_sp"])
def tok(request: pytest.FixtureRequest) -> Tokenizer:
    return request.getfixturevalue(request.param)


@_settings
@given(a=texts, b=texts, data=st.data(), stop=st.sampled_from([None, "e", "語", " w", "\n\n"]))
def test_interleaved_choices_concatenate_to_one_shot(
    tok: Tokenizer, a: str, b: str, data: st.DataObject, stop: str | None
) -> None:
    ids = [tok.encode(t, add_special_tokens=False).ids for t in (a, b)]
    streams = [records_for("r", i, ids[i], data.draw(cuts(len(ids[i])))) for i in (0, 1)]
    # A random interleaving of the two choices' records, order kept within each.
    order = data.draw(st.permutations([0] * len(streams[0]) + [1] * len(streams[1])))
    pos = [0, 0]
    recs: list[dict[str, Any]] = []
    for which in order:
        index, part, finish = streams[which][pos[which]]
        pos[which] += 1
        recs.append(chunk("r", len(recs), part, finish, index=index))
    recs[0]["chat_request"] = {"n": 2, "stop": [stop] if stop else None}
    recs.append(end("r", len(recs)))
    batch = data.draw(st.integers(1, 4))
    run = Run(registry(tok))
    for i in range(0, len(recs), batch):
        run.feed(*recs[i : i + batch])
    for index in (0, 1):
        expected = tok.decode(ids[index])
        at = expected.find(stop) if stop else -1
        if at >= 0:
            expected = expected[:at]
        assert run.text(index=index) == expected
    assert run.values().count("[DONE]") == 1
    finals = [c["index"] for v in run.values("chunk") for c in v["choices"] if c["finish_reason"]]
    assert sorted(finals) == [0, 1]  # each choice finishes exactly once


@_settings
@given(text=texts, data=st.data())
def test_whole_response_says_what_the_stream_says(
    tok: Tokenizer, text: str, data: st.DataObject
) -> None:
    ids = tok.encode(text, add_special_tokens=False).ids
    req = {"stop": [data.draw(st.sampled_from(["x", "語", "  "]))]}
    stream = Run(registry(tok))
    for seq, (_, part, finish) in enumerate(records_for("s", 0, ids, data.draw(cuts(len(ids))))):
        rec = chunk("s", seq, part, finish)
        if seq == 0:
            rec["chat_request"] = req
        stream.feed(rec)
    whole = Run(registry(tok))
    whole.feed(
        {
            "request_id": "w",
            "seq": 0,
            "type": "response",
            "chat_request": req,
            "generate_response": {"choices": [{"index": 0, "token_ids": ids}]},
        }
    )
    (resp,) = whole.values("response")
    choice = resp["choices"][0]
    finals = [c for v in stream.values("chunk") for c in v["choices"] if c["finish_reason"]]
    assert choice["message"]["content"] == stream.text()
    assert (choice["finish_reason"], choice["stop_reason"]) == (
        finals[0]["finish_reason"],
        finals[0]["stop_reason"],
    )
    assert resp["usage"]["completion_tokens"] == len(ids)


@_settings
@given(text=texts, data=st.data())
def test_redelivered_batches_change_nothing(tok: Tokenizer, text: str, data: st.DataObject) -> None:
    """At-least-once: feeding any prefix of the records again yields no new output."""
    ids = tok.encode(text, add_special_tokens=False).ids
    recs = [
        chunk("r", seq, part, finish)
        for seq, (_, part, finish) in enumerate(records_for("r", 0, ids, data.draw(cuts(len(ids)))))
    ]
    recs.append(end("r", len(recs)))
    run = Run(registry(tok))
    for i, rec in enumerate(recs):
        run.feed(rec)
        again = data.draw(st.integers(0, i + 1))
        assert run.feed(*recs[:again]) == []
    once = Run(registry(tok))
    once.feed(*recs)
    assert [json.loads(o.value) if o.kind != "done" else None for o in run.outputs] == [
        json.loads(o.value) if o.kind != "done" else None for o in once.outputs
    ]
