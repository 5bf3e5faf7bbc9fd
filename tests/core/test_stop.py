"""Stop strings and stop tokens as tables (vLLM's
tests/entrypoints/scale_out/derender/test_derender_stop.py)."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from tests.support.examples import examples
from tests.support.helpers import Run, chunk, end, registry
from worker.core.text.stop import NO_STOPS, StopStrings, apply_stop, normalize_stop

# The words of vLLM's stop-test stub tokenizer: 1 "one", 2 "two", 3 "three", 4 "number", 5 "<eos>"


def run_chat(
    words: Tokenizer,
    ids: list[int],
    finish: str | None = "stop",
    chunks: list[int] | None = None,
    eos: tuple[int, ...] = (),
    **request: Any,
) -> tuple[str, Any, Any]:
    """Content, finish_reason and stop_reason of a one-choice chat stream."""
    run = Run(registry(words, eos_token_ids=eos))
    cuts = chunks or [len(ids)]
    start = 0
    for seq, size in enumerate(cuts):
        part = ids[start : start + size]
        start += size
        last = start >= len(ids)
        rec = chunk("r", seq, part, finish if last else None)
        if seq == 0:
            rec["chat_request"] = request
        run.feed(rec)
    finals = [
        c for v in run.values("chunk") for c in v["choices"] if c["finish_reason"] is not None
    ]
    assert len(finals) == 1
    return run.text(), finals[0]["finish_reason"], finals[0]["stop_reason"]


@pytest.mark.parametrize(
    ("request_", "eos", "finish", "text", "stop_reason"),
    [
        # 41: the space before the stop word stays
        ({"stop": ["three"]}, (), "stop", "one two ", "three"),
        # 42
        (
            {"stop": ["three"], "include_stop_str_in_output": True},
            (),
            "stop",
            "one two three",
            "three",
        ),
        # 43: finish_reason stop alone is not enough
        ({}, (), "stop", "one two three", None),
        # 44
        ({"stop_token_ids": [3]}, (), "stop", "one two", 3),
        # 45: the primary EOS drops the id and leaves stop_reason empty
        ({}, (3,), "stop", "one two", None),
        # 46: a generation-config EOS (not the primary) names itself
        ({}, (5, 3), "stop", "one two", 3),
        # 47
        (
            {"stop_token_ids": [3], "include_stop_str_in_output": True},
            (),
            "stop",
            "one two three",
            3,
        ),
        # 48: token stop runs before the string scan
        ({"stop": ["two"]}, (3,), "stop", "one ", "two"),
        # 49: a length finish keeps the last token
        ({"stop_token_ids": [3]}, (), "length", "one two three", None),
    ],
)
def test_chat_stop_table(
    words: Tokenizer,
    request_: dict[str, Any],
    eos: tuple[int, ...],
    finish: str,
    text: str,
    stop_reason: Any,
) -> None:
    for chunks in ([3], [1, 1, 1], [2, 1], [1, 2]):
        got = run_chat(words, [1, 2, 3], finish, chunks=chunks, eos=eos, **request_)
        assert got == (text, "stop" if stop_reason is not None else finish, stop_reason)


def test_completion_stop_string(words: Tokenizer) -> None:
    """test_completion_stop_string_is_left_out_of_the_text: completion text "one " with
    stop_reason "number"."""
    run = Run(registry(words))
    rec = chunk("c", 0, [1, 4], "stop", api="completion", completion_request={"stop": ["number"]})
    run.feed(rec)
    (value,) = run.values("chunk")
    assert value["object"] == "text_completion"
    assert value["choices"][0]["text"] == "one "
    assert value["choices"][0]["stop_reason"] == "number"


def test_stream_holds_a_stop_prefix_until_the_word_arrives(words: Tokenizer) -> None:
    """test_stream_holds_a_stop_prefix_until_the_word_arrives: "one two " then "three" →
    "one " now, "two " when the stop fires."""
    run = Run(registry(words))
    run.feed(chunk("c", 0, [1, 2], api="completion", completion_request={"stop": ["three"]}))
    run.feed(chunk("c", 1, [3], "stop"))
    run.feed(chunk("c", 2, [1], None))  # later tokens of a stopped choice say nothing
    texts = [(c["text"], c["stop_reason"]) for v in run.values("chunk") for c in v["choices"]]
    # The stub decoder joins words with spaces: "one two" is out; " three" fires and
    # the space before the stop word is the last text.
    assert texts == [("one two", None), (" ", "three")]


def test_stream_finish_flushes_the_hold_when_the_stop_never_arrives(words: Tokenizer) -> None:
    """test_stream_finish_flushes_the_hold_when_the_stop_never_arrives: held text comes out
    when the choice finishes without the stop."""
    run = Run(registry(words))
    run.feed(chunk("c", 0, [1, 2], api="completion", completion_request={"stop": [" twox"]}))
    run.feed(chunk("c", 1, [], "length"))
    texts = [(c["text"], c["finish_reason"]) for v in run.values("chunk") for c in v["choices"]]
    assert texts == [("one", None), (" two", "length")]


def test_normalize_stop() -> None:
    """test_streaming_stop_strings_are_rejected_by_the_helper."""
    assert normalize_stop(["three"]) == ["three"]
    assert normalize_stop([]) == []
    assert normalize_stop(None) == []
    assert normalize_stop("") == []
    assert normalize_stop(["", "x"]) == ["x"]
    assert normalize_stop("x") == ["x"]


# -- the matcher: `StopStrings` against the straightforward implementation -------------


def oracle_find(text: str, stops: Sequence[str]) -> tuple[int, int, str] | None:
    """The stop string that completes first: (start, end, stop); ties to the list order."""
    best: tuple[int, int, str] | None = None
    for s in stops:
        at = text.find(s)
        if at >= 0:
            end = at + len(s)
            if best is None or end < best[1]:
                best = (at, end, s)
    return best


def oracle_tail(text: str, stops: Sequence[str]) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of a stop string."""
    longest = 0
    for s in stops:
        upto = min(len(s) - 1, len(text))
        for n in range(upto, longest, -1):
            if text.endswith(s[:n]):
                longest = n
                break
    return longest


