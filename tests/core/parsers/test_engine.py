"""The engine's mechanics: markers by id and by text, split across records, written as
prose, held back upstream; dropped special tokens; bounded state (O(1) per chunk).
"""

from __future__ import annotations

import msgspec
import pytest
from tokenizers import Tokenizer

from tests.core.parsers.shared.harness import (
    KIMI_SPECIAL,
    QWEN_ADDED,
    QWEN_SPECIAL,
    Parser,
    Result,
    Slot,
    deepseek_tokenizer,
    marker_tokenizer,
    merge,
    parser,
    plain_tokenizer,
    request,
    tool,
)
from worker.core.parsers import Content, feed
from worker.core.parsers.language.grammar import CONTENT, REASONING
from worker.core.parsers.machine.engine import PENDING_MAX
from worker.core.parsers.machine.prose import WS_HOLD_MAX
from worker.core.text.detokenize import Detokenizer

DSML_CALL = (
    'Let me check.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n'
    '<｜DSML｜parameter name="location" string="true">杭州 "West Lake"</｜DSML｜parameter>\n'
    '<｜DSML｜parameter name="days" string="false">5</｜DSML｜parameter>\n'
    "</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
)
WEATHER = tool("get_weather", location="string", days="integer")


def _ids(tok: Tokenizer, text: str) -> list[int]:
    return list(tok.encode(text, add_special_tokens=False).ids)


def _v4(deepseek: Tokenizer, **kw: object) -> Parser:
    return parser(
        deepseek,
        "deepseek_v4",
        "deepseek_v4",
        req=request([WEATHER], **kw),
        prompt=_ids(deepseek, "<｜Assistant｜><think>"),
    )


# -- markers split across records -------------------------------------------------------


def test_dsml_split_at_every_position_of_two_records(deepseek: Tokenizer) -> None:
    """Every multi-token DSML marker cut between two records, at every token."""
    p = _v4(deepseek)
    text = "plan</think>" + DSML_CALL
    ids = p.ids(text)
    want = p.whole(text)
    assert want.calls == [("get_weather", '{"location": "杭州 \\"West Lake\\"", "days": 5}')]
    for cut in range(1, len(ids)):
        per_chunk, _ = p.stream_ids(ids, [cut])
        assert merge([e for c in per_chunk for e in c]) == want, cut


def test_markers_as_ordinary_tokens_split_at_every_position() -> None:
    """A tokenizer without marker tokens: `<think>`, `</think>` and `<tool_call>` are
    several tokens each, matched on text, and never leak when cut anywhere."""
    tok = plain_tokenizer()
    p = parser(tok, "qwen3", "hermes", req=request(["f"]))
    text = 'plan</think>Sure.<tool_call>{"name": "f", "arguments": {"a": "<b>"}}</tool_call>'
    ids = p.ids(text)
    assert tok.token_to_id("</think>") is None
    want = Result("plan", "Sure.", [("f", '{"a": "<b>"}')], p.whole(text).ids)
    assert p.whole(text) == want
    for cut in range(1, len(ids)):
        for second in (cut + 1, cut + 2):
            per_chunk, _ = p.stream_ids(ids, [cut, second])
            assert merge([e for c in per_chunk for e in c]) == want, (cut, second)


# -- markers by id: prose, surplus, deferral --------------------------------------------


def _plain_ids(tok: Tokenizer, literal: str) -> list[int]:
    """`literal` spelled with ordinary tokens (one per character)."""
    out: list[int] = []
    for ch in literal:
        out += _ids(tok, ch)
    return out


def test_a_think_marker_written_as_prose_is_text(deepseek: Tokenizer) -> None:
    p = parser(deepseek, "deepseek_r1", None)
    prose = _plain_ids(deepseek, "</think>")
    assert deepseek.token_to_id("</think>") not in prose
    before, after = _ids(deepseek, "I could write "), _ids(deepseek, " here.")
    ids = before + prose + after
    text = p.decode(ids)
    assert p.whole(text, ids) == Result("I could write </think> here.", None)
    for cut in range(1, len(ids)):
        per_chunk, _ = p.stream_ids(ids, [cut])
        assert merge([e for c in per_chunk for e in c]).reasoning == text
    # Without token ids there is nothing to tell them apart: text decides.
    st = p.open()
    assert merge(feed(p.spec, st, text, None, final=True).events) == Result(
        "I could write ", " here."
    )


def test_prose_marker_and_real_marker_in_one_record(deepseek: Tokenizer) -> None:
    p = parser(deepseek, "deepseek_r1", None)
    end = deepseek.token_to_id("</think>")
    ids = [*_ids(deepseek, "a"), *_plain_ids(deepseek, "</think>"), *_ids(deepseek, "b"), end]
    ids += _ids(deepseek, "answer")
    st = p.open()
    got = merge(feed(p.spec, st, p.decode(ids), ids, final=True).events)
    assert got == Result("a</think>b", "answer")


