"""tests/support/harmony_oracle.py gives, on the inputs of vLLM 0.33.0's
tests/parser/test_harmony.py, the results those tests expect of vLLM's HarmonyParser (whole parse
and parse_delta)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from tests.support import harmony_oracle as ho
from tests.support.vocab.tiktoken_convert import harmony_encoding

pytestmark = pytest.mark.timeout(120)

WEATHER = json.dumps({"location": "Tokyo"})
MALFORMED = [
    "<|channel|>analysis<|message|>thinking<|end|>",
    "<|start|>assistant<|channel|>commentary<|message|>thinking<|end|>",
    '<|start|>assistant<|channel|>final {"answer": "hi"}<|return|>',
]


def ids(text: str) -> list[int]:
    return harmony_encoding().encode(text, allowed_special="all")


def rendered(user: str, response: Sequence[object]) -> list[int]:
    """The output tokens of `response` after a user turn, as openai_harmony renders them
    (analysis messages kept), like vLLM's get_model_output_tokens."""
    from openai_harmony import Conversation, Message, RenderConversationConfig, Role

    enc = harmony_encoding()
    config = RenderConversationConfig(auto_drop_analysis=False)
    prompt = [Message.from_role_and_content(Role.USER, user)]
    head = enc.render_conversation_for_completion(
        Conversation.from_messages(prompt), Role.ASSISTANT, config=config
    )
    full = enc.render_conversation(Conversation.from_messages([*prompt, *response]), config=config)
    assert full[: len(head)] == head
    return full[len(head) :]


def assistant(text: str, channel: str):  # type: ignore[no-untyped-def]
    from openai_harmony import Message, Role

    return Message.from_role_and_content(Role.ASSISTANT, text).with_channel(channel)


def call(recipient: str, text: str, channel: str = "commentary", ctype: str | None = "json"):  # type: ignore[no-untyped-def]
    msg = assistant(text, channel).with_recipient(recipient)
    return msg if ctype is None else msg.with_content_type(ctype)


def whole(tokens: list[int]) -> tuple[str | None, str | None, list[tuple[str, str]]]:
    w = ho.parse(tokens)
    return w.reasoning, w.content, w.tool_calls


# ----------------------------------------------------------------------------- whole


def test_rendered_messages() -> None:
    assert whole(rendered("Why?", [assistant("This is reasoning", "analysis")])) == (
        "This is reasoning",
        None,
        [],
    )
    assert whole(rendered("Hello", [assistant("This is a test", "final")])) == (
        None,
        "This is a test",
        [],
    )
    both = [assistant("I should think first.", "analysis"), assistant("The answer is 4.", "final")]
    assert whole(rendered("What is 2+2?", both)) == (
        "I should think first.",
        "The answer is 4.",
        [],
    )


@pytest.mark.parametrize("args", ['{"location": "Tokyo"}', '{\n"location": "Tokyo"\n}'])
@pytest.mark.parametrize("channel", ["commentary", "analysis"])
def test_single_tool_call(args: str, channel: str) -> None:
    tokens = rendered("Weather?", [call("functions.get_current_weather", args, channel)])
    assert whole(tokens) == (None, None, [("get_current_weather", WEATHER)])


def test_tool_call_argument_forms() -> None:
    response = [
        call("functions.get_current_weather", '{"location": "Tokyo"}'),
        call("functions.get_user_location", '{"location": "Tokyo"}'),
        call("functions.no_content_type", '{"location": "Tokyo"}', ctype=None),
        call("functions.not_json_no_content_type", "foo", ctype=None),
        call("functions.empty_args", "{}"),
        call("functions.no_args", ""),
    ]
    assert whole(rendered("Where?", response))[2] == [
        ("get_current_weather", WEATHER),
        ("get_user_location", WEATHER),
        ("no_content_type", WEATHER),
        ("not_json_no_content_type", "foo"),
        ("empty_args", "{}"),
        ("no_args", ""),
    ]


