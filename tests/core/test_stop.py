"""Stop strings and stop tokens (reference/vllm-derender-behaviors.md §3), as tables."""

from __future__ import annotations

from typing import Any

import pytest
from tokenizers import Tokenizer

from tests.helpers import Run, chunk, end, registry
from worker.core.stop import apply_stop, find_stop, held_tail, normalize_stop

# T-STUB-WORDS: 1 "one", 2 "two", 3 "three", 4 "number", 5 "<eos>"


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
    """50: completion text "one " with stop_reason "number"."""
    run = Run(registry(words))
    rec = chunk("c", 0, [1, 4], "stop", api="completion", completion_request={"stop": ["number"]})
    run.feed(rec)
    (value,) = run.values("chunk")
    assert value["object"] == "text_completion"
    assert value["choices"][0]["text"] == "one "
    assert value["choices"][0]["stop_reason"] == "number"


def test_stream_holds_a_stop_prefix_until_the_word_arrives(words: Tokenizer) -> None:
    """53/55: "one two " then "three" → "one " now, "two " when the stop fires."""
    run = Run(registry(words))
    run.feed(chunk("c", 0, [1, 2], api="completion", completion_request={"stop": ["three"]}))
    run.feed(chunk("c", 1, [3], "stop"))
    run.feed(chunk("c", 2, [1], None))  # later tokens of a stopped choice say nothing
    texts = [(c["text"], c["stop_reason"]) for v in run.values("chunk") for c in v["choices"]]
    # The stub decoder joins words with spaces: "one two" is out; " three" fires and
    # the space before the stop word is the last text.
    assert texts == [("one two", None), (" ", "three")]


def test_stream_finish_flushes_the_hold_when_the_stop_never_arrives(words: Tokenizer) -> None:
    """54: held text comes out when the choice finishes without the stop."""
    run = Run(registry(words))
    run.feed(chunk("c", 0, [1, 2], api="completion", completion_request={"stop": [" twox"]}))
    run.feed(chunk("c", 1, [], "length"))
    texts = [(c["text"], c["finish_reason"]) for v in run.values("chunk") for c in v["choices"]]
    assert texts == [("one", None), (" two", "length")]


def test_normalize_stop() -> None:
    """51."""
    assert normalize_stop(["three"]) == ["three"]
    assert normalize_stop([]) == []
    assert normalize_stop(None) == []
    assert normalize_stop("") == []
    assert normalize_stop(["", "x"]) == ["x"]
    assert normalize_stop("x") == ["x"]


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
        ("", "", ["x"], False, False, ("", "", None)),
    ],
)
def test_apply_stop_table(
    held: str,
    text: str,
    stops: list[str],
    include: bool,
    final: bool,
    expected: tuple[str, str, str | None],
) -> None:
    assert apply_stop(held, text, stops, include, final) == expected


def test_held_tail_is_the_longest_stop_prefix() -> None:
    assert held_tail("abc", ["cd", "bcx"]) == 2
    assert held_tail("abc", ["x"]) == 0
    assert held_tail("ab", ["abc"]) == 2
    assert held_tail("abc", ["abc"]) == 0  # a whole match is not a prefix: find_stop's job
    assert find_stop("xxabc", ["abc"]) == (2, 5, "abc")


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