def oracle_apply(
    held: str, text: str, stops: Sequence[str], include: bool, final: bool
) -> tuple[str, str, str | None]:
    """The former `apply_stop`: a `str.find` per stop string, a suffix loop per string."""
    if not stops:
        return held + text, "", None
    buf = held + text
    hit = oracle_find(buf, stops)
    if hit is not None:
        start, end, s = hit
        return buf[: end if include else start], "", s
    if final:
        return buf, "", None
    keep = oracle_tail(buf, stops)
    if keep == 0:
        return buf, "", None
    return buf[:-keep], buf[-keep:], None


# Strings no test text contains: appended to a list, they force the automaton and change
# nothing else (they never match, start no held tail and come after every real string).
PAD = [f"\U0010fffd{i}" for i in range(9)]


def both_paths(stops: list[str]) -> list[StopStrings]:
    """The list as compiled, and the same list forced through the automaton."""
    return [StopStrings(stops), StopStrings(stops + PAD)]


Apply = Callable[[str, str, bool, bool], tuple[str, str, str | None]]


def stream(apply: Apply, parts: list[str], include: bool) -> list[tuple[str, str, str | None]]:
    """Feed `parts` the way a choice does (held carried, final on the last), up to a fire."""
    held = ""
    steps = []
    for i, part in enumerate(parts):
        step = apply(held, part, include, i == len(parts) - 1)
        steps.append(step)
        _, held, fired = step
        if fired is not None:
            break
    return steps


def check_stream(matcher: StopStrings, stops: list[str], parts: list[str], include: bool) -> None:
    """Chunk for chunk what the oracle says, and the same as one call over the whole."""
    steps = stream(matcher.apply, parts, include)
    assert steps == stream(lambda h, t, i, f: oracle_apply(h, t, stops, i, f), parts, include)
    whole = matcher.apply("", "".join(parts), include, True)
    assert "".join(emit for emit, _, _ in steps) == whole[0]
    assert steps[-1][2] == whole[2]
    assert steps[-1][1] == ""  # final or fired: nothing is held at the end


