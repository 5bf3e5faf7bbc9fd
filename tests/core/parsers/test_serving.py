"""How the request drives the parser, as vLLM 0.33.0's chat server does
(vllm/entrypoints/openai/chat_completion/serving.py).

Start state from the prompt, then chat_template_kwargs, then the format's default;
tool_choice none / auto / required / named; parallel_tool_calls; include_reasoning;
finish_reason; deterministic tool-call ids; the reasoning field name; delta shapes.
"""

from __future__ import annotations

import json
import re

import msgspec
import pytest
from tokenizers import Tokenizer

from tests.core.parsers.shared.harness import (
    QWEN_ADDED,
    QWEN_SPECIAL,
    Result,
    marker_tokenizer,
    parser,
    request,
    tool,
)
from worker.core.parsers import (
    Content,
    Reasoning,
    ToolCallArgs,
    ToolCallStart,
    compile_parser,
    feed,
    finish_reason,
    for_choice,
    open_parser,
    parse_whole,
    to_delta,
    to_message,
    tool_call_id,
    uses_parser,
)
from worker.core.parsers.language.grammar import CONTENT, REASONING
from worker.core.parsers.language.state import (
    TOOLS_AUTO,
    TOOLS_NAMED,
    TOOLS_NONE,
    TOOLS_REQUIRED,
    TOOLS_SUPPRESS,
)
from worker.core.parsers.serving import start_state
from worker.wire.outbound import encode

WEATHER = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
NAMED = {"type": "function", "function": {"name": "get_weather"}}


@pytest.fixture(scope="module")
def qwen_tok() -> Tokenizer:
    return marker_tokenizer(added=QWEN_ADDED, special=QWEN_SPECIAL)


def _ids(tok: Tokenizer, text: str) -> list[int]:
    return list(tok.encode(text, add_special_tokens=False).ids)


# -- start state -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt", "kwargs", "state"),
    [
        pytest.param("<｜User｜>hi<｜Assistant｜><think>", {"thinking": False}, REASONING,
                     id="prompt-think-beats-kwargs"),
        pytest.param("<｜User｜>hi<｜Assistant｜></think>", {"thinking": True}, CONTENT,
                     id="prompt-chat-mode-beats-kwargs"),
        pytest.param("<｜User｜>hi<｜Assistant｜>", {"thinking": False}, CONTENT,
                     id="undecided-prompt-kwargs"),
        pytest.param("<｜User｜>hi<｜Assistant｜>", {"reasoning_effort": "none"}, CONTENT,
                     id="reasoning-effort-none"),
        pytest.param("<｜User｜>hi<｜Assistant｜>", {}, REASONING, id="v4-default-thinking"),
        pytest.param("<｜Assistant｜><think>a</think>b<｜end▁of▁sentence｜><｜User｜>q"
                     "<｜Assistant｜>", None, REASONING, id="earlier-turn-markers-ignored"),
        pytest.param("", {"enable_thinking": False}, CONTENT, id="no-prompt-kwargs"),
    ],
)  # fmt: skip
def test_start_state(deepseek: Tokenizer, prompt: str, kwargs: dict | None, state: int) -> None:
    spec = compile_parser("deepseek_v4", None, deepseek)
    req = request(chat_template_kwargs=kwargs)
    assert start_state(spec, req, _ids(deepseek, prompt)) == state


def test_deepseek_v3_defaults_to_no_thinking(deepseek: Tokenizer) -> None:
    spec = compile_parser("deepseek_v3", None, deepseek)
    assert start_state(spec, None, None) == CONTENT
    assert start_state(spec, request(chat_template_kwargs={"thinking": True}), None) == REASONING


def test_e06_qwen3_thinking_off_in_the_prompt(qwen_tok: Tokenizer) -> None:
    prompt = _ids(qwen_tok, "<|im_start|>assistant\n<think>\n\n</think>\n\n")
    p = parser(qwen_tok, "qwen3", "hermes", req=request(["get_weather"]), prompt=prompt)
    got = p.whole("Sure." + WEATHER)
    assert (got.reasoning, got.content, got.names()) == (None, "Sure.", ["get_weather"])


# -- tool_choice ------------------------------------------------------------------------


