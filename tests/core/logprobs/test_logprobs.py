"""Logprobs through `step`, as data tables: resolution, byte-fallback repair, shapes,
per-request limits and hidden tokens; every kind of bad payload is in test_logprobs_payloads.py.

Docstrings name the vLLM tests a case mirrors (vLLM's
tests/entrypoints/scale_out/derender/; names without `test_` are its Rust port's,
rust/src/server/src/routes/tests.rs).
"""

from __future__ import annotations

from typing import Any

import pytest
from tokenizers import Tokenizer

from tests.core.logprobs.logprob_builders import (
    CHAT_LP,
    chat_content,
    completion_lp,
    entries,
    entry,
    errors,
    ids_of,
    lp_chunk,
)
from tests.core.logprobs.logprob_builders import breg as breg  # (the fixture)
from tests.core.logprobs.logprob_builders import bytes_tok as bytes_tok  # (the fixture)
from tests.core.logprobs.logprob_builders import reg as reg  # (the fixture)
from tests.support.helpers import Run, registry
from worker.core.model import Registry

SHAPES = ["A", "B"]


# -- resolution -------------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
def test_chat_placeholder_resolution(breg: Registry, shape: str) -> None:
    """test_derender_chat_logprobs, _bytes, _top_logprobs: token_id:104 (top token_id:105) →
    "h" [104], top "i" [105]."""
    run = Run(breg)
    content = [entry(104, -1.0, [(105, -2.0)], shape)]
    run.feed(lp_chunk("r", 0, [104], content, "stop", chat_request=CHAT_LP))
    (e,) = chat_content(run)
    assert e == {
        "token": "h",
        "logprob": -1.0,
        "bytes": [104],
        "top_logprobs": [{"token": "i", "logprob": -2.0, "bytes": [105]}],
    }


@pytest.mark.parametrize("shape", SHAPES)
def test_completion_flat_shape(breg: Registry, shape: str) -> None:
    """test_derender_completion_logprobs: tokens ["h"], token_logprobs [-1.0], top_logprobs
    [{"i": -2.0}], text_offset [0]."""
    run = Run(breg)
    content = [entry(104, -1.0, [(105, -2.0)], shape)]
    req = {"logprobs": 1}
    run.feed(lp_chunk("r", 0, [104], content, "stop", api="completion", completion_request=req))
    (choice,) = run.values("chunk")[0]["choices"]
    # logprobs=1 keeps entries i <= 1 of the engine list: here the one candidate.
    assert choice["logprobs"] == {
        "text_offset": [0],
        "token_logprobs": [-1.0],
        "tokens": ["h"],
        "top_logprobs": [{"i": -2.0}],
    }


def test_shape_b_keeps_the_engine_order_and_drops_rank(reg: Registry, deepseek: Tokenizer) -> None:
    """test_token_ids_are_decoded_with_bytes_and_order_preserved: top order survives; `rank`
    is not an OpenAI field."""
    ok, hello = ids_of(deepseek, "ok")[0], ids_of(deepseek, "Hello")[0]
    run = Run(reg)
    content = [entry(ok, -0.5, [(ok, -0.5), (hello, -2.0)])]
    run.feed(lp_chunk("r", 0, [ok], content, chat_request=CHAT_LP))
    (e,) = chat_content(run)
    assert (e["token"], e["bytes"]) == ("ok", list(b"ok"))
    assert [(t["token"], t["logprob"]) for t in e["top_logprobs"]] == [
        ("ok", -0.5),
        ("Hello", -2.0),
    ]
    assert "rank" not in e and all("rank" not in t for t in e["top_logprobs"])


def test_both_shapes_give_the_same_bytes(reg: Registry, deepseek: Tokenizer) -> None:
    ids = ids_of(deepseek, "Shapes: 日本語 🎉 é")
    outs = []
    for shape in SHAPES:
        run = Run(reg)
        run.feed(lp_chunk("r", 0, ids, entries(ids, shape, [ids[0]]), "stop", chat_request=CHAT_LP))
        outs.append(run.values())
    assert outs[0] == outs[1]


