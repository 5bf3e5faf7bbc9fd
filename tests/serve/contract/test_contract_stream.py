"""`serve`'s streamed chunks over real HTTP, one call per chunk with the carried
`stream_state`, against what vLLM 0.33 answers (its tests in
tests/entrypoints/scale_out/derender/): deltas, usage, `n`, errors, the state's binding and
size, prompt seeding, echo, logprobs.

The calls they share are in contract_calls.py; the other parts: test_contract.py (whole
responses), test_contract_errors.py, test_contract_stream.py, test_contract_http.py."""

from __future__ import annotations

import base64
import json
from typing import Any

import msgspec
import pytest

from tests.serve.bodies import (
    CHAT_REQUEST,
    PLAIN,
    PROMPT_IDS,
    REASONED,
    TOOL_CALL,
    TOOLS,
    assemble,
    chunk_body,
    completion_chunk_body,
    generate_response,
    ids,
)
from tests.serve.conftest import Client
from tests.serve.contract.contract_calls import COMPLETION, message_error, stream
from worker.serve.stream_state import Sealed


def test_chat_stream_matches_the_recorded_vllm_deltas(client: Client) -> None:
    parts = [REASONED[i : i + 3] for i in range(0, len(REASONED), 3)]
    chunks, states = stream(client, parts)
    for c in chunks:
        assert c["id"] == "req-2" and c["object"] == "chat.completion.chunk"
        assert c["model"] == "deepseek-v4"
        assert len(c["choices"]) == 1
    got = assemble(chunks)
    assert got["reasoning"] == "The user wants a greeting."
    assert got["content"] == "Hello there! 你好 😀"
    assert got["finish_reason"] == "stop"
    assert got["roles"][0] == "assistant" and set(got["roles"][1:]) == {None}
    # opaque: one string, no token history
    for s in states:
        assert set(s) == {"state"} and isinstance(s["state"], str)


def test_stream_chunk_that_says_nothing_is_an_empty_delta(client: Client) -> None:
    """An incomplete character is held back: vLLM answers with one choice, empty delta."""
    emoji = ids(" 😀")
    assert len(emoji) > 1
    status, first = client.chat(chunk_body(emoji[:1], None, model="plain"))
    assert status == 200
    (choice,) = first["chunk"]["choices"]
    assert choice["index"] == 0
    delta = choice["delta"]
    assert not delta.get("content")
    status, second = client.chat(
        chunk_body(emoji[1:], first["stream_state"], model="plain", finish="stop")
    )
    assert second["chunk"]["choices"][0]["delta"]["content"] == " 😀"


def test_completion_stream_roundtrip(client: Client) -> None:
    whole = client.completion(
        {"model": "plain", "generate_responses": [generate_response(PLAIN, rid="cmpl-2")]}
    )[1]
    chunks, _ = stream(client, [PLAIN[i : i + 2] for i in range(0, len(PLAIN), 2)], COMPLETION)
    assert all(c["object"] == "text_completion" for c in chunks)
    assert all(isinstance(c["choices"][0]["text"], str) for c in chunks)
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["choices"][0]["text"]
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_stream_tool_call_streams_whole_arguments(client: Client) -> None:
    cr = dict(CHAT_REQUEST, tools=TOOLS)
    chunks, _ = stream(client, [[t] for t in TOOL_CALL], chat_request=cr)
    got = assemble(chunks)
    (call,) = got["tool_calls"]
    assert call["name"] == "get_weather"
    assert json.loads(call["arguments"]) == {"location": "杭州", "days": 5}
    assert got["finish_reason"] == "tool_calls"
    assert got["reasoning"] == "Use the tool."


def test_stream_stop_strings_work(client: Client) -> None:
    """vLLM answers 400 to a streaming stop string; we hold back the possible start of one."""
    cr = {"messages": [], "stop": ["Kenobi"]}
    chunks, _ = stream(client, [[t] for t in PLAIN], model="plain", chat_request=cr)
    got = assemble(chunks)
    assert got["content"] == "Hello there! 😀 General "
    # the choice finishes where the stop string completes; later tokens say nothing
    finished = [c["choices"][0] for c in chunks if c["choices"][0]["finish_reason"]]
    assert [(f["finish_reason"], f["stop_reason"]) for f in finished] == [("stop", "Kenobi")]
    after = chunks[[c["choices"][0]["finish_reason"] for c in chunks].index("stop") + 1 :]
    assert after and all(not c["choices"][0]["delta"] for c in after)


def test_stream_usage_chunk(client: Client) -> None:
    cr = {"messages": [], "stream_options": {"include_usage": True}}
    status, first = client.chat(
        chunk_body(PLAIN, None, model="plain", finish="stop", chat_request=cr, prompt_tokens=10)
    )
    assert status == 200
    usage_call = chunk_body(
        [], first["stream_state"], model="plain", chat_request=cr, prompt_tokens=10
    )
    usage_call["generate_chunk"] = {
        "request_id": "req-2",
        "choices": [],
        "usage": {
            "prompt_tokens": 10,
            "completion_tokens": len(PLAIN),
            "total_tokens": 10 + len(PLAIN),
        },
    }
    status, answer = client.chat(usage_call)
    assert status == 200, answer
    assert answer["chunk"]["choices"] == []
    assert answer["chunk"]["usage"] == {
        "prompt_tokens": 10,
        "completion_tokens": len(PLAIN),
        "total_tokens": 10 + len(PLAIN),
    }