def test_tool_modes(qwen_tok: Tokenizer) -> None:
    spec = compile_parser("qwen3", "hermes", qwen_tok)
    no_parser = compile_parser("qwen3", None, qwen_tok)
    pythonic = compile_parser(None, "pythonic", qwen_tok)  # vLLM: no structural tag
    mistral = compile_parser(None, "mistral", qwen_tok)  # vLLM: never the JSON path
    required, named = request(["f"], tool_choice="required"), request(["f"], tool_choice=NAMED)
    table = [  # spec, request, strict_tool_calling, mode
        (spec, None, True, TOOLS_SUPPRESS),
        (spec, request(), True, TOOLS_SUPPRESS),
        (spec, request(["f"]), True, TOOLS_AUTO),
        (spec, request(["f"], tool_choice="auto"), True, TOOLS_AUTO),
        (spec, request(["f"], tool_choice="none"), True, TOOLS_SUPPRESS),
        (spec, required, True, TOOLS_AUTO),
        (spec, named, True, TOOLS_AUTO),
        (spec, required, False, TOOLS_REQUIRED),
        (spec, named, False, TOOLS_NAMED),
        (pythonic, required, True, TOOLS_REQUIRED),
        (pythonic, named, True, TOOLS_NAMED),
        (mistral, required, False, TOOLS_AUTO),
        (mistral, named, False, TOOLS_AUTO),
        (no_parser, request(["f"]), True, TOOLS_NONE),
        (no_parser, request(["f"], tool_choice="none"), True, TOOLS_NONE),
        (no_parser, required, True, TOOLS_REQUIRED),
        (no_parser, named, True, TOOLS_NAMED),
    ]
    got = [open_parser(s, r, None, "r", strict=strict).mode for s, r, strict, _ in table]
    assert got == [m for *_, m in table]


def test_e02_auto_call_finishes_with_tool_calls(qwen_tok: Tokenizer) -> None:
    p = parser(qwen_tok, None, "hermes", req=request(["get_weather"]))
    st = p.open()
    ids = _ids(qwen_tok, WEATHER)
    feed(p.spec, st, p.decode(ids), ids, final=True)
    assert finish_reason(st, "stop") == "tool_calls"
    assert finish_reason(st, "length") == "length"  # not a natural end: the engine's reason
    st = p.open()
    feed(p.spec, st, "no call", _ids(qwen_tok, "no call"), final=True)
    assert finish_reason(st, "stop") == "stop"


def test_e03_named_tool_choice(deepseek: Tokenizer) -> None:
    """Strict tool calling off: the output is the arguments object, verbatim (vLLM)."""
    p = parser(deepseek, "deepseek_v4", "deepseek_v4", req=request(["get_weather"],
               tool_choice=NAMED), prompt=_ids(deepseek, "<｜Assistant｜></think>"),
               strict=False)  # fmt: skip
    text = ' {"city": "Paris"}'
    st = p.open()
    ids = _ids(deepseek, text)
    parsed = parse_whole(p.spec, st, p.decode(ids), ids)
    assert parsed.content == ""  # vLLM answers a forced call with "" (message_assembly.py)
    assert [(c.function.name, c.function.arguments) for c in parsed.tool_calls] == [
        ("get_weather", text)
    ]
    assert finish_reason(st, "stop") == "stop"  # OpenAI keeps "stop" for forced calls
    for how, got in p.all_streams(text):
        assert got.calls == [("get_weather", text)], how
    assert p.whole("  \n").calls == []  # nothing generated: no call
    # Nothing after the object is dropped either: it is arguments, as vLLM has it.
    assert p.whole('{"city": "Paris"} ok').calls == [("get_weather", '{"city": "Paris"} ok')]


def test_named_tool_choice_never_loses_text(deepseek: Tokenizer) -> None:
    """Regression (#11): prose under a named tool_choice came out as arguments `"It"`
    with the rest dropped. What is no arguments object is content, whole."""
    prose = "It is sunny in Hangzhou today."
    for strict in (False, True):
        p = parser(deepseek, "deepseek_v4", "deepseek_v4", strict=strict,
                   req=request(["get_weather"], tool_choice=NAMED),
                   prompt=_ids(deepseek, "<｜Assistant｜></think>"))  # fmt: skip
        for got in (p.whole(prose), *[r for _, r in p.all_streams(prose)]):
            assert (got.content, got.calls) == (prose, []), strict