@pytest.mark.parametrize(
    ("held", "text", "stops", "include", "final", "expected"),
    [
        ("", "one two ", ["three"], False, False, ("one two ", "", None)),
        ("", "one two th", ["three"], False, False, ("one two ", "th", None)),
        ("th", "ree more", ["three"], False, False, ("", "", "three")),
        ("th", "ree more", ["three"], True, False, ("three", "", "three")),
        ("th", "", ["three"], False, True, ("th", "", None)),
        # the stop that completes first wins, not the first in the list
        ("", "a long stop", ["stop", "long"], False, False, ("a ", "", "long")),
        # ties in end position go to the list order
        ("", "xab", ["ab", "b"], False, False, ("x", "", "ab")),
        ("", "xab", ["b", "ab"], False, False, ("xa", "", "b")),
        ("", "xab", ["b", "ab"], True, False, ("xab", "", "b")),
        # a string inside a longer one that completes later still wins
        ("", "abcd", ["abcd", "bc"], False, False, ("a", "", "bc")),
        ("", "", ["x"], False, False, ("", "", None)),
        # the held tail is the longest suffix that may still become a stop string
        ("", "abc", ["cd", "bcx"], False, False, ("a", "bc", None)),
        ("", "abc", ["x"], False, False, ("abc", "", None)),
        ("", "ab", ["abc"], False, False, ("", "ab", None)),
        ("a", "a", ["aab", "aaab"], False, False, ("", "aa", None)),
        ("aa", "c", ["aab", "aaab"], False, False, ("aac", "", None)),
        ("", "abc", ["abc"], False, False, ("", "", "abc")),
        ("", "xxabc", ["abc"], True, False, ("xxabc", "", "abc")),
        # duplicates: the first one listed is the one that fires
        ("", "zab", ["q", "ab", "ab"], False, False, ("z", "", "ab")),
    ],
)
def test_apply_table(
    held: str,
    text: str,
    stops: list[str],
    include: bool,
    final: bool,
    expected: tuple[str, str, str | None],
) -> None:
    assert oracle_apply(held, text, stops, include, final) == expected
    assert apply_stop(held, text, stops, include, final) == expected
    for matcher in both_paths(stops):
        assert matcher.apply(held, text, include, final) == expected


def test_no_stop_strings() -> None:
    assert not NO_STOPS
    assert NO_STOPS.stops == () and NO_STOPS.longest == 0
    assert NO_STOPS.apply("ab", "cd", False, False) == ("abcd", "", None)
    assert apply_stop("ab", "cd", [], True, False) == ("abcd", "", None)
    assert StopStrings(["x"]) and StopStrings(["x"] * 20)


def test_attributes() -> None:
    stops = StopStrings(("ab", "c", "ab"))
    assert stops.stops == ("ab", "c", "ab") and stops.longest == 2
    assert "3 strings" in repr(stops)


def test_many_or_long_strings_take_the_automaton() -> None:
    """Up to 8 strings of at most 64 characters: `str.find`; otherwise the automaton."""
    assert not StopStrings(["a"]).automaton
    assert not StopStrings([f"s{i}" for i in range(8)]).automaton
    assert not StopStrings(["x" * 64] * 8).automaton
    assert StopStrings([f"s{i}" for i in range(9)]).automaton
    assert StopStrings(["a"] * 9).automaton
    assert StopStrings([f"s{i}" for i in range(1000)]).automaton
    assert StopStrings(["x" * 65]).automaton
    assert StopStrings(["a", "x" * 65]).automaton
    assert [m.automaton for m in both_paths(["ab", "b"])] == [False, True]


def test_an_empty_string_fires_at_once_as_before() -> None:
    """`normalize_stop` drops empty strings; passed anyway, "" is found at 0, as before."""
    for stops in (["", "a"], ["a", ""], ["b", "", *PAD]):
        for matcher in (StopStrings(stops), StopStrings(stops + PAD)):
            assert matcher.apply("x", "ab", True, False) == ("", "", "")
        assert apply_stop("x", "ab", stops, False, True) == oracle_apply(
            "x", "ab", stops, False, True
        )