def test_stream_n_choices_each_with_its_own_state(client: Client) -> None:
    """vLLM's rule for n > 1: one stream_state per choice index, each starting at null.
    Each stream opens only its own choice, once, on its first answer (as vLLM sends one
    role per choice): a client forwarding both streams sends each role once."""
    states: dict[int, Any] = {0: None, 1: None}
    texts = {0: "", 1: ""}
    request = {"model": "plain", "messages": [], "n": 2}
    for t in PLAIN:
        for index in (0, 1):
            body = chunk_body([t], states[index], model="plain", index=index, chat_request=request)
            status, answer = client.chat(body)
            assert status == 200
            (c,) = answer["chunk"]["choices"]
            assert c["index"] == index
            assert c["delta"].get("role") == ("assistant" if states[index] is None else None)
            texts[index] += c["delta"].get("content") or ""
            states[index] = answer["stream_state"]
    assert texts[0] == texts[1] == "Hello there! 😀 General Kenobi. 日本語のテキスト"


def test_stream_n_choices_in_one_state_open_once(client: Client) -> None:
    """One stream_state for every choice (the core interleaves them, as on Kafka): each
    answer holds its chunk's choice only, as with one state per choice (no call can tell
    the two apart); a choice's first answer opens it, its role joined to its first delta;
    no later delta has a role."""
    state: Any = None
    texts = {0: "", 1: "", 2: ""}
    request = {"model": "plain", "messages": [], "n": 3}
    answers = []
    for t in PLAIN:
        for index in (2, 0, 1):
            body = chunk_body([t], state, model="plain", index=index, chat_request=request)
            status, answer = client.chat(body)
            assert status == 200
            answers.append(answer["chunk"])
            for c in answer["chunk"]["choices"]:
                texts[c["index"]] += c["delta"].get("content") or ""
            state = answer["stream_state"]
    opened = [[(c["index"], c["delta"].get("role")) for c in a["choices"]] for a in answers[:3]]
    assert opened == [[(2, "assistant")], [(0, "assistant")], [(1, "assistant")]]
    assert not any("role" in c["delta"] for a in answers[3:] for c in a["choices"])
    assert all(len(a["choices"]) == 1 for a in answers)
    assert texts[0] == texts[1] == texts[2] == "Hello there! 😀 General Kenobi. 日本語のテキスト"


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"stream": True, "model": "plain"}, "generate_chunk"),
        (
            {
                "stream": True,
                "model": "plain",
                "generate_chunk": {
                    "request_id": "r",
                    "choices": [{"index": 0, "token_ids": [1]}, {"index": 1, "token_ids": [2]}],
                },
            },
            "at most one choice per chunk",
        ),
        (chunk_body([42] * 129, None, model="tiny"), "max_model_len"),
        (dict(chunk_body(PLAIN, None), chat_request=None), "chat_request is required"),
        (dict(chunk_body(PLAIN, None), prompt_token_ids=None), "prompt_token_ids is required"),
        (
            chunk_body(PLAIN, {"prev_tokens": [], "prefix_offset": 0, "read_offset": 0}),
            "not returned by this server",
        ),
        (chunk_body(PLAIN, {"state": "!!!not base64!!!"}), "does not decode"),
        (chunk_body(PLAIN, {"state": 7}), "stream_state"),
    ],
)
def test_stream_errors(client: Client, body: dict[str, Any], needle: str) -> None:
    status, answer = client.chat(body)
    assert status == 400, answer
    assert needle in message_error(answer)


def test_stream_state_of_another_request_is_refused(client: Client) -> None:
    status, first = client.chat(chunk_body(REASONED[:3], None, rid="req-a"))
    assert status == 200
    state = first["stream_state"]
    status, answer = client.chat(chunk_body(REASONED[3:6], state, rid="req-b"))
    assert status == 400
    assert "does not belong to request 'req-b'" in message_error(answer)
    assert answer["error"]["param"] == "stream_state"
    # the same state on the other endpoint (another API)
    status, answer = client.completion(completion_chunk_body(REASONED[3:6], state, rid="req-a"))
    assert status == 400 and "does not belong" in message_error(answer)
    # and it still works for its own request
    status, answer = client.chat(chunk_body(REASONED[3:6], state, rid="req-a"))
    assert status == 200


