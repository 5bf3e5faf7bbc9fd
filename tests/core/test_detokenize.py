"""Incremental detokenization: the concatenation of every chunking equals the one-shot decode.

Properties run over two real tokenizers (DeepSeek V4 byte-level BPE, a SentencePiece
byte-fallback model) and a small synthetic one, for random texts and random chunkings.
Between chunks the state goes through msgpack, as it does through Redis.
"""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from tests.support.examples import examples
from worker.core.state import ChoiceState, RequestState, decode_state, encode_state
from worker.core.text.detokenize import (
    PENDING_MAX_IDS,
    REPLACEMENT_CHAR,
    WINDOW_FALLBACK_IDS,
    Detokenizer,
)

# Text that stresses byte boundaries: CJK, emoji (incl. ZWJ sequences and flags),
# combining marks, code, whitespace runs, rare scripts.
PIECES = [
    "Hello",
    " world",
    "日本語",
    "你好世界",
    "😀",
    "👩‍👩‍👧",
    "🇫🇷",
    "é",
    "e\u0301",
    "a\u0308\u0323",
    "def f(x):\n",
    "    return x",
    "  ",
    "\t",
    "\n\n",
    "   ",
    '{"a": [1, 2]}',
    "ℵ",
    "𝔘𝔫𝔦",
    "ß",
    "Ωμέγα",
    "עברית",
    "ไทย",
    "한국어",
    "…",
    "—",
    "\u200b",
    "0123456789",
    "!",
    "?",
    "'",
    "<",
    ">",
]
texts = st.lists(st.sampled_from(PIECES), min_size=0, max_size=25).map("".join)


def chunkings(n: int) -> st.SearchStrategy[list[int]]:
    """Random cut points splitting n ids into consecutive chunks."""
    return st.lists(st.integers(0, n), max_size=min(n, 12)).map(lambda cuts: sorted(set(cuts)))


def split(ids: list[int], cuts: list[int]) -> list[list[int]]:
    bounds = [0, *cuts, len(ids)]
    return [ids[a:b] for a, b in itertools.pairwise(bounds)]


def stream(detok: Detokenizer, chunks: list[list[int]], seed: list[int] | None = None) -> list[str]:
    """Feed chunks, round-tripping the state through msgpack between every chunk."""
    state = RequestState(seq=0, choices=[ChoiceState(0, window=detok.seed(seed))])
    deltas = []
    for i, chunk in enumerate(chunks):
        state = decode_state(encode_state(state))
        cs = state.choices[0]
        text = detok.step(cs, chunk)
        if i == len(chunks) - 1:
            text += detok.flush(cs)
        deltas.append(text)
    if not chunks:
        deltas.append(detok.flush(state.choices[0]))
    return deltas


def shows_one_shot(streamed: str, one_shot: str) -> bool:
    """`streamed` is `one_shot`, except that each run of k U+FFFD in `one_shot` may show
    as 1 to k characters of any kind.

    Why not equal lengths: a byte-fallback decoder turns a whole run of byte pieces into
    one U+FFFD per byte when the run ends invalid, also the bytes of characters that were
    whole when they were streamed (`<0xC3> <0xA9>` is "é" until a lone `<0x80>` follows,
    then "���"), and a run can be any length. A stream cannot take back a sent character
    and a bounded window cannot see the run's start, so such a run shows as the
    characters sent while it was valid plus U+FFFD after (vLLM's streaming does the
    same). Never more characters than the run has bytes: each byte is shown once.
    """
    pattern = "".join(
        f"(?s:.{{1,{len(part)}}})" if part[0] == REPLACEMENT_CHAR else re.escape(part)
        for part in re.findall(f"{REPLACEMENT_CHAR}+|[^{REPLACEMENT_CHAR}]+", one_shot)
    )
    return re.fullmatch(pattern, streamed) is not None


TOKENIZERS = ["deepseek", "llama_sp", "synthetic"]


class Named:
    """A tokenizer whose repr is its name (hypothesis prints failing arguments)."""

    def __init__(self, name: str, tok: Tokenizer) -> None:
        self.name, self.tok = name, tok

    def __repr__(self) -> str:
        return self.name


@pytest.fixture(params=TOKENIZERS)
def named(request: pytest.FixtureRequest) -> Named:
    return Named(request.param, request.getfixturevalue(request.param))


_settings = settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


# A space byte piece that an invalid byte run swallows: <0x00> <0x20> <0x80> decode at
# once to U+FFFD ×3, but a window holding <0x20> alone decodes to "" (SentencePiece strips
# the output's leading space), so slicing after that window counted the space twice
# (found by the random-id property below, in make test: "\x00 ��" for "���").
STRIPPED_SPACE_RUNS = ["<0x00> <0x20> <0x80>", "<0x00> <0x20> <0x21> <0x80>",
                       "<0x00> <0x20> <0x20> <0x80> ▁a", "▁a <0x20> <0x80> <0x80>",
                       "<0x20> <0x80>", "<0x20> <0x21> <0x80>"]  # fmt: skip