@pytest.mark.parametrize("split_at", [None, 1])
def test_byte_fallback_split_resolves_to_empty_then_whole(
    llama_sp: Tokenizer, split_at: int | None
) -> None:
    """test_byte_fallback_second_half_uses_preceding_token_as_context: <0xC3> then <0xA9> →
    "" with bytes [], then "é" — also when the two halves arrive in different records (the
    carried decoder state is the repair context)."""
    c3, a9 = llama_sp.token_to_id("<0xC3>"), llama_sp.token_to_id("<0xA9>")
    run = Run(registry(llama_sp))
    content = [entry(c3, -0.1), entry(a9, -0.2)]
    if split_at is None:
        run.feed(lp_chunk("r", 0, [c3, a9], content, "stop", chat_request=CHAT_LP))
    else:
        run.feed(lp_chunk("r", 0, [c3], content[:1], chat_request=CHAT_LP))
        run.feed(lp_chunk("r", 1, [a9], content[1:], "stop"))
    assert [(e["token"], e["bytes"]) for e in chat_content(run)] == [
        ("", []),
        ("é", list("é".encode())),
    ]
    assert run.text() == "é"


def test_split_character_chunk_still_carries_its_logprobs(
    reg: Registry, deepseek: Tokenizer
) -> None:
    """A record whose only token holds half a character says nothing as text, but its
    logprob entry is sent (empty content), so no position is lost."""
    ids = ids_of(deepseek, "Hi 🎉")
    run = Run(reg)
    run.feed(lp_chunk("r", 0, ids[:1], entries(ids[:1]), chat_request=CHAT_LP))
    held = run.feed(lp_chunk("r", 1, ids[1:2], entries(ids[1:2])))
    run.feed(lp_chunk("r", 2, ids[2:], entries(ids[2:]), "stop"))
    (c,) = run.values("chunk")[2]["choices"]  # [0] is the opening
    assert len(held) == 1 and c["delta"] == {"content": ""}
    assert [e["token"] for e in c["logprobs"]["content"]] == [""]
    tokens = [e["token"] for e in chat_content(run)]
    assert "".join(tokens) == "Hi 🎉" == run.text()


def test_candidates_at_a_split_character(reg: Registry, deepseek: Tokenizer) -> None:
    """Where a character is half out, a candidate that completes another character
    shows that whole character; one that does not shows only its own text."""
    party, confetti = ids_of(deepseek, "🎉"), ids_of(deepseek, "🎊")
    assert len(party) == len(confetti) == 2 and party[0] == confetti[0]
    letter = ids_of(deepseek, "a")[0]
    content = [
        entry(party[0], -0.1, [(party[0], -0.1)]),
        entry(party[1], -0.2, [(party[1], -0.2), (confetti[1], -1.0), (letter, -2.0)]),
    ]
    run = Run(reg)
    run.feed(lp_chunk("r", 0, party, content, "stop", chat_request=CHAT_LP))
    first, second = chat_content(run)
    assert (first["token"], first["top_logprobs"][0]["token"]) == ("", "")
    assert [t["token"] for t in second["top_logprobs"]] == ["🎉", "🎊", "a"]


def test_sentencepiece_tokens_keep_their_leading_space(llama_sp: Tokenizer) -> None:
    """Decoding ids one by one in context: " world", not SentencePiece's stripped
    "world" of an id decoded alone; with the prompt seed the first gets its space too."""
    ids = ids_of(llama_sp, "Hello world")
    prompt = llama_sp.encode("[INST] hi [/INST]").ids
    tokens = []
    for seed in (None, prompt):
        run = Run(registry(llama_sp))
        run.feed(
            lp_chunk("r", 0, ids, entries(ids), "stop", chat_request=CHAT_LP, prompt_token_ids=seed)
        )
        tokens.append([e["token"] for e in chat_content(run)])
        assert "".join(tokens[-1]) == run.text()
    assert tokens == [["Hello", " world"], [" Hello", " world"]]


def test_special_tokens_keep_their_text_in_logprobs(reg: Registry, deepseek: Tokenizer) -> None:
    """Logprob tokens are decoded with skip_special_tokens=False; the stop token the text
    drops still has its logprob: the engine generated it."""
    eos = deepseek.token_to_id("<｜end▁of▁sentence｜>")
    ids = [*ids_of(deepseek, "Done."), eos]
    run = Run(registry(deepseek, eos_token_ids=(eos,)))
    run.feed(lp_chunk("r", 0, ids, entries(ids), "stop", chat_request=CHAT_LP))
    assert run.text() == "Done."
    assert [e["token"] for e in chat_content(run)][-1] == "<｜end▁of▁sentence｜>"


