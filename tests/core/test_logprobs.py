"""Logprobs through `step`, as data tables: resolution, byte-fallback repair, shapes,
per-request limits, hidden tokens, and every kind of bad payload.

Numbers in docstrings refer to reference/vllm-derender-behaviors.md §4.
"""

from __future__ import annotations

from typing import Any

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

from tests.support.helpers import Run, chunk, end, registry
from worker.core.model import Model, Registry

SHAPES = ["A", "B"]


# -- builders shared by the logprob, echo and response tests ---------------------------


def _gpt2_bytes() -> dict[int, str]:
    """GPT-2's byte → printable character table (what a ByteLevel vocabulary spells)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars = list(printable)
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(printable, chars, strict=True)}


def byte_tokenizer() -> Tokenizer:
    """vLLM's Rust test tokenizer: token id = UTF-8 byte value, `<bos>` = 256 (added with
    special tokens). No merges, so every byte of every character is its own token."""
    table = _gpt2_bytes()
    tok = Tokenizer(models.BPE({table[b]: b for b in range(256)}, []))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<bos>"])
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A", special_tokens=[("<bos>", 256)]
    )
    return tok


@pytest.fixture(scope="module")
def bytes_tok() -> Tokenizer:
    return byte_tokenizer()


def entry(
    tid: int, logprob: float, top: list[tuple[int, float]] | None = None, shape: str = "B"
) -> dict[str, Any]:
    """One generate logprob entry in shape A (placeholder) or B (integer id)."""
    e: dict[str, Any] = (
        {"token": f"token_id:{tid}", "logprob": logprob, "bytes": None}
        if shape == "A"
        else {"token_id": tid, "logprob": logprob, "rank": 1}
    )
    if top is not None:
        e["top_logprobs"] = [entry(c, lp, None, shape) for c, lp in top]
    return e


def entries(ids: list[int], shape: str = "B", cands: list[int] | None = None) -> list[Any]:
    """Entries for `ids`: logprob -0.5 - i/10, candidates = the sampled id, then `cands`."""
    return [
        entry(
            t,
            -0.5 - i / 10,
            [(t, -0.5 - i / 10)] + [(c, -3.0 - k) for k, c in enumerate(cands or [])],
            shape,
        )
        for i, t in enumerate(ids)
    ]


def lp_chunk(
    rid: str,
    seq: int,
    ids: list[int],
    content: list[Any] | None,
    finish: str | None = None,
    index: int = 0,
    **top: Any,
) -> dict[str, Any]:
    rec = chunk(rid, seq, ids, finish, index=index, **top)
    rec["generate_chunk"]["choices"][0]["logprobs"] = {"content": content}
    return rec


def ids_of(tok: Tokenizer, text: str) -> list[int]:
    return list(tok.encode(text, add_special_tokens=False).ids)


def chat_content(run: Run, index: int = 0) -> list[dict[str, Any]]:
    """Every chat logprob entry streamed for one choice, in order."""
    got: list[dict[str, Any]] = []
    for v in run.values("chunk"):
        for c in v["choices"]:
            if c["index"] == index and c["logprobs"] is not None:
                got += c["logprobs"]["content"]
    return got


def completion_lp(run: Run, index: int = 0) -> dict[str, list[Any]]:
    """The streamed completion logprobs of one choice, concatenated."""
    got: dict[str, list[Any]] = {
        "text_offset": [],
        "token_logprobs": [],
        "tokens": [],
        "top_logprobs": [],
    }
    for v in run.values("chunk"):
        for c in v["choices"]:
            if c["index"] == index and c["logprobs"] is not None:
                for k in got:
                    got[k] += c["logprobs"][k]
    return got


def errors(run: Run) -> list[dict[str, Any]]:
    return [v["error"] for v in run.values("error")]


@pytest.fixture
def reg(deepseek: Tokenizer) -> Registry:
    return registry(deepseek, name="deepseek-v4", max_model_len=64, max_logprobs=5)


@pytest.fixture
def breg(bytes_tok: Tokenizer) -> Registry:
    return registry(bytes_tok, name="render-model", max_model_len=128, max_logprobs=20)


CHAT_LP = {"logprobs": True, "top_logprobs": 5}


# -- resolution -------------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
def test_chat_placeholder_resolution(breg: Registry, shape: str) -> None:
    """57-60: token_id:104 (top token_id:105) → "h" [104], top "i" [105]."""
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
    """61, 62: tokens ["h"], token_logprobs [-1.0], top_logprobs [{"i": -2.0}], text_offset [0]."""
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
    """63: top order survives; `rank` is not an OpenAI field."""
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
    """64: <0xC3> then <0xA9> → "" with bytes [], then "é" — also when the two halves
    arrive in different records (the carried decoder state is the repair context)."""
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
    """65: `content: null` → logprobs null."""
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


# -- per-request limits (PY-LP) ---------------------------------------------------------

CANDS = ["Hello", " world", "!", "?"]


def _four(deepseek: Tokenizer) -> tuple[int, list[Any]]:
    cands = [ids_of(deepseek, t)[0] for t in CANDS]
    return cands[0], [entry(cands[0], -0.1, [(c, -0.1 - k) for k, c in enumerate(cands)])]


@pytest.mark.parametrize(("k", "kept"), [(0, 0), (1, 1), (2, 2), (5, 4), (-1, 4)])
def test_chat_top_logprobs_limit(reg: Registry, deepseek: Tokenizer, k: int, kept: int) -> None:
    """69: chat keeps the first k engine candidates, all of them for -1, none for 0."""
    sid, content = _four(deepseek)
    run = Run(registry(deepseek, max_logprobs=-1))
    run.feed(lp_chunk("r", 0, [sid], content, chat_request={"logprobs": True, "top_logprobs": k}))
    (e,) = chat_content(run)
    assert [t["token"] for t in e["top_logprobs"]] == CANDS[:kept]


@pytest.mark.parametrize(("k", "kept"), [(0, 1), (1, 2), (2, 3), (5, 4), (-1, 0)])
def test_completion_logprobs_limit(deepseek: Tokenizer, k: int, kept: int) -> None:
    """70: completion keeps entries i <= k (k + 1 when the sampled token is outside the
    top k); -1 leaves every top dict empty, as the coupled server does."""
    sid, content = _four(deepseek)
    run = Run(registry(deepseek, max_logprobs=-1))
    run.feed(lp_chunk("r", 0, [sid], content, api="completion", completion_request={"logprobs": k}))
    assert completion_lp(run)["top_logprobs"] == [{t: -0.1 - i for i, t in enumerate(CANDS[:kept])}]


@pytest.mark.parametrize("api", ["chat", "completion"])
def test_without_a_request_every_candidate_is_kept(
    reg: Registry, deepseek: Tokenizer, api: str
) -> None:
    """71: no request → the engine's list, untrimmed."""
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
    """72: a position the engine sent no candidates for is `null`, not `{}`."""
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