def every_chunking(n: int) -> list[list[int]]:
    return [[k for k in range(1, n) if mask >> (k - 1) & 1] for mask in range(1 << max(n - 1, 0))]


@pytest.mark.parametrize("pieces", STRIPPED_SPACE_RUNS)
def test_a_space_byte_swallowed_by_an_invalid_run_counts_once(
    llama_sp: Tokenizer, pieces: str
) -> None:
    ids = [llama_sp.token_to_id(p) for p in pieces.split()]
    one_shot = llama_sp.decode(ids, skip_special_tokens=True)
    assert REPLACEMENT_CHAR in one_shot
    detok = Detokenizer(llama_sp, skip_special_tokens=True)
    for cuts in every_chunking(len(ids)):
        got = "".join(stream(detok, split(ids, cuts)))
        assert shows_one_shot(got, one_shot), (cuts, got, one_shot)


@_settings
@given(text=texts, data=st.data(), skip=st.booleans())
def test_any_chunking_concatenates_to_one_shot_decode(
    named: Named, text: str, data: st.DataObject, skip: bool
) -> None:
    tok = named.tok
    ids = tok.encode(text, add_special_tokens=False).ids
    detok = Detokenizer(tok, skip_special_tokens=skip)
    deltas = stream(detok, split(ids, data.draw(chunkings(len(ids)))))
    one_shot = tok.decode(ids, skip_special_tokens=skip)
    assert "".join(deltas) == one_shot
    if REPLACEMENT_CHAR not in one_shot:
        assert not any(REPLACEMENT_CHAR in d for d in deltas)


# One detokenizer per tokenizer and flag, shared by every example of the next test: the
# worker keeps one per model for its whole life, so its memo of single-id texts is warm
# with other requests' ids.
_shared: dict[tuple[str, bool], Detokenizer] = {}


@_settings
@given(text=texts, data=st.data(), skip=st.booleans())
def test_a_detokenizer_shared_by_many_streams_still_matches_one_shot(
    named: Named, text: str, data: st.DataObject, skip: bool
) -> None:
    tok = named.tok
    ids = tok.encode(text, add_special_tokens=False).ids
    detok = _shared.setdefault((named.name, skip), Detokenizer(tok, skip_special_tokens=skip))
    deltas = stream(detok, split(ids, data.draw(chunkings(len(ids)))))
    assert "".join(deltas) == tok.decode(ids, skip_special_tokens=skip)


def test_byte_level_memo_holds_only_ids_that_are_whole_alone(deepseek: Tokenizer) -> None:
    ids = deepseek.encode("🎉 party 🎉", add_special_tokens=False).ids
    detok = Detokenizer(deepseek, skip_special_tokens=False)
    for _ in range(2):  # cold, then warm: the same deltas
        cs = ChoiceState(0)
        assert "".join(detok.step(cs, [i]) for i in ids) == "🎉 party 🎉"
    emoji = deepseek.encode("🎉", add_special_tokens=False).ids  # two byte pieces
    party = deepseek.encode(" party", add_special_tokens=False).ids
    memo, partial = detok.memo, detok._partial
    assert emoji[0] in partial  # tried alone (nothing pending), found not whole
    assert not set(emoji) & set(memo)
    assert set(party) <= set(memo)
    assert all(memo[i] == deepseek.decode([i], skip_special_tokens=False) for i in memo)


@_settings
@given(data=st.data())
def test_random_ids_including_broken_utf8_match_one_shot(named: Named, data: st.DataObject) -> None:
    """Ids a model could emit in any order: lone continuation bytes, cut characters.

    One divergence is inherent to streaming and shared with vLLM's streaming path: a
    byte-fallback decoder turns a whole run of byte pieces into U+FFFD when the run
    ends invalid, including bytes that were a complete character when they were
    streamed. So the streamed text may differ only where the one-shot text has U+FFFD
    (`shows_one_shot`).
    """
    tok = named.tok
    vocab = tok.get_vocab_size()
    ids = data.draw(st.lists(st.integers(0, vocab - 1), max_size=30))
    detok = Detokenizer(tok, skip_special_tokens=True)
    got = "".join(stream(detok, split(ids, data.draw(chunkings(len(ids))))))
    one_shot = tok.decode(ids, skip_special_tokens=True)
    if REPLACEMENT_CHAR not in one_shot:
        assert got == one_shot
    else:
        assert shows_one_shot(got, one_shot), (got, one_shot)


@_settings
@given(text=texts, data=st.data())
def test_one_token_chunks_emit_every_finished_character(
    named: Named, text: str, data: st.DataObject
) -> None:
    """With one id per chunk, nothing is held longer than needed: whenever the ids so
    far decode to finished text, exactly that text is out."""
    tok = named.tok
    ids = tok.encode(text, add_special_tokens=False).ids
    detok = Detokenizer(tok, skip_special_tokens=False)
    cs = ChoiceState(0)
    out = ""
    for k, i in enumerate(ids, start=1):
        out += detok.step(cs, [i])
        full = tok.decode(ids[:k], skip_special_tokens=False)
        if not full.endswith(REPLACEMENT_CHAR):
            assert out == full