@pytest.mark.parametrize("many", [False, True])
def test_unicode(many: bool) -> None:
    pad = PAD if many else []
    stops = ["語語", "🙂!", "é", "\U0010ffff", "\ud800x", *pad]
    matcher = StopStrings(stops)
    assert matcher.automaton == many
    assert matcher.apply("", "日本語", False, False) == ("日本", "語", None)
    assert matcher.apply("語", "語で", False, False) == ("", "", "語語")
    assert matcher.apply("", "ok 🙂", False, False) == ("ok ", "🙂", None)
    assert matcher.apply("🙂", "!?", True, False) == ("🙂!", "", "🙂!")
    assert matcher.apply("", "cafe\u0301 café", False, False) == ("cafe\u0301 caf", "", "é")
    assert matcher.apply("", "a\U0010ffffb", True, False) == ("a\U0010ffff", "", "\U0010ffff")
    assert matcher.apply("", "日本語", False, True) == ("日本語", "", None)
    assert matcher.apply("", "a\ud800", False, False) == ("a", "\ud800", None)  # lone surrogate
    assert matcher.apply("\ud800", "x", False, False) == ("", "", "\ud800x")
    check_stream(matcher, stops, ["日", "本語", "語と🙂", "!"], False)
    check_stream(matcher, stops, ["🙂", "?🙂", "", "🙂"], True)


def test_long_strings_sharing_prefixes() -> None:
    """Long strings with long common prefixes and deep failure links, both paths."""
    stops = ["a" * 70 + "b", "a" * 40 + "c", "ab" * 30, "b" + "a" * 80]
    matcher = StopStrings(stops)
    assert matcher.automaton
    text = "a" * 69 + "ab" + "a" * 100 + "c" + "ab" * 40
    for size in (1, 3, 7, 50, len(text)):
        parts = [text[i : i + size] for i in range(0, len(text), size)]
        check_stream(matcher, stops, parts, False)
        few = StopStrings(stops[1:3])
        assert not few.automaton
        check_stream(few, stops[1:3], parts, True)
    held = "a" * 60
    assert matcher.apply(held, "a" * 9, False, False) == oracle_apply(
        held, "a" * 9, stops, False, False
    )


def test_one_matcher_serves_many_streams() -> None:
    """The automaton fills its tables as scans need them: reusing one object over many
    streams (as every choice of a request does) gives what a fresh one gives."""
    rng = random.Random(20240601)
    for alphabet in ("ab", "abc"):
        stops = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6))) for _ in range(40)]
        shared = StopStrings(stops)
        assert shared.automaton
        for _ in range(300):
            text = "".join(rng.choice(alphabet + "x\0") for _ in range(rng.randint(0, 30)))
            cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, 4))) if text else []
            parts = [text[i:j] for i, j in zip([0, *cuts], [*cuts, len(text)], strict=True)]
            include = rng.random() < 0.5
            check_stream(shared, stops, parts, include)
            assert stream(shared.apply, parts, include) == stream(
                StopStrings(stops).apply, parts, include
            )