def test_marker_text_held_back_upstream_arrives_later(deepseek: Tokenizer) -> None:
    """A stop-string hold-back may release a marker's text a record after its id."""
    p = parser(deepseek, "deepseek_r1", None)
    end = deepseek.token_to_id("</think>")
    first = [*_ids(deepseek, "abc"), end]
    st = p.open()
    one = feed(p.spec, st, "abc</th", first)
    assert st.pending == [end] and st.state == REASONING
    two = feed(p.spec, st, "ink>rest", _ids(deepseek, "rest"), final=True)
    assert merge(one.events + two.events) == Result("abc", "rest")
    assert st.pending == []


def test_pending_markers_are_bounded(deepseek: Tokenizer) -> None:
    p = parser(deepseek, "deepseek_r1", None)
    end = deepseek.token_to_id("</think>")
    st = p.open()
    for _ in range(3 * PENDING_MAX):
        feed(p.spec, st, "x", [end])  # ids whose text was cut (a stop string)
    assert len(st.pending) == PENDING_MAX
    feed(p.spec, st, "", [], final=True)
    assert st.pending == []


# -- special tokens ---------------------------------------------------------------------


def test_other_special_tokens_are_dropped(deepseek: Tokenizer) -> None:
    p = parser(deepseek, "deepseek_v4", None, prompt=_ids(deepseek, "<｜Assistant｜><think>"))
    eos = deepseek.token_to_id("<｜end▁of▁sentence｜>")
    ids = [*_ids(deepseek, "plan"), eos, *_ids(deepseek, "</think>ok"), eos]
    for cut in range(1, len(ids)):
        per_chunk, _ = p.stream_ids(ids, [cut])
        assert merge([e for c in per_chunk for e in c]) == Result("plan", "ok")


def test_tool_choice_none_parses_the_block_and_drops_its_calls() -> None:
    """Markup never reaches content, whatever the tool_choice (vLLM 0.33 parses and
    drops the block too); text around the block stays content."""
    kimi = marker_tokenizer(special=KIMI_SPECIAL)
    text = 'a<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{"x": 1}<|tool_call_end|>'  # noqa: E501
    for req in (request(["f"], tool_choice="none"), request([]), None):
        p = parser(kimi, None, "kimi_k2", req=req)
        assert p.whole(text) == Result(None, "a"), req
    qwen = marker_tokenizer(added=QWEN_ADDED, special=QWEN_SPECIAL)
    p = parser(qwen, None, "hermes", req=request(["f"], tool_choice="none"))
    call = '<tool_call>{"name": "f", "arguments": {}}</tool_call>'
    assert p.whole("Sure. " + call + "<|im_end|>") == Result(None, "Sure. ")
    for _, got in p.all_streams("Sure. " + call):
        assert got == Result(None, "Sure. ")


# -- whitespace around calls -------------------------------------------------------------


def test_whitespace_only_text_before_and_after_calls_is_not_sent(deepseek: Tokenizer) -> None:
    p = _v4(deepseek)
    block = DSML_CALL.removeprefix("Let me check.\n\n")
    got = p.whole("plan</think>\n\n" + block + "\n")
    assert (got.reasoning, got.content, len(got.calls)) == ("plan", None, 1)
    got = p.whole("plan</think>\n\n")  # no call follows: the text is the answer
    assert got.content == "\n\n"
    # A DSML block ends the turn: vLLM 0.33 drops the text after it.
    got = p.whole("plan</think>" + block + "\nDone.")
    assert (got.content, len(got.calls)) == (None, 1)


def test_whitespace_hold_is_bounded(deepseek: Tokenizer) -> None:
    p = _v4(deepseek)
    st = p.open()
    st.state = CONTENT
    for _ in range(3 * WS_HOLD_MAX):
        events = feed(p.spec, st, " ", _ids(deepseek, " ")).events
        assert len(st.ws) <= WS_HOLD_MAX
    assert events == [] or events[0] == Content(" " * (WS_HOLD_MAX + 1))


# -- the end --------------------------------------------------------------------------


def test_nothing_after_final(deepseek: Tokenizer) -> None:
    p = parser(deepseek, "deepseek_r1", None)
    st = p.open()
    feed(p.spec, st, "a", _ids(deepseek, "a"), final=True)
    assert feed(p.spec, st, "b", _ids(deepseek, "b"), final=True).events == []