def test_strict_forced_choices_parse_the_models_format(deepseek: Tokenizer) -> None:
    """Regression (#11): with strict tool calling (vLLM 0.33's default) "required" and
    a named function are written in the model's own format (DSML), and parsed as such."""
    dsml = (
        '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n'
        '<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n'
        "</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
    )
    for choice, finish in (("required", "tool_calls"), (NAMED, "stop")):
        p = parser(deepseek, "deepseek_v4", "deepseek_v4",
                   req=request(["get_weather"], tool_choice=choice),
                   prompt=_ids(deepseek, "<｜Assistant｜><think>"))  # fmt: skip
        text = "Use it.</think>" + dsml
        st = p.open()
        ids = _ids(deepseek, text)
        parsed = parse_whole(p.spec, st, p.decode(ids), ids)
        assert parsed.reasoning == "Use it." and parsed.content == ""
        assert [(c.function.name, c.function.arguments) for c in parsed.tool_calls] == [
            ("get_weather", '{"city": "Paris"}')
        ]
        assert finish_reason(st, "stop") == finish
        for how, got in p.all_streams(text):
            assert got.calls == [("get_weather", '{"city": "Paris"}')], how
            assert "DSML" not in (got.content or ""), how


def test_e04_required_tool_choice(deepseek: Tokenizer) -> None:
    p = parser(
        deepseek,
        "deepseek_v4",
        "deepseek_v4",
        req=request(["f", "g"], tool_choice="required"),
        prompt=_ids(deepseek, "<｜Assistant｜><think>"),
        strict=False,  # strict: the model's own format instead (test below)
    )
    text = 'Pick f.</think>[{"name": "f", "parameters": {"a": 1}}, {"name": "g", "parameters": {}}]'
    st = p.open()
    ids = _ids(deepseek, text)
    parsed = parse_whole(p.spec, st, p.decode(ids), ids)
    assert parsed.reasoning == "Pick f."
    assert [(c.function.name, json.loads(c.function.arguments)) for c in parsed.tool_calls] == [
        ("f", {"a": 1}),
        ("g", {}),
    ]
    assert finish_reason(st, "stop") == "tool_calls"
    for how, got in p.all_streams(text):
        assert got.names() == ["f", "g"] and got.args() == [{"a": 1}, {}], how
    assert p.whole("</think>not json").content == "not json"  # unconstrained output


def test_e07_tool_choice_none_keeps_reasoning_and_text(qwen_tok: Tokenizer) -> None:
    """Regression (#11): the call's markup used to be the answer, verbatim. vLLM 0.33
    parses the block and drops the calls; the text around it stays."""
    p = parser(qwen_tok, "qwen3", "hermes", req=request(["get_weather"], tool_choice="none"))
    st = p.open()
    text = "think</think>Here." + WEATHER
    ids = _ids(qwen_tok, text)
    events = feed(p.spec, st, p.decode(ids), ids, final=True).events
    got = Result(
        "".join(e.text for e in events if isinstance(e, Reasoning)),
        "".join(e.text for e in events if isinstance(e, Content)),
    )
    assert got == Result("think", "Here.")
    assert not any(isinstance(e, ToolCallStart) for e in events)
    assert finish_reason(st, "stop") == "stop"


def test_dsml_never_reaches_content_without_tools(deepseek: Tokenizer) -> None:
    """Regression (#11): with tool_choice "none", or no tools, a DSML block leaked."""
    dsml = (
        '\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n'
        '<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n'
        "</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
    )
    text = "Hm.</think>Sunny." + dsml
    for req in (request(["get_weather"], tool_choice="none"), request(), None):
        p = parser(deepseek, "deepseek_v4", "deepseek_v4", req=req,
                   prompt=_ids(deepseek, "<｜Assistant｜><think>"))  # fmt: skip
        for got in (p.whole(text), *[r for _, r in p.all_streams(text)]):
            assert (got.reasoning, got.calls) == ("Hm.", []), req
            assert "DSML" not in (got.content or "") and got.content.startswith("Sunny."), req