# -- bad payloads ----------------------------------------------------------------------------


def _mutate(path: str, value: Any) -> Any:
    def apply(content: list[Any]) -> list[Any]:
        target: Any = content
        keys = path.split(".")
        for key in keys[:-1]:
            target = target[int(key)] if key.isdigit() else target[key]
        last = keys[-1]
        if value is _DELETE:
            del target[last]
        elif last.isdigit():
            target[int(last)] = value
        else:
            target[last] = value
        return content

    return apply


_DELETE = object()


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (_mutate("0.token_id", _DELETE), "has neither `token` and `token_id`"),
        (_mutate("0.token", "token_id:19923"), "has both `token` and `token_id`"),
        (
            _mutate("0.top_logprobs.1.token_id", 10**7),
            "token_id 10000000 is outside the vocabulary",
        ),
        (_mutate("0.token_id", 11), "names token 11 but token_ids[0] is 19923"),
        (
            lambda content: [*content, {"token_id": 11, "logprob": -1.0}],
            "logprobs.content length (2) in choice 0 does not match its token_ids length (1)",
        ),
        (
            _mutate("0.top_logprobs.0.top_logprobs", [{"token_id": 1, "logprob": -1.0}]),
            "has its own top_logprobs",
        ),
    ],
)
def test_bad_shape_b_payloads_fail_the_request(reg: Registry, mutate: Any, message: str) -> None:
    content = mutate([entry(19923, -0.1, [(19923, -0.1), (11, -2.0)])])
    _assert_fails_before_decoding(reg, content, message)


