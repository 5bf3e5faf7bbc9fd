"""Logprob properties over the two real tokenizers, random texts and random chunkings.

The oracle is the one-shot decode with special tokens kept (logprob tokens show them):
the sampled tokens' bytes concatenate to its UTF-8, whatever the chunking, the shape
or the prompt seed; and the streaming and whole-response paths say the same.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from tests.core.logprobs.logprob_builders import chat_content, completion_lp, entry, lp_chunk
from tests.core.test_detokenize import (
    PIECES,
    REPLACEMENT_CHAR,
    STRIPPED_SPACE_RUNS,
    Named,
    every_chunking,
    shows_one_shot,
    split,
)
from tests.support.examples import examples
from tests.support.helpers import Run, end, registry
from worker.core.text.logprobs import Position, Resolver

texts = st.lists(st.sampled_from(PIECES), min_size=1, max_size=16).map("".join)
_settings = settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
PROMPT = "User: hi there 日本\nAssistant:"


@pytest.fixture(params=["deepseek", "llama_sp"])
def named(request: pytest.FixtureRequest) -> Named:
    """Named: hypothesis prints a failing test's arguments, and a tokenizer's repr is
    its whole vocabulary."""
    return Named(request.param, request.getfixturevalue(request.param))


class _Exact(Resolver):
    """Decodes every candidate after its actual context: no memo."""

    __slots__ = ()

    def _memo(self, tid: int, first: bool) -> None:
        return None


def cuts(n: int) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(1, max(n - 1, 1)), max_size=8).map(lambda c: sorted(set(c)))


def with_candidates(
    data: st.DataObject, ids: list[int], pool: list[int], shape: str
) -> list[dict[str, Any]]:
    """Entries whose candidates are the sampled id then 0-3 draws from `pool`; some
    positions have no candidate list at all."""
    content = []
    for i, t in enumerate(ids):
        others = data.draw(st.none() | st.lists(st.sampled_from(pool), max_size=3))
        top = (
            None if others is None else [(t, -0.25)] + [(c, -1.0 - k) for k, c in enumerate(others)]
        )
        content.append(entry(t, -0.25 - i, top, shape))
    return content


def stream_records(
    rid: str, ids: list[int], content: list[Any], chunk_cuts: list[int], first: dict[str, Any]
) -> list[dict[str, Any]]:
    bounds = [0, *[c for c in chunk_cuts if c < len(ids)], len(ids)]
    recs = []
    for seq, (a, b) in enumerate(itertools.pairwise(bounds)):
        finish = "stop" if b == len(ids) else None
        recs.append(
            lp_chunk(rid, seq, ids[a:b], content[a:b], finish, **(first if seq == 0 else {}))
        )
    recs.append(end(rid, len(recs)))
    return recs


@_settings
@given(
    text=texts, data=st.data(), shape=st.sampled_from("AB"), seeded=st.booleans(), eos=st.booleans()
)
def test_sampled_bytes_concatenate_to_the_one_shot_decode(
    named: Named, text: str, data: st.DataObject, shape: str, seeded: bool, eos: bool
) -> None:
    tok = named.tok
    ids = tok.encode(text, add_special_tokens=False).ids
    special = tok.token_to_id("<｜end▁of▁sentence｜>") or tok.token_to_id("</s>")
    if eos:
        ids = [*ids, special]
    prompt = tok.encode(PROMPT, add_special_tokens=False).ids if seeded else None
    first = {"chat_request": {"logprobs": True, "top_logprobs": 2}, "prompt_token_ids": prompt}
    run = Run(registry(tok))
    pool = [*ids[:4], special]
    recs = stream_records(
        "r", ids, with_candidates(data, ids, pool, shape), data.draw(cuts(len(ids))), first
    )
    for rec in recs:
        run.feed(rec)
    content = chat_content(run)
    assert len(content) == len(ids)
    got = b"".join(bytes(e["bytes"]) for e in content)
    # The oracle: the text these ids add after the prompt's tail (or from nothing).
    window = run.reg.models["m"].detokenizer(True).seed(prompt)
    full = tok.decode(window + ids, skip_special_tokens=False)
    expected = full[len(tok.decode(window, skip_special_tokens=False)) :]
    assert got == expected.encode()
    assert "".join(e["token"] for e in content) == expected
    if REPLACEMENT_CHAR not in expected:
        assert not any(REPLACEMENT_CHAR in e["token"] for e in content)
    if not eos:  # without a skipped special token, the logprob tokens are the text
        assert "".join(e["token"] for e in content) == run.text()


@_settings
@given(data=st.data())
def test_random_ids_including_broken_utf8(named: Named, data: st.DataObject) -> None:
    """Ids in any order: lone continuation bytes, cut characters. The tokens still add
    up to the one-shot text, except where a byte-fallback run that ends invalid turns
    bytes into U+FFFD after they were streamed (the same caveat as the text itself,
    `shows_one_shot`)."""
    tok = named.tok
    vocab = tok.get_vocab_size()
    # Special tokens are left out: the text skips them (skip_special_tokens), so a
    # character split around one joins up in the text but not in the logprob tokens,
    # which keep the special's text between the halves; model output never does that.
    specials = {i for i, t in tok.get_added_tokens_decoder().items() if t.special}
    ids = data.draw(
        st.lists(st.integers(0, vocab - 1).filter(lambda i: i not in specials), min_size=1,
                 max_size=24)
    )  # fmt: skip
    run = Run(registry(tok))
    content = [entry(t, -0.5) for t in ids]
    first = {"chat_request": {"logprobs": True}}
    for rec in stream_records("r", ids, content, data.draw(cuts(len(ids))), first):
        run.feed(rec)
    got = "".join(e["token"] for e in chat_content(run))
    one_shot = tok.decode(ids, skip_special_tokens=False)
    if REPLACEMENT_CHAR not in one_shot:
        assert got == one_shot
    else:
        assert shows_one_shot(got, one_shot), (got, one_shot)


@pytest.mark.parametrize("pieces", STRIPPED_SPACE_RUNS)
def test_a_space_byte_swallowed_by_an_invalid_run_counts_once(
    llama_sp: Tokenizer, pieces: str
) -> None:
    """The draw `[3, 35, 131]` of the property above, and its kin, under every chunking:
    the logprob tokens hold one U+FFFD per byte of the run, not one more."""
    ids = [llama_sp.token_to_id(p) for p in pieces.split()]
    one_shot = llama_sp.decode(ids, skip_special_tokens=False)
    for chunk_cuts in every_chunking(len(ids)):
        run = Run(registry(llama_sp))
        recs = stream_records(
            "r", ids, [entry(t, -0.5) for t in ids], chunk_cuts,
            {"chat_request": {"logprobs": True}},
        )  # fmt: skip
        for rec in recs:
            run.feed(rec)
        got = "".join(e["token"] for e in chat_content(run))
        assert shows_one_shot(got, one_shot), (chunk_cuts, got, one_shot)


@_settings
@given(
    text=texts,
    data=st.data(),
    api=st.sampled_from(["chat", "completion"]),
    k=st.sampled_from([0, 1, 2, -1]),
    stop=st.sampled_from([None, "e", "語", " w", "\n\n", "😀"]),
)
def test_streaming_and_whole_agree_on_text_logprobs_and_usage(
    named: Named, text: str, data: st.DataObject, api: str, k: int, stop: str | None
) -> None:
    tok = named.tok
    ids = tok.encode(text, add_special_tokens=False).ids
    pool = [*list(dict.fromkeys(ids))[:6], tok.token_to_id("<0xE6>") or 0, 1, 2]
    content = with_candidates(data, ids, pool, data.draw(st.sampled_from("AB")))
    req: dict[str, Any] = {
        "stop": [stop] if stop else None,
        "stream_options": {"include_usage": True},
    }
    if api == "chat":
        req.update(logprobs=True, top_logprobs=k)
    else:  # sometimes echoed: a streamed prompt chunk vs the prompt glued on
        req.update(logprobs=k, echo=data.draw(st.booleans()), prompt="Prompt: 日本")
    head = {"api": api, f"{api}_request": req, "prompt_tokens": 7}
    reg = registry(tok, max_logprobs=-1)

    stream = Run(reg)
    for rec in stream_records("s", ids, content, data.draw(cuts(len(ids))), head):
        stream.feed(rec)
    whole = Run(reg)
    choice = {
        "index": 0,
        "token_ids": ids,
        "logprobs": {"content": content},
        "finish_reason": "stop",
    }
    whole.feed(
        {
            "request_id": "w",
            "seq": 0,
            "type": "response",
            **head,
            "generate_response": {"choices": [choice]},
        }
    )

    (resp,) = whole.values("response")
    (got,) = resp["choices"]
    finals = [c for v in stream.values("chunk") for c in v["choices"] if c["finish_reason"]]
    usage = [v["usage"] for v in stream.values("chunk") if not v["choices"]]
    assert usage == [resp["usage"]]
    assert (got["finish_reason"], got["stop_reason"]) == (
        finals[0]["finish_reason"],
        finals[0]["stop_reason"],
    )
    if api == "chat":
        assert got["message"]["content"] == stream.text()
        assert got["logprobs"]["content"] == chat_content(stream)
    else:
        assert got["text"] == stream.text()
        assert got["logprobs"] == completion_lp(stream)


@_settings
@given(text=texts, data=st.data())
def test_candidate_memo_equals_decoding_in_context(
    named: Named, text: str, data: st.DataObject
) -> None:
    """The per-model memo of candidate texts (used where nothing is pending) gives what
    decoding each candidate after the actual context gives."""
    tok = named.tok
    ids = tok.encode(text, add_special_tokens=False).ids
    vocab = tok.get_vocab_size()
    cand_ids = st.lists(st.integers(0, vocab - 1) | st.sampled_from(ids), min_size=1, max_size=4)
    positions: list[Position] = [
        (t, None, -1.0, [(c, None, -2.0) for c in data.draw(cand_ids)]) for t in ids
    ]
    window = data.draw(st.sampled_from([[], tok.encode(PROMPT, add_special_tokens=False).ids[-3:]]))
    memo = Resolver(tok)
    exact = _Exact(tok)
    assert memo.resolve(positions, window, [], True) == exact.resolve(positions, window, [], True)


def test_chunked_split_equals_one_record(llama_sp: Tokenizer) -> None:
    """The same tokens give the same logprobs however the records cut them (a concrete
    case of the stream property, kept as a quick regression)."""
    ids = llama_sp.encode("é😀 日本語", add_special_tokens=False).ids
    outs = []
    for parts in ([ids], split(ids, list(range(1, len(ids))))):
        run = Run(registry(llama_sp))
        for seq, part in enumerate(parts):
            first = {"chat_request": {"logprobs": True}} if seq == 0 else {}
            content = [entry(t, -0.5) for t in part]
            run.feed(lp_chunk("r", seq, part, content, **first))
        outs.append([(e["token"], e["bytes"]) for e in chat_content(run)])
    assert outs[0] == outs[1]
    assert "".join(t for t, _ in outs[0]) == "é😀 日本語"