def test_parallel_tool_calls_false_keeps_the_first_call(qwen_tok: Tokenizer) -> None:
    two = WEATHER + WEATHER.replace("Paris", "Rome")
    p = parser(qwen_tok, None, "hermes", req=request(["get_weather"], parallel_tool_calls=False))
    for got in (p.whole(two), *[r for _, r in p.all_streams(two)]):
        assert got.calls == [("get_weather", '{"city": "Paris"}')]


# -- include_reasoning: false --------------------------------------------------------------


def test_e05_hidden_reasoning_and_its_logprobs(deepseek: Tokenizer) -> None:
    p = parser(
        deepseek,
        "deepseek_v4",
        None,
        req=request(include_reasoning=False),
        prompt=_ids(deepseek, "<｜Assistant｜><think>"),
    )
    reasoning_ids = _ids(deepseek, "secret plan")
    end = deepseek.token_to_id("</think>")
    answer_ids = _ids(deepseek, "The answer.")
    st = p.open()
    first = feed(p.spec, st, p.decode(reasoning_ids), reasoning_ids)
    assert first.events == []  # a reasoning-only record says nothing
    assert first.hidden == [True] * len(reasoning_ids)
    ids = [*reasoning_ids, end, *answer_ids]
    fed = feed(p.spec, st, p.decode(ids), ids, final=True)
    assert fed.events == [Content("The answer.")]
    assert fed.hidden == [True] * (len(reasoning_ids) + 1) + [False] * len(answer_ids)
    assert st.reasoning_tokens == 2 * len(reasoning_ids)
    whole = p.whole("secret plan</think>The answer.")
    assert (whole.reasoning, whole.content) == (None, "The answer.")


def test_visible_reasoning_has_no_hidden_mask(deepseek: Tokenizer) -> None:
    p = parser(deepseek, "deepseek_v4", None, prompt=_ids(deepseek, "<｜Assistant｜><think>"))
    st = p.open()
    ids = _ids(deepseek, "plan</think>answer")
    assert feed(p.spec, st, p.decode(ids), ids).hidden is None


# -- ids, field names, delta shapes ---------------------------------------------------------


def test_tool_call_ids_are_deterministic() -> None:
    a = tool_call_id("req-1", 0, 0)
    assert re.fullmatch(r"chatcmpl-tool-[0-9a-f]{32}", a)
    assert a == tool_call_id("req-1", 0, 0)
    others = {tool_call_id("req-2", 0, 0), tool_call_id("req-1", 1, 0), tool_call_id("req-1", 0, 1)}
    assert a not in others and len(others) == 3


def test_each_choice_has_its_own_state_and_ids(qwen_tok: Tokenizer) -> None:
    p = parser(qwen_tok, "qwen3", "hermes", req=request([tool("get_weather", city="string")]))
    template = p.open()
    states = [for_choice(template, i) for i in (0, 1)]
    ids = _ids(qwen_tok, "plan</think>" + WEATHER)
    calls = [
        [e for e in feed(p.spec, st, p.decode(ids), ids, final=True).events
         if isinstance(e, ToolCallStart)]
        for st in states
    ]  # fmt: skip
    assert [c[0].id for c in calls] == [tool_call_id("req-1", 0, 0), tool_call_id("req-1", 1, 0)]
    assert template.calls == 0 and template.state == REASONING  # the template is untouched


def test_uses_parser(qwen_tok: Tokenizer) -> None:
    tools_only = compile_parser(None, "hermes", qwen_tok)
    with_reasoning = compile_parser("qwen3", None, qwen_tok)
    none = request(["f"], tool_choice="none")
    # tool_choice "none" still parses the format (its markup must not become content).
    assert uses_parser(tools_only, open_parser(tools_only, none, None, "r"))
    assert uses_parser(tools_only, open_parser(tools_only, request(["f"]), None, "r"))
    assert uses_parser(with_reasoning, open_parser(with_reasoning, none, None, "r"))
    plain = compile_parser(None, None, qwen_tok)
    named = request(["f"], tool_choice=NAMED)
    assert uses_parser(plain, open_parser(plain, named, None, "r"))
    assert not uses_parser(plain, open_parser(plain, request(["f"]), None, "r"))


def test_same_input_same_ids_on_any_worker(qwen_tok: Tokenizer) -> None:
    p = parser(qwen_tok, None, "hermes", req=request(["get_weather"]))
    assert p.whole(WEATHER).ids == p.stream(WEATHER, 1).ids == [tool_call_id("req-1", 0, 0)]