def test_recipients() -> None:
    bare = [call("get_current_weather", '{"location": "Tokyo"}'), call("get_user_location", "{}")]
    assert whole(rendered("Both.", bare))[2] == [
        ("get_current_weather", WEATHER),
        ("get_user_location", "{}"),
    ]
    to_assistant = [call("assistant", "Some tool response", ctype=None)]
    to_assistant.append(assistant("Here is the answer", "final"))
    assert whole(rendered("Hello", to_assistant)) == (None, "Here is the answer", [])
    dotted = [call("math.sum", '{"a": 2, "b": 3}')]
    assert whole(rendered("2+3", dotted))[2] == [("math.sum", '{"a": 2, "b": 3}')]


def test_calls_with_reasoning_and_final() -> None:
    response = [
        assistant("User asked about the weather.", "analysis"),
        call("functions.get_current_weather", '{"location": "Tokyo"}'),
        assistant("This tool call will get the weather.", "final"),
    ]
    assert whole(rendered("Weather?", response)) == (
        "User asked about the weather.",
        "This tool call will get the weather.",
        [("get_current_weather", WEATHER)],
    )


def test_truncated_outputs() -> None:
    partial_final = ids("<|channel|>final<|message|>I'm in the middle of answering")
    assert whole(partial_final) == (None, "I'm in the middle of answering", [])
    partial_analysis = ids("<|channel|>analysis<|message|>I'm in the middle of thinking")
    assert whole(partial_analysis) == ("I'm in the middle of thinking", None, [])
    text = (
        "<|channel|>analysis<|message|>I'm thinking.<|end|><|start|>assistant<|channel|>final"
        "<|message|>I'm in the middle of answering"
    )
    assert whole(ids(text)) == ("I'm thinking.", "I'm in the middle of answering", [])


def test_malformed_output_recovers_raw_text() -> None:
    w = ho.parse(ids("".join(MALFORMED)))
    assert (w.reasoning, w.content, w.tool_calls) == ("thinking", "thinking\n" + MALFORMED[-1], [])
    assert w.recovered


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("<|channel|>commentary<|message|>I'll search for that", "I'll search for that"),
        (
            "<|channel|>commentary<|message|>Let me look that up.<|end|>"
            "<|start|>assistant<|channel|>final<|message|>The answer is 42.<|end|>",
            "Let me look that up.\nThe answer is 42.",
        ),
    ],
)
def test_commentary_preambles(text: str, content: str) -> None:
    assert whole(ids(text)) == (None, content, [])


def test_preamble_then_call() -> None:
    text = (
        "<|channel|>commentary<|message|>Let me check the weather.<|end|>"
        "<|start|>assistant to=functions.get_weather<|channel|>commentary"
        '<|message|>{"location": "SF"}<|end|>'
    )
    assert whole(ids(text)) == (
        None,
        "Let me check the weather.",
        [("get_weather", json.dumps({"location": "SF"}))],
    )


# ----------------------------------------------------------------------------- parse_delta


def chunked(*texts: str) -> tuple[list[int], list[int]]:
    parts = [ids(t) for t in texts]
    return [i for p in parts for i in p], [len(p) for p in parts]


def entries(delta: dict | None) -> list[tuple[int, str | None, str]]:
    return [
        (c["index"], c.get("name"), c["arguments"]) for c in (delta or {}).get("tool_calls", [])
    ]


def test_stream_basic() -> None:
    tokens, sizes = chunked(
        "<|channel|>analysis<|message|>Thinking",
        "<|end|><|start|>assistant<|channel|>final<|message|>Answer",
    )
    assert ho.stream(tokens, sizes) == [{"reasoning": "Thinking"}, {"content": "Answer"}]


def test_stream_malformed_recovers_raw_text() -> None:
    tokens, sizes = chunked(*MALFORMED)
    first, second, last = ho.stream(tokens, sizes)
    assert first == {"reasoning": "thinking"}
    assert second == {"content": "thinking"}
    assert last == {"content": MALFORMED[-1]}


@pytest.mark.parametrize("channel", ["commentary", "analysis"])
def test_stream_call_split_across_chunks(channel: str) -> None:
    tokens, sizes = chunked(
        "<|channel|>analysis<|message|>Thinking<|end|>"
        f"<|start|>assistant to=functions.get_weather<|channel|>{channel}"
        '<|constrain|>json<|message|>{"location": ',
        '"Paris"}<|call|>',
        "",
    )
    first, second, _ = ho.stream(tokens, sizes)
    assert first is not None and first["reasoning"] == "Thinking" and "content" not in first
    assert entries(first) == [(0, "get_weather", '{"location": ')]
    assert entries(second) == [(0, None, '"Paris"}')]