@pytest.mark.parametrize("name", ["deepseek", "llama_sp"])
def test_window_stays_bounded_over_a_long_stream(name: str, request: pytest.FixtureRequest) -> None:
    tok: Tokenizer = request.getfixturevalue(name)
    ids = tok.encode("The quick brown fox 日本語 😀 jumps. " * 400, add_special_tokens=False).ids
    detok = Detokenizer(tok, skip_special_tokens=True)
    cs = ChoiceState(0)
    widest = 0
    out = []
    for i in range(0, len(ids), 3):
        out.append(detok.step(cs, ids[i : i + 3]))
        widest = max(widest, len(cs.window) + len(cs.pending))
    out.append(detok.flush(cs))
    assert "".join(out) == tok.decode(ids, skip_special_tokens=True)
    assert widest <= 8


def test_sentencepiece_seed_keeps_the_leading_space(llama_sp: Tokenizer) -> None:
    """vLLM behaviour 5/6: seeded text starts with " " and its lstrip equals the unseeded."""
    prompt = llama_sp.encode("[INST] Say hello [/INST]").ids
    output = llama_sp.encode("Hello there, output", add_special_tokens=False).ids
    detok = Detokenizer(llama_sp, skip_special_tokens=True)
    unseeded = "".join(stream(detok, [output[:2], output[2:]]))
    seeded = "".join(stream(detok, [output[:2], output[2:]], seed=prompt))
    assert not unseeded.startswith(" ")
    assert seeded.startswith(" ")
    assert seeded.lstrip(" ") == unseeded


@_settings
@given(text=texts, data=st.data())
def test_seeded_stream_equals_decode_after_the_prompt(
    named: Named, text: str, data: st.DataObject
) -> None:
    tok = named.tok
    prompt = tok.encode("User: hi there 日本\nAssistant:", add_special_tokens=False).ids
    ids = tok.encode(text, add_special_tokens=False).ids
    detok = Detokenizer(tok, skip_special_tokens=True)
    got = "".join(stream(detok, split(ids, data.draw(chunkings(len(ids)))), seed=prompt))
    window = detok.seed(prompt)
    expected = tok.decode(window + ids)[len(tok.decode(window)) :]
    assert got == expected


def test_empty_delta_leaves_the_state_unchanged(deepseek: Tokenizer) -> None:
    detok = Detokenizer(deepseek, skip_special_tokens=True)
    cs = ChoiceState(0)
    detok.step(cs, deepseek.encode("Hello world").ids)
    before = (list(cs.window), list(cs.pending))
    assert detok.step(cs, []) == ""
    assert (cs.window, cs.pending) == before


def test_multibyte_character_split_across_chunks_is_held_then_released(
    deepseek: Tokenizer,
) -> None:
    """Regression vLLM #46159: held-back incomplete UTF-8 must not be dropped."""
    ids = deepseek.encode("🎉", add_special_tokens=False).ids
    assert len(ids) == 2  # one emoji, two byte-level pieces
    detok = Detokenizer(deepseek, skip_special_tokens=False)
    cs = ChoiceState(0)
    assert detok.step(cs, ids[:1]) == ""
    assert cs.pending == ids[:1]
    assert detok.step(cs, ids[1:]) == "🎉"
    assert cs.pending == []


def test_skipped_special_tokens_do_not_grow_the_state(synthetic: Tokenizer) -> None:
    eos = synthetic.token_to_id("<eos>")
    detok = Detokenizer(synthetic, skip_special_tokens=True)
    cs = ChoiceState(0)
    detok.step(cs, synthetic.encode("hello").ids)
    for _ in range(PENDING_MAX_IDS * 3):
        assert detok.step(cs, [eos]) == ""
    assert len(cs.pending) <= PENDING_MAX_IDS
    assert len(cs.window) <= WINDOW_FALLBACK_IDS
    assert detok.step(cs, synthetic.encode(" world").ids) == " world"


def test_skip_special_tokens_is_honoured(synthetic: Tokenizer) -> None:
    ids = synthetic.encode("hello<eos>").ids
    keep = Detokenizer(synthetic, skip_special_tokens=False)
    skip = Detokenizer(synthetic, skip_special_tokens=True)
    assert "".join(stream(keep, [ids])) == "hello<eos>"
    assert "".join(stream(skip, [ids])) == "hello"


def test_invalid_prefix_part_way_through_a_per_id_pass_is_settled(llama_sp: Tokenizer) -> None:
    """Regression (found by the broken-UTF-8 property): byte pieces whose run turns
    invalid made `DecodeStream` raise "Invalid prefix" inside the id-by-id pass."""
    ids = [3, 131, 259, 131]  # <0x00>, a lone continuation byte, "▁▁", the byte again
    detok = Detokenizer(llama_sp, skip_special_tokens=True)
    cs = ChoiceState(0)
    got = detok.step(cs, ids) + detok.flush(cs)
    one_shot = llama_sp.decode(ids, skip_special_tokens=True)
    assert shows_one_shot(got, one_shot), (got, one_shot)