def test_truncated_call_still_closes_valid_json(deepseek: Tokenizer) -> None:
    p = _v4(deepseek)
    cut = DSML_CALL.index("</｜DSML｜parameter>")  # inside the first (string) value
    got = p.whole("plan</think>" + DSML_CALL[:cut])
    assert got.calls == [("get_weather", '{"location": "杭州 \\"West Lake\\""}')]


# -- O(1): the state does not grow with the output -------------------------------------------

_REASONING = "Think about the weather, the city, and what 東京 means. "
_ARG = 'A long string argument with "quotes" and <tags> and 日本語. '


def _long(name: str, times: int) -> tuple[Parser, str]:
    reasoning, arg = _REASONING * (4 * times), _ARG * (3 * times)
    qwen = marker_tokenizer(added=QWEN_ADDED, special=QWEN_SPECIAL)
    kimi = marker_tokenizer(special=KIMI_SPECIAL)
    weather = tool("get_weather", location="string", days="integer")
    if name == "dsml":
        tok = deepseek_tokenizer()
        p = parser(tok, "deepseek_v4", "deepseek_v4", req=request([weather]),
                   prompt=_ids(tok, "<｜Assistant｜><think>"))  # fmt: skip
        return p, reasoning + "</think>" + DSML_CALL.replace('杭州 "West Lake"', arg)
    if name == "qwen3_coder":
        p = parser(qwen, "qwen3", "qwen3_coder", req=request([weather]))
        call = f"<tool_call>\n<function=get_weather>\n<parameter=location>\n{arg}\n</parameter>\n"
        return p, reasoning + "</think>Sure." + call + "</function>\n</tool_call>"
    if name == "hermes":
        p = parser(qwen, "qwen3", "hermes", req=request([weather]))
        body = msgspec.json.encode({"name": "get_weather", "arguments": {"location": arg}})
        return p, reasoning + "</think>Sure.<tool_call>" + body.decode() + "</tool_call>"
    assert name == "kimi_k2"
    p = parser(kimi, "kimi_k2", "kimi_k2", req=request([weather]))
    args = msgspec.json.encode({"location": arg}).decode()
    return p, (
        reasoning + "</think>Sure.<|tool_calls_section_begin|><|tool_call_begin|>"
        "functions.get_weather:0<|tool_call_argument_begin|>" + args + "<|tool_call_end|>"
    )


@pytest.mark.parametrize("name", ["dsml", "qwen3_coder", "hermes", "kimi_k2"])
def test_state_size_does_not_grow_with_the_output(name: str) -> None:
    """Thousands of tokens of reasoning and of one string argument, one token per
    record: the largest state is the same as for an output ten times shorter (up to
    the varint of the reasoning-token counter)."""
    sizes = {}
    for times in (10, 100):
        p, text = _long(name, times)
        ids = p.ids(text)
        per_chunk, _ = p.stream_ids(ids, list(range(1, len(ids))))
        got = merge([e for c in per_chunk for e in c])
        assert len(got.args()[0]["location"]) == len(_ARG) * 3 * times
        sizes[times] = max(_sizes(p, ids))
    assert len(ids) > 5000
    assert sizes[100] <= sizes[10] + 4, sizes
    assert sizes[100] < 400


def _sizes(p: Parser, ids: list[int]) -> list[int]:
    detok = Detokenizer(p.tok, skip_special_tokens=False)
    slot = Slot()
    st = p.open()
    sizes = []
    longest = 0
    for k, token_id in enumerate(ids):
        text = detok.step(slot, [token_id])
        feed(p.spec, st, text, [token_id], final=k == len(ids) - 1)
        sizes.append(len(msgspec.msgpack.encode(st)))
        longest = max(longest, len(st.held))
    assert longest < 32  # the hold-back is shorter than the longest marker
    return sizes


def test_a_tool_block_inside_reasoning_ends_it_and_is_parsed() -> None:
    """Qwen3.5 may open `<tool_call>` without closing `</think>` (vllm/parser/qwen3.py)."""
    qwen = marker_tokenizer(added=QWEN_ADDED, special=QWEN_SPECIAL)
    p = parser(qwen, "qwen3", "qwen3_coder", req=request([tool("bash", command="string")]))
    text = (
        "I need to read the file.\n\n<tool_call>\n<function=bash>\n<parameter=command>\n"
        "cat /etc/hosts\n</parameter>\n</function>\n</tool_call>"
    )
    want = [("bash", '{"command": "cat /etc/hosts"}')]
    for got in (p.whole(text), *[r for _, r in p.all_streams(text)]):
        assert (got.reasoning, got.content, got.calls) == (
            "I need to read the file.\n\n",  # qwen3 keeps trailing whitespace (vLLM 0.33)
            None,
            want,
        )