@pytest.mark.parametrize(
    ("token", "message"),
    [
        ("token_id:", "is not a `token_id:N` placeholder"),
        ("token_id: 7", "is not a `token_id:N` placeholder"),
        ("token_id:+7", "is not a `token_id:N` placeholder"),
        ("token_id:٧", "is not a `token_id:N` placeholder"),
        ("token_id:129280", "token id 129280 is outside the vocabulary [0, 129280)"),
    ],
)
def test_bad_placeholders_fail_the_request(reg: Registry, token: str, message: str) -> None:
    content = [entry(19923, -0.1, [(19923, -0.1)], "A")]
    content[0]["top_logprobs"][0]["token"] = token
    _assert_fails_before_decoding(reg, content, message)


def test_bounds_on_logprobs(reg: Registry) -> None:
    """93, 94: content over max_model_len, candidates over max_logprobs."""
    many = [entry(19923, -0.1, [(19923, -0.1)] * 6)]
    _assert_fails_before_decoding(
        reg, many, "top_logprobs count (6) in choice 0 exceeds max_logprobs (5)"
    )
    long = [entry(19923, -0.1)] * 65
    _assert_fails_before_decoding(
        reg,
        long,
        "logprobs.content length (65) in choice 0 exceeds max_model_len (64)",
        ids=[19923] * 64,
    )


def test_a_bad_payload_fails_even_when_logprobs_were_not_asked(reg: Registry) -> None:
    content = [{"logprob": -0.1}]
    _assert_fails_before_decoding(reg, content, "has neither", request={})


def _assert_fails_before_decoding(
    reg: Registry,
    content: list[Any],
    message: str,
    ids: list[int] | None = None,
    request: dict[str, Any] | None = None,
) -> None:
    run = Run(reg)
    run.feed(chunk("r", 0, [], chat_request=CHAT_LP if request is None else request))
    with pytest.MonkeyPatch.context() as mp:

        def boom(self: Model, *args: Any) -> None:
            raise AssertionError("tokenizer used before the logprobs were checked")

        mp.setattr(Model, "detokenizer", boom)
        mp.setattr(Model, "resolver", boom)
        run.feed(lp_chunk("r", 1, ids or [19923], content))
    (err,) = errors(run)
    assert err["code"] == "invalid_request_error"
    assert err["param"] == "logprobs"
    assert message in err["message"]
    run.feed(end("r", 2))
    assert run.values()[-1] == "[DONE]"


@pytest.mark.parametrize(
    "bad",
    [
        [{"token_id": 19923}],  # no logprob
        [{"token_id": 19923, "logprob": "high"}],
        [{"token_id": 19923, "logprob": -0.1, "top_logprobs": {"19923": -0.1}}],
        {"token_id": 19923, "logprob": -0.1},  # not a list
    ],
)
def test_malformed_logprobs_are_schema_errors(reg: Registry, bad: Any) -> None:
    """Wrong types (a missing logprob, a dict of candidates) do not match the record
    schema: dead-lettered, and the request gets an error."""
    run = Run(reg)
    run.feed(lp_chunk("r", 0, [19923], bad))
    assert len(run.dead) == 1
    (err,) = errors(run)
    assert err["code"] == "invalid_record"
    assert "logprobs" in err["message"]


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