def test_delta_shapes_follow_vllm() -> None:
    events = [
        Reasoning("last bit"),
        Content("Hi"),
        ToolCallStart(0, "chatcmpl-tool-x", "get_weather"),
        ToolCallArgs(0, '{"city": '),
        ToolCallArgs(0, '"Paris"}'),
        ToolCallStart(1, "chatcmpl-tool-y", "f"),
    ]
    assert json.loads(encode(to_delta(events))) == {
        "content": "Hi",
        "reasoning": "last bit",
        "tool_calls": [
            {
                "index": 0,
                "id": "chatcmpl-tool-x",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            },
            {"index": 1, "id": "chatcmpl-tool-y", "type": "function", "function": {"name": "f"}},
        ],
    }
    args_only = json.loads(encode(to_delta([ToolCallArgs(1, "{}")])))
    assert args_only == {"tool_calls": [{"index": 1, "function": {"arguments": "{}"}}]}
    assert to_delta([]) is None


def test_reasoning_field_name() -> None:
    delta = to_delta([Reasoning("r")], "reasoning_content")
    assert json.loads(encode(delta)) == {"reasoning_content": "r"}
    with pytest.raises(ValueError, match="reasoning field"):
        to_delta([Reasoning("r")], "thoughts")


def test_whole_message(qwen_tok: Tokenizer) -> None:
    p = parser(qwen_tok, "qwen3", "hermes", req=request(["get_weather"]))
    st = p.open()
    text = "plan</think>Sure." + WEATHER
    ids = _ids(qwen_tok, text)
    msg = to_message(parse_whole(p.spec, st, p.decode(ids), ids), "reasoning_content")
    assert json.loads(encode(msg)) == {
        "role": "assistant",
        "content": "Sure.",
        "reasoning_content": "plan",
        "tool_calls": [
            {
                "id": tool_call_id("req-1", 0, 0),
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    }


def test_state_round_trips_through_msgpack(qwen_tok: Tokenizer) -> None:
    from worker.core.parsers import ParserState

    p = parser(qwen_tok, "qwen3", "qwen3_coder", req=request(["get_weather"]))
    st = p.open()
    ids = _ids(qwen_tok, "plan</think><tool_call>\n<function=get_weather>\n<parameter=city>\nPa")
    feed(p.spec, st, p.decode(ids), ids)
    assert st.call is not None  # mid-call: the richest state
    blob = msgspec.msgpack.encode(st)
    assert msgspec.msgpack.decode(blob, type=ParserState) == st


DSML_PARIS = (
    '\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n'
    '<｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n'
    "</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
)


def test_whitespace_before_a_dropped_block_follows_vllm(deepseek: Tokenizer) -> None:
    """tool_choice "none" with tools: the calls are never made, the "\\n\\n" before the
    block stays content; no tools: vLLM makes the calls and drops them, and whitespace
    before a call is not content (both observed on vLLM 0.33)."""
    text = "Hm.</think>" + DSML_PARIS
    prompt = _ids(deepseek, "<｜Assistant｜><think>")
    for req, content in ((request(["get_weather"], tool_choice="none"), "\n\n"), (request(), None)):
        p = parser(deepseek, "deepseek_v4", "deepseek_v4", req=req, prompt=prompt)
        for got in (p.whole(text), *[r for _, r in p.all_streams(text)]):
            assert (got.reasoning, got.content, got.calls) == ("Hm.", content, []), req


def test_unconstrained_forced_choices_still_parse_native_calls(deepseek: Tokenizer) -> None:
    """Strict tool calling off, but the model wrote its own format anyway: the block is
    parsed as a call (vLLM returns the markup as arguments, or drops it for "required")."""
    prompt = _ids(deepseek, "<｜Assistant｜><think>")
    for choice in ("required", NAMED):
        p = parser(deepseek, "deepseek_v4", "deepseek_v4", strict=False, prompt=prompt,
                   req=request(["get_weather"], tool_choice=choice))  # fmt: skip
        text = "Hm.</think>Ok." + DSML_PARIS
        for got in (p.whole(text), *[r for _, r in p.all_streams(text)]):
            assert got.calls == [("get_weather", '{"city": "Paris"}')], choice
            assert got.content == "Ok.\n\n", choice