ALPHABETS = st.sampled_from(["ab", "abc"])


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[str], list[str], bool]:
    """A stop list (duplicates, prefixes and suffixes of each other likely), a text over
    the same alphabet plus one letter no stop string has, its chunks, `include`."""
    alphabet = draw(ALPHABETS)
    word = st.text(alphabet, min_size=1, max_size=6)
    stops = draw(st.lists(word, min_size=1, max_size=40))
    text = draw(st.text(alphabet + "x", max_size=40))
    cuts = draw(st.lists(st.integers(0, len(text)), max_size=8).map(sorted))
    parts = [text[i:j] for i, j in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    return stops, parts, draw(st.booleans())


_settings = settings(max_examples=examples(500), deadline=None)


@_settings
@given(case=cases())
def test_streams_match_the_oracle_chunk_for_chunk(case: tuple[list[str], list[str], bool]) -> None:
    stops, parts, include = case
    for matcher in both_paths(stops):
        check_stream(matcher, stops, parts, include)


@_settings
@given(case=cases(), held=st.text("abcx", max_size=8), final=st.booleans())
def test_any_held_text_matches_the_oracle(
    case: tuple[list[str], list[str], bool], held: str, final: bool
) -> None:
    """Held text a caller never passes (say, one containing a whole stop string) too."""
    stops, parts, include = case
    text = "".join(parts)
    expected = oracle_apply(held, text, stops, include, final)
    assert apply_stop(held, text, stops, include, final) == expected
    for matcher in both_paths(stops):
        assert matcher.apply(held, text, include, final) == expected


@_settings
@given(
    pieces=st.lists(st.sampled_from(["ab", "a", "b", "ba", "aab", "abab"]), min_size=1),
    count=st.integers(1, 3),
    data=st.data(),
)
def test_long_strings_match_the_oracle(pieces: list[str], count: int, data: st.DataObject) -> None:
    """Strings of up to ~120 characters, built of repeats so texts contain them."""
    stops = [
        "".join(data.draw(st.lists(st.sampled_from(pieces), min_size=1, max_size=40)))
        for _ in range(count)
    ]
    text = "".join(data.draw(st.lists(st.sampled_from([*pieces, "x"]), max_size=80)))
    size = data.draw(st.integers(1, 40))
    parts = [text[i : i + size] for i in range(0, len(text), size)] or [""]
    for matcher in both_paths(stops):
        check_stream(matcher, stops, parts, data.draw(st.booleans()))


def test_stop_string_split_across_many_records_is_cut_exactly(deepseek: Tokenizer) -> None:
    ids = deepseek.encode("Answer: 42.\n###\nignored tail", add_special_tokens=False).ids
    for size in (1, 2, 3, len(ids)):
        run = Run(registry(deepseek))
        seq = 0
        for i in range(0, len(ids), size):
            last = i + size >= len(ids)
            rec = chunk("r", seq, ids[i : i + size], "stop" if last else None)
            if seq == 0:
                rec["chat_request"] = {"stop": ["###"]}
            run.feed(rec)
            seq += 1
        run.feed(end("r", seq))
        assert run.text() == "Answer: 42.\n"
        finals = [c for v in run.values("chunk") for c in v["choices"] if c["finish_reason"]]
        assert [(c["finish_reason"], c["stop_reason"]) for c in finals] == [("stop", "###")]


def test_a_stop_reason_naming_another_token_keeps_the_last_one(words: Tokenizer) -> None:
    """The engine says it stopped on token 5; the last token (3, an EOS too) is then
    text, as vLLM 0.33 keeps it (found by `make parity` on Llama 3.2's three EOS ids)."""
    for stop_reason, text in ((5, "one two three"), (3, "one two"), (None, "one two")):
        run = Run(registry(words, eos_token_ids=(3, 5)))
        rec = chunk("r", 0, [1, 2, 3], "stop")
        rec["generate_chunk"]["choices"][0]["stop_reason"] = stop_reason
        run.feed(rec)
        finals = [c for v in run.values("chunk") for c in v["choices"] if c["finish_reason"]]
        assert (run.text(), finals[0]["stop_reason"]) == (text, stop_reason)


def test_failure_links_in_any_order() -> None:
    """A scan fills links parent first; asked deepest first, `_fail_of` computes the ones
    it needs on the way: each is the longest proper suffix of the node's string that is a
    prefix of some stop string."""
    rng = random.Random(7)
    for _ in range(20):
        stops = ["".join(rng.choice("ab") for _ in range(rng.randint(1, 9))) for _ in range(12)]
        matcher = StopStrings(stops)
        char, depth, fail = matcher._char, matcher._depth, matcher._fail
        spelled = [""]
        for n in range(1, len(depth)):
            spelled.append(spelled[matcher._heads.get(n, n - 1)] + chr(char[n]))
        assert sorted(spelled) == sorted({s[:k] for s in stops for k in range(len(s) + 1)})
        for n in sorted(range(1, len(depth)), key=lambda n: -depth[n]):
            if fail[n] < 0:
                matcher._fail_of(n)
        for n in range(1, len(depth)):
            word = spelled[n]
            assert spelled[fail[n]] == next(
                word[k:] for k in range(1, len(word) + 1) if word[k:] in spelled
            )