def test_non_placeholder_shape_a_token_is_kept_with_null_bytes(reg: Registry) -> None:
    """vLLM: a shape-A token that is not a placeholder stays as sent, bytes null."""
    e = entry(19923, -0.3, [(19923, -0.3)], "A")
    e["token"] = "Hello?"
    e["top_logprobs"].append({"token": "literal", "logprob": -4.0, "bytes": [1]})
    run = Run(reg)
    run.feed(lp_chunk("r", 0, [19923], [e], chat_request=CHAT_LP))
    (got,) = chat_content(run)
    assert (got["token"], got["bytes"]) == ("Hello?", None)
    assert got["top_logprobs"] == [
        {"token": "Hello", "logprob": -0.3, "bytes": list(b"Hello")},
        {"token": "literal", "logprob": -4.0, "bytes": None},
    ]


def test_content_null_is_not_an_error(reg: Registry) -> None:
    """test_content_none_is_not_an_error: `content: null` → logprobs null."""
    run = Run(reg)
    run.feed(lp_chunk("r", 0, [19923], None, chat_request=CHAT_LP))
    assert errors(run) == []
    assert run.values("chunk")[0]["choices"][0]["logprobs"] is None


def test_values_are_clamped_at_the_floor(reg: Registry) -> None:
    run = Run(reg)
    content = [entry(19923, -1e6, [(19923, -1e6), (11, -12345.0)])]
    req = {"logprobs": 2}
    run.feed(lp_chunk("r", 0, [19923], content, api="completion", completion_request=req))
    lp = completion_lp(run)
    assert lp["token_logprobs"] == [-9999.0]
    assert lp["top_logprobs"] == [{"Hello": -9999.0, ")": -9999.0}]


# -- per-request limits (vLLM's test_logprobs_endpoint_parity.py) -----------------------

CANDS = ["Hello", " world", "!", "?"]


def _four(deepseek: Tokenizer) -> tuple[int, list[Any]]:
    cands = [ids_of(deepseek, t)[0] for t in CANDS]
    return cands[0], [entry(cands[0], -0.1, [(c, -0.1 - k) for k, c in enumerate(cands)])]


@pytest.mark.parametrize(("k", "kept"), [(0, 0), (1, 1), (2, 2), (5, 4), (-1, 4)])
def test_chat_top_logprobs_limit(reg: Registry, deepseek: Tokenizer, k: int, kept: int) -> None:
    """test_chat_derender_matches_coupled_chat: chat keeps the first k engine candidates,
    all of them for -1, none for 0."""
    sid, content = _four(deepseek)
    run = Run(registry(deepseek, max_logprobs=-1))
    run.feed(lp_chunk("r", 0, [sid], content, chat_request={"logprobs": True, "top_logprobs": k}))
    (e,) = chat_content(run)
    assert [t["token"] for t in e["top_logprobs"]] == CANDS[:kept]


@pytest.mark.parametrize(("k", "kept"), [(0, 1), (1, 2), (2, 3), (5, 4), (-1, 0)])
def test_completion_logprobs_limit(deepseek: Tokenizer, k: int, kept: int) -> None:
    """test_completion_derender_matches_coupled_completion: completion keeps entries i <= k
    (k + 1 when the sampled token is outside the top k); -1 leaves every top dict empty, as
    the coupled server does."""
    sid, content = _four(deepseek)
    run = Run(registry(deepseek, max_logprobs=-1))
    run.feed(lp_chunk("r", 0, [sid], content, api="completion", completion_request={"logprobs": k}))
    assert completion_lp(run)["top_logprobs"] == [{t: -0.1 - i for i, t in enumerate(CANDS[:kept])}]


@pytest.mark.parametrize("api", ["chat", "completion"])
def test_without_a_request_every_candidate_is_kept(
    reg: Registry, deepseek: Tokenizer, api: str
) -> None:
    """test_without_the_request_derender_keeps_every_candidate: no request → the engine's
    list, untrimmed."""
    sid, content = _four(deepseek)
    run = Run(reg)
    run.feed(lp_chunk("r", 0, [sid], content, api=api))
    if api == "chat":
        assert len(chat_content(run)[0]["top_logprobs"]) == 4
    else:
        assert list(completion_lp(run)["top_logprobs"][0]) == CANDS