@pytest.mark.parametrize("where", ["blob", "seq", "tag", "cut"])
def test_stream_state_altered_is_refused(client: Client, where: str) -> None:
    status, first = client.chat(chunk_body(REASONED[:3], None, rid="req-x"))
    assert status == 200
    raw = base64.b64decode(first["stream_state"]["state"])
    sealed = msgspec.msgpack.decode(raw, type=Sealed)
    if where == "blob":
        blob = bytearray(sealed.blob)
        blob[-1] ^= 1
        sealed.blob = bytes(blob)
        forged = msgspec.msgpack.encode(sealed)
    elif where == "seq":
        sealed.seq += 1
        forged = msgspec.msgpack.encode(sealed)
    elif where == "tag":
        sealed.tag = bytes(16)
        forged = msgspec.msgpack.encode(sealed)
    else:
        forged = raw[:-3]
    state = {"state": base64.b64encode(forged).decode()}
    status, answer = client.chat(chunk_body(REASONED[3:6], state, rid="req-x"))
    assert status == 400, answer
    assert "invalid stream_state" in message_error(answer)


def test_stream_state_tables_altered_is_refused(client: Client) -> None:
    """The request's tables (its stop strings, tools) ride in the stream_state beside the
    state, sealed with it: a client cannot swap in other stop strings."""
    cr = {"messages": [], "stop": ["Kenobi"]}
    status, first = client.chat(
        chunk_body(PLAIN[:2], None, model="plain", chat_request=cr, rid="req-t")
    )
    assert status == 200
    sealed = msgspec.msgpack.decode(base64.b64decode(first["stream_state"]["state"]), type=Sealed)
    assert b"Kenobi" in sealed.tables and b"Kenobi" not in sealed.blob
    sealed.tables = sealed.tables.replace(b"Kenobi", b"Kenobj")
    state = {"state": base64.b64encode(msgspec.msgpack.encode(sealed)).decode()}
    status, answer = client.chat(chunk_body(PLAIN[2:4], state, model="plain", rid="req-t"))
    assert status == 400, answer
    assert "invalid stream_state" in message_error(answer)
    status, answer = client.chat(
        chunk_body(PLAIN[2:4], first["stream_state"], model="plain", rid="req-t")
    )
    assert status == 200, answer


def test_stream_state_is_small(client: Client) -> None:
    _, states = stream(client, [REASONED[i : i + 3] for i in range(0, len(REASONED), 3)])
    assert max(len(s["state"]) for s in states) < 400


def test_prompt_ids_seed_the_first_token(client: Client) -> None:
    """The prompt's tail seeds the decoder (vLLM's `_seed_stream_state`): same text, parity
    of leading spaces."""
    out = ids(" world")
    seeded = client.chat(
        {
            "model": "plain",
            "generate_response": generate_response(out),
            "prompt_token_ids": ids("Hello"),
        }
    )[1]
    assert seeded["choices"][0]["message"]["content"] == " world"
    status, first = client.chat(
        chunk_body(out, None, model="plain", prompt_token_ids=PROMPT_IDS, finish="stop")
    )
    assert status == 200 and first["chunk"]["choices"][0]["delta"]["content"] == " world"


def test_completion_stream_echo_comes_first_in_the_first_chunk(client: Client) -> None:
    """`echo: true` (vLLM's Python derender ignores it; the wire contract honours it): the
    prompt comes first, in the same one chunk as the first tokens' text."""
    req = {"prompt": "Say", "echo": True}
    whole = client.completion(
        {
            "model": "plain",
            "generate_responses": [generate_response(PLAIN)],
            "completion_request": req,
        }
    )[1]
    assert whole["choices"][0]["text"].startswith("Say")
    chunks, _ = stream(client, [PLAIN[:2], PLAIN[2:]], COMPLETION, completion_request=req)
    assert all(len(c["choices"]) == 1 for c in chunks)
    assert chunks[0]["choices"][0]["text"].startswith("Say")
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["choices"][0]["text"]


def test_stream_logprobs_resolve_across_calls(client: Client) -> None:
    """A character split across two calls: the first token's logprob text is "" and the
    second's the whole character (the decoder state is the context, carried in the state)."""
    emoji = ids(" 😀")
    assert len(emoji) == 2

    def lp(t: int) -> dict[str, Any]:
        return {"content": [{"token_id": t, "logprob": -0.5, "rank": 1, "top_logprobs": []}]}

    cr = {"messages": [], "logprobs": True}
    body = chunk_body([emoji[0]], None, model="plain", chat_request=cr)
    body["generate_chunk"]["choices"][0]["logprobs"] = lp(emoji[0])
    status, first = client.chat(body)
    assert status == 200, first
    body = chunk_body(
        [emoji[1]], first["stream_state"], model="plain", chat_request=cr, finish="stop"
    )
    body["generate_chunk"]["choices"][0]["logprobs"] = lp(emoji[1])
    status, second = client.chat(body)
    assert status == 200, second
    a = first["chunk"]["choices"][0]["logprobs"]["content"][0]
    b = second["chunk"]["choices"][0]["logprobs"]["content"][0]
    assert (a["token"], a["bytes"]) == ("", [])
    assert b["token"] == " 😀" and b["bytes"] == list(" 😀".encode())