def test_stream_call_indexes() -> None:
    tokens, sizes = chunked(
        "<|channel|>analysis<|message|>Plan<|end|>"
        "<|start|>assistant to=functions.tool_a<|channel|>commentary"
        '<|constrain|>json<|message|>{"a": 1}<|call|>'
        "<|start|>assistant to=functions.tool_b<|channel|>commentary"
        '<|constrain|>json<|message|>{"b": ',
        "2",
        "}<|call|><|start|>assistant<|channel|>final<|message|>Done<|end|>"
        "<|start|>assistant to=functions.tool_c<|channel|>commentary"
        '<|constrain|>json<|message|>{"c": 3}',
        "",
    )
    first, second, third, _ = ho.stream(tokens, sizes)
    assert entries(first) == [(0, "tool_a", '{"a": 1}'), (1, "tool_b", '{"b": ')]
    assert entries(second) == [(1, None, "2")]
    assert third is not None and third["content"] == "Done"
    assert entries(third) == [(1, None, "}"), (2, "tool_c", '{"c": 3}')]


def test_stream_cross_channel_and_dotted_name() -> None:
    tokens, sizes = chunked(
        "<|channel|>analysis<|message|>Reasoning about query...<|end|>"
        "<|start|>assistant to=functions.search<|channel|>commentary"
        '<|constrain|>json<|message|>{"query": "vllm"}<|call|>'
        "<|start|>assistant<|channel|>final<|message|>Done",
        "",
    )
    (delta, _) = ho.stream(tokens, sizes)
    assert delta is not None
    assert (delta["reasoning"], delta["content"]) == ("Reasoning about query...", "Done")
    assert entries(delta) == [(0, "search", '{"query": "vllm"}')]
    tokens, sizes = chunked(
        "<|channel|>analysis<|message|>Compute this<|end|><|start|>assistant to=math.sum"
        '<|channel|>commentary<|constrain|>json<|message|>{"a": 2, "b": 3}',
        "",
    )
    assert entries(ho.stream(tokens, sizes)[0]) == [(0, "math.sum", '{"a": 2, "b": 3}')]


@pytest.mark.parametrize("recipient", ["assistant", "browser"])
def test_stream_builtin_recipient_dropped(recipient: str) -> None:
    tokens = rendered("Hello", [call(recipient, "Ignore this", ctype=None)])
    assert ho.stream(tokens, [len(tokens), 0]) == [None, None]


def test_constrained_final_recipient_normalized() -> None:
    deltas = ho.token_deltas(
        ids('<|channel|>final <|constrain|>json<|message|>{"result":true}<|end|>')
    )
    assert "".join(d for _, _, d in deltas) == '{"result":true}'
    assert all(r is None for _, r, _ in deltas)


# ----------------------------------------------------------------------------- request rules


def test_request_rules() -> None:
    text = (
        "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>commentary "
        'to=functions.get_weather <|constrain|>json<|message|>{"location":"Tokyo"}<|call|>'
    )
    w = ho.parse(ids(text))
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]
    auto = ho.chat_message(w, {"tools": tools})
    assert auto == {
        "reasoning": "Think.",
        "content": None,
        "tool_calls": [("get_weather", WEATHER)],
        "finish_reason": "tool_calls",
    }
    none = ho.chat_message(w, {"tools": tools, "tool_choice": "none", "include_reasoning": False})
    assert none == {"reasoning": None, "content": None, "tool_calls": [], "finish_reason": "stop"}
    named = {"type": "function", "function": {"name": "get_weather"}}
    forced = ho.chat_message(w, {"tools": tools, "tool_choice": named})
    assert forced["content"] == "" and forced["finish_reason"] == "stop"
    streamed = ho.chat_stream(ids(text), {"tools": tools})
    assert streamed["tool_calls"] == [("get_weather", '{"location":"Tokyo"}')]  # raw when streamed
    assert streamed["reasoning"] == "Think." and streamed["finish_reason"] == "tool_calls"
    assert w.reasoning_tokens == len(ids("Think.")) + len(ids('{"location":"Tokyo"}'))