@pytest.mark.parametrize("k", [-1, 0, 2])
def test_position_without_engine_candidates_stays_null(
    reg: Registry, deepseek: Tokenizer, k: int
) -> None:
    """test_completion_position_without_logprobs_stays_none: a position the engine sent no
    candidates for is `null`, not `{}`."""
    ids = ids_of(deepseek, "Hello world!")
    content = entries(ids, cands=[ids[0]])
    del content[1]["top_logprobs"]
    run = Run(registry(deepseek, max_logprobs=-1))
    run.feed(lp_chunk("r", 0, ids, content, api="completion", completion_request={"logprobs": k}))
    tops = completion_lp(run)["top_logprobs"]
    assert tops[1] is None
    assert tops[0] is not None and tops[2] is not None


def test_logprobs_are_only_sent_when_asked(reg: Registry, deepseek: Tokenizer) -> None:
    ids = ids_of(deepseek, "Hello")
    run = Run(reg)
    run.feed(lp_chunk("r", 0, ids, entries(ids), chat_request={}))
    assert run.values("chunk")[0]["choices"][0]["logprobs"] is None


# -- text offsets, hidden tokens ----------------------------------------------------------


def test_completion_text_offset_continues_across_records(
    reg: Registry, deepseek: Tokenizer
) -> None:
    ids = ids_of(deepseek, "Offsets go on: 日本語 and 🎉 done")
    run = Run(reg)
    req = {"logprobs": 0}
    for seq, i in enumerate(range(0, len(ids), 3)):
        part = ids[i : i + 3]
        finish = "length" if i + 3 >= len(ids) else None
        extra = {"api": "completion", "completion_request": req} if seq == 0 else {}
        run.feed(lp_chunk("r", seq, part, entries(part), finish, **extra))
    lp = completion_lp(run)
    assert "".join(lp["tokens"]) == run.text() == deepseek.decode(ids)
    starts = [sum(len(t) for t in lp["tokens"][:i]) for i in range(len(ids))]
    assert lp["text_offset"] == starts


def test_tokens_after_a_stop_string_are_hidden(reg: Registry, deepseek: Tokenizer) -> None:
    """The coupled server stops at the token completing the stop string: later tokens'
    logprobs never exist there, so they are not sent (in this record or later ones)."""
    ids = ids_of(deepseek, "Answer STOP ignored words")
    run = Run(reg)
    req = {**CHAT_LP, "stop": ["STOP"]}
    run.feed(lp_chunk("r", 0, ids, entries(ids), chat_request=req))
    run.feed(lp_chunk("r", 1, ids[:2], entries(ids[:2]), "length"))
    tokens = [e["token"] for e in chat_content(run)]
    assert run.text() == "Answer "
    assert "".join(tokens).endswith("STOP") and "".join(tokens).startswith("Answer")
    assert len(tokens) < len(ids)


def test_an_unfinished_character_at_the_end_goes_onto_the_last_token(
    reg: Registry, deepseek: Tokenizer
) -> None:
    """The choice ends mid-character: the text shows what a one-shot decode shows, and
    so does the last token (and its copy among its own candidates)."""
    half = ids_of(deepseek, "ok 🎉")[:-1]
    run = Run(reg)
    content = entries(half, cands=[half[0]])
    run.feed(lp_chunk("r", 0, half, content, "length", chat_request=CHAT_LP))
    tokens = chat_content(run)
    assert run.text() == deepseek.decode(half) == "".join(e["token"] for e in tokens)
    assert tokens[-1]["token"].endswith("\ufffd")
    assert tokens[-1]["top_logprobs"][0]["token"] == tokens[-1]["token"]
    assert tokens[-1]["top_logprobs"][0]["bytes"] == tokens[-1]["bytes"]


def test_interleaved_choices_keep_their_own_repair_context(
    reg: Registry, deepseek: Tokenizer
) -> None:
    """n = 2: a character split across records of choice 0 while choice 1 streams in
    between still resolves against choice 0's own state."""
    a, b = ids_of(deepseek, "🎉 yes"), ids_of(deepseek, "日本語 no")
    run = Run(reg)
    run.feed(lp_chunk("r", 0, a[:1], entries(a[:1]), index=0, chat_request={**CHAT_LP, "n": 2}))
    run.feed(lp_chunk("r", 1, b[:1], entries(b[:1]), index=1))
    run.feed(lp_chunk("r", 2, a[1:], entries(a[1:]), "stop", index=0))
    run.feed(lp_chunk("r", 3, b[1:], entries(b[1:]), "stop", index=1))
    for index, text in ((0, "🎉 yes"), (1, "日本語 no")):
        tokens = [e["token"] for e in chat_content(run, index)]
        assert "".join(tokens) == text == run.text(index=index)
    assert chat_content(run, 0)[0]["token"] == ""
