"""Think-tag reasoning, as tables: the cases of vLLM's tests/reasoning/ (test_deepseekr1_,
test_base_thinking_, test_qwen3_, test_mistral_reasoning_parser.py).

NS = `parse_whole` over the whole output; S = streamed through the real incremental
detokenizer in several chunkings (1 and 3 tokens per record, one record, random), or
the explicit deltas vLLM's test lists. Every streaming result must also equal the
non-streaming one unless a case says otherwise.

Where we differ from vLLM on purpose, the case says so (`deviation`): our
non-streaming answer is the streaming engine run once, so it cannot disagree with the
stream the way vLLM's two code paths do.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from tokenizers import Tokenizer

from tests.core.parsers.shared.harness import (
    MISTRAL_SPECIAL,
    QWEN_ADDED,
    QWEN_SPECIAL,
    TEST_THINK_ADDED,
    Parser,
    Result,
    marker_tokenizer,
    parser,
    request,
)
from worker.core.parsers import compile_parser, feed
from worker.core.parsers.families.reasoning_formats import think_tags
from worker.core.parsers.language.grammar import CONTENT, REASONING
from worker.core.parsers.serving import prompt_state

NS, S = "NS", "S"


@dataclass(frozen=True)
class Case:
    id: str
    text: str
    reasoning: str | None
    content: str | None
    modes: tuple[str, ...] = (NS, S)
    # The streamed answer when it differs from the non-streaming one (vLLM's tables).
    s_reasoning: str | None = None
    s_content: str | None = None
    deviation: str = ""


def _check(p: Parser, case: Case) -> None:
    if NS in case.modes:
        assert p.whole(case.text) == Result(case.reasoning, case.content), case.id
    if S in case.modes:
        want = Result(
            case.s_reasoning if case.s_reasoning is not None else case.reasoning,
            case.s_content if case.s_content is not None else case.content,
        )
        if NS not in case.modes:
            want = Result(case.reasoning, case.content)
        for how, got in p.all_streams(case.text):
            assert got == want, f"{case.id} streamed {how}"


# -- deepseek_r1 (test_deepseekr1_reasoning_parser.py) on the real DeepSeek V4 tokenizer ---
# (<think> 128821, </think> 128822)

R1_CASES = [
    Case("R01", "This is a reasoning section</think>This is the rest",
         "This is a reasoning section", "This is the rest"),
    Case("R02", "This is a reasoning section</think>", "This is a reasoning section", None),
    Case("R03", "This is content", "This is content", None, (NS,)),
    Case("R04", "This is a reasoning section", "This is a reasoning section", None, (S,)),
    Case("R05", "This\nThat</think>This is the rest\nThat", "This\nThat",
         "This is the rest\nThat"),
    Case("R06", "</think>This is the rest", None, "This is the rest", (S,)),
    Case("R07", "</think>This is the rest", "", "This is the rest", (NS,)),
    Case("R08", "<think>This is a reasoning section</think>This is the rest",
         "This is a reasoning section", "This is the rest"),
    Case("R09", "<think>This is a reasoning section</think>", "This is a reasoning section",
         None),
    Case("R10", "<think>This is a reasoning section", "This is a reasoning section", None),
    Case("R11/NS", "", "", None, (NS,)),
    Case("R11/S", "", None, None, (S,)),
    Case("R12", "\n<think>This is a reasoning section</think>\nThis is the rest",
         "\nThis is a reasoning section", "\nThis is the rest",
         deviation="vLLM's non-streaming drops the text before <think> (R "
         "'This is a reasoning section'); ours equals its streaming answer"),
]  # fmt: skip


@pytest.mark.parametrize("case", R1_CASES, ids=lambda c: c.id)
def test_deepseek_r1(deepseek: Tokenizer, case: Case) -> None:
    _check(parser(deepseek, "deepseek_r1"), case)


def test_deepseek_r1_reasoning_end_on_ids(deepseek: Tokenizer) -> None:
    """R01/R03/R10 `is_reasoning_end`: the last think marker decides."""
    spec = compile_parser("deepseek_r1", None, deepseek)

    def ids(t: str) -> list[int]:
        return list(deepseek.encode(t, add_special_tokens=False).ids)

    assert prompt_state(spec, ids("This is a reasoning section</think>This is the rest")) == (
        CONTENT
    )
    assert prompt_state(spec, ids("This is content")) is None
    assert prompt_state(spec, ids("<think>This is a reasoning section")) == REASONING


# -- the generic think-tag parser with other markers (test_base_thinking_reasoning_parser.py) ---


@pytest.fixture(scope="module")
def test_tok() -> Tokenizer:
    return marker_tokenizer(added=TEST_THINK_ADDED)


def _base(tok: Tokenizer, thinking: bool = True) -> Parser:
    fmt = think_tags("test", "<test:think>", "</test:think>", thinking_default=thinking)
    return Parser(compile_parser(None, None, tok, reasoning=fmt), tok)


def _marks(tok: Tokenizer) -> tuple[int, int, list[int]]:
    start = tok.token_to_id("<test:think>")
    end = tok.token_to_id("</test:think>")
    plain = [tok.encode(c, add_special_tokens=False).ids[0] for c in "abcdefghij"]
    assert len(set(plain)) == 10 and start not in plain and end not in plain
    return start, end, plain


def test_b01_reasoning_end_scans_back_to_the_last_marker(test_tok: Tokenizer) -> None:
    s, e, n = _marks(test_tok)
    spec = _base(test_tok).spec
    table = [
        ([n[1], n[2], e, n[4]], True),
        ([n[1], n[2], n[3], n[4]], False),
        ([], False),
        ([n[1], s, n[2], e], True),
        ([n[1], s, n[2], n[3]], False),
        ([n[1], s, n[2], e, n[2], n[2], s], False),
    ]
    assert [prompt_state(spec, ids) == CONTENT for ids, _ in table] == [w for _, w in table]


def test_b02_reasoning_ends_in_the_delta_that_carries_the_end_marker(test_tok: Tokenizer) -> None:
    s, e, n = _marks(test_tok)
    p = _base(test_tok)
    table = [
        ([n[1], n[2]], [e], True),
        ([n[1], n[2], n[3]], [n[4]], False),
        ([n[1], s, n[2], e, n[2], s], [n[2]], False),
        ([n[1], s, n[2], e, n[2]], [n[2]], False),
    ]
    for previous, delta, ends in table:
        st = p.open()
        feed(p.spec, st, p.decode(previous), previous)
        was = st.state
        feed(p.spec, st, p.decode(delta), delta)
        assert (was == REASONING and st.state == CONTENT) == ends, (previous, delta)


def test_b03_reasoning_tokens_are_counted(test_tok: Tokenizer) -> None:
    s, e, n = _marks(test_tok)
    p = _base(test_tok, thinking=False)
    st = p.open()
    ids = [n[0], s, n[1], n[2], e, n[9]]
    feed(p.spec, st, p.decode(ids), ids, final=True)
    assert st.reasoning_tokens == 2
    # vLLM counts nesting depth and gets 3 for [S,1,S,2,E,3,E]; our engine absorbs the
    # inner start marker, so the first end marker ends reasoning: 1 and 2 (deviation).
    st = p.open()
    ids = [s, n[1], s, n[2], e, n[3], e]
    feed(p.spec, st, p.decode(ids), ids, final=True)
    assert st.reasoning_tokens == 2


def test_b04_content_is_what_follows_the_end_marker(test_tok: Tokenizer) -> None:
    _s, e, n = _marks(test_tok)
    p = _base(test_tok)
    table = [
        ([n[1], n[2], e, n[4], n[5]], p.decode([n[4], n[5]])),
        ([n[1], n[2], n[3], e], None),
        ([n[1], n[2], n[3], n[4]], None),
    ]
    for ids, content in table:
        assert p.whole(p.decode(ids), ids).content == content


B_CASES = [
    Case("B05a", "This is just content", "This is just content", None, (NS,)),
    Case("B05b", "", "", None, (NS,)),
    Case("B05c", "<test:think></test:think>", "", None, (NS,)),
    Case("B09", "First</test:think>Middle</test:think>Last", "First", "MiddleLast", (NS, S),
         deviation="vLLM's base class keeps a second end marker in content "
         "('Middle</test:think>Last'); the engine absorbs a stray end marker, so marker "
         "text never reaches content"),
]  # fmt: skip


@pytest.mark.parametrize("case", B_CASES, ids=lambda c: c.id)
def test_base_think_tags(test_tok: Tokenizer, case: Case) -> None:
    _check(_base(test_tok), case)


@pytest.mark.parametrize(
    ("deltas", "reasoning", "content"),
    [
        pytest.param(
            ["<test:think>", "Some ", "reasoning ", "content", "</test:think>", "Final ", "answer"],
            "Some reasoning content",
            "Final answer",
            id="B06",
        ),
        pytest.param(
            ["<test:think>Some reasoning", "</test:think>", "Answer"],
            "Some reasoning",
            "Answer",
            id="B07-issue-55195",
        ),
        pytest.param(["<test:think>Some reasoning"], "Some reasoning", None, id="B08"),
    ],
)
def test_base_think_tags_deltas(
    test_tok: Tokenizer, deltas: list[str], reasoning: str, content: str | None
) -> None:
    p = _base(test_tok, thinking=False)  # the start marker is what opens reasoning here
    assert p.stream_deltas(deltas) == Result(reasoning, content)
    assert p.whole("".join(deltas)) == Result(reasoning, content)


# -- qwen3 (test_qwen3_reasoning_parser.py) ------------------------------------------

TOOL_CALL_BODY = (
    "<tool_call>\n<function=bash>\n<parameter=command>\ncat /etc/hosts\n</parameter>\n"
    "</function>\n</tool_call>"
)
READ = "I need to read the file.\n\n"

Q_CASES = [
    Case("Q01", "This is a reasoning section</think>This is the rest",
         "This is a reasoning section", "This is the rest"),
    Case("Q02", "This is a reasoning section</think>", "This is a reasoning section", None),
    Case("Q03", "<think>This is a reasoning section</think>This is the rest",
         "This is a reasoning section", "This is the rest"),
    Case("Q04", "This is the rest", "This is the rest", None),
    Case("Q05", "<think>This is a reasoning\nsection</think>This is the rest\nThat",
         "This is a reasoning\nsection", "This is the rest\nThat"),
    Case("Q06", "<think>This is a reasoning section", "This is a reasoning section", None),
    # vLLM 0.33's qwen3 config keeps the reasoning's trailing whitespace.
    Case("Q07", READ + TOOL_CALL_BODY, READ, TOOL_CALL_BODY),
    Case("Q08", "<think>" + READ + TOOL_CALL_BODY, READ, TOOL_CALL_BODY),
]  # fmt: skip


@pytest.fixture(scope="module")
def qwen_tok() -> Tokenizer:
    return marker_tokenizer(added=QWEN_ADDED, special=QWEN_SPECIAL)


@pytest.mark.parametrize("case", Q_CASES, ids=lambda c: c.id)
def test_qwen3(qwen_tok: Tokenizer, case: Case) -> None:
    _check(parser(qwen_tok, "qwen3"), case)


@pytest.mark.parametrize(
    ("deltas", "reasoning", "content"),
    [
        pytest.param(
            ["<think>This is a reasoning section", "</think>", "This is the rest"],
            "This is a reasoning section",
            "This is the rest",
            id="Q09",
        ),
        pytest.param(
            ["reasoning section", "</think>This is the rest"],
            "reasoning section",
            "This is the rest",
            id="Q10",
        ),
        pytest.param(["<think>reasoning</think>"], "reasoning", None, id="Q11"),
        pytest.param(["reasoning section", "</think>content"], "reasoning section", "content",
                     id="Q12"),
        pytest.param([READ, "<tool_call>\n<function=bash>"], READ,
                     "<tool_call>\n<function=bash>", id="Q13"),
    ],
)  # fmt: skip
def test_qwen3_deltas(
    qwen_tok: Tokenizer, deltas: list[str], reasoning: str, content: str | None
) -> None:
    assert parser(qwen_tok, "qwen3").stream_deltas(deltas) == Result(reasoning, content)


@pytest.mark.parametrize("text", ["This is plain content", READ + TOOL_CALL_BODY], ids=["a", "b"])
def test_q14_thinking_disabled(qwen_tok: Tokenizer, text: str) -> None:
    p = parser(qwen_tok, "qwen3", req=request(chat_template_kwargs={"enable_thinking": False}))
    _check(p, Case("Q14", text, None, text))


# -- other reasoning parsers (test_mistral_reasoning_parser.py, …) --------------------


@pytest.fixture(scope="module")
def mistral_tok() -> Tokenizer:
    return marker_tokenizer(special=MISTRAL_SPECIAL)


MR_CASES = [
    Case("MR01", "[THINK]This is a reasoning section[/THINK]This is the rest",
         "This is a reasoning section", "This is the rest"),
    Case("MR02", "[THINK]This is a reasoning section", "This is a reasoning section", None),
    Case("MR03", "[THINK]This\nThat[/THINK]This is the rest\nThat", "This\nThat",
         "This is the rest\nThat"),
    # Current MistralReasoningParser: no [THINK] means no reasoning (the old test said
    # the opposite; vllm/parser/mistral.py).
    Case("MR04", "This is content", None, "This is content"),
    Case("MR/before", "Hello[THINK]think[/THINK]answer", "think", "Helloanswer"),
    Case("MR/stray-end", "text[/THINK]more", None, "textmore"),
]  # fmt: skip


@pytest.mark.parametrize("case", MR_CASES, ids=lambda c: c.id)
def test_mistral_reasoning(mistral_tok: Tokenizer, case: Case) -> None:
    _check(parser(mistral_tok, "mistral"), case)


def test_mistral_prompt_does_not_decide(mistral_tok: Tokenizer) -> None:
    """A pre-filled [THINK] in the prompt does not start reasoning (vllm/parser/mistral.py)."""
    prompt = list(mistral_tok.encode("[THINK]", add_special_tokens=False).ids)
    p = parser(mistral_tok, "mistral", prompt=prompt)
    assert p.whole("plain answer") == Result(None, "plain answer")


DSML_READ = (
    '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="read_file">\n'
    '<｜DSML｜parameter name="path" string="true">/tmp/example.lean</｜DSML｜parameter>\n'
    "</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
)


def test_v4r01_dsml_block_ends_reasoning(deepseek: Tokenizer) -> None:
    text = "Let me search.\n\n" + DSML_READ
    thinking = request(chat_template_kwargs={"thinking": True})
    _check(
        parser(deepseek, "deepseek_v4", req=thinking),
        Case("V4R01", text, "Let me search.", DSML_READ),
    )
    # … and the tool parser turns that block into the call.
    with_tools = request(["read_file"], chat_template_kwargs={"thinking": True})
    p = parser(deepseek, "deepseek_v4", "deepseek_v4", req=with_tools)
    want = Result("Let me search.", None, [("read_file", '{"path": "/tmp/example.lean"}')])
    got = p.whole(text)
    assert (got.reasoning, got.content, got.calls) == (want.reasoning, want.content, want.calls)
    for how, streamed in p.all_streams(text):
        assert streamed.calls == want.calls and streamed.reasoning == want.reasoning, how


def test_deepseek_v3_and_holo2_think_only_when_on(deepseek: Tokenizer) -> None:
    """vLLM 0.33's DeepSeek V3 reasoning parser hands off to an identity parser unless
    `thinking` / `enable_thinking` is on (holo2: unless it is off), so then the think
    tags are content text."""
    prompt = list(deepseek.encode("<｜Assistant｜><think>", add_special_tokens=False).ids)
    text = "plan</think>Hi"
    on, off = {"thinking": True}, {"enable_thinking": False}
    table = [
        ("deepseek_v3", None, None, text),
        ("deepseek_v3", on, "plan", "Hi"),
        ("holo2", None, "plan", "Hi"),
        ("holo2", off, None, text),
    ]
    for name, kwargs, reasoning, content in table:
        p = parser(deepseek, name, None, req=request(chat_template_kwargs=kwargs), prompt=prompt)
        for how, got in [("whole", p.whole(text)), *p.all_streams(text)]:
            assert (got.reasoning, got.content) == (reasoning, content), (name, kwargs, how)
