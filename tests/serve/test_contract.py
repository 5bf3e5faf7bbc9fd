"""`serve`'s bodies, errors and bounds over real HTTP, against what vLLM 0.33 answers
(reference/vllm-derender-behaviors.md; EXCHANGES.md for the recorded exchange)."""

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
    chat_body,
    chunk_body,
    completion_chunk_body,
    generate_response,
    ids,
)
from tests.serve.conftest import Client, LiveServer
from worker.serve.stream_state import Sealed

CHAT = "/v1/chat/completions/derender"
COMPLETION = "/v1/completions/derender"


def stream(
    client: Client, parts: list[list[int]], path: str = CHAT, **kw: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Streams `parts` one call each, carrying stream_state; (chunks, states)."""
    state = None
    chunks, states = [], []
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if path == CHAT:
            body = chunk_body(part, state, finish="stop" if last else None, **kw)
        else:
            body = completion_chunk_body(part, state, finish="stop" if last else None, **kw)
        status, answer = client.post(path, body)
        assert status == 200, answer
        assert set(answer) == {"chunk", "stream_state"}
        chunks.append(answer["chunk"])
        state = answer["stream_state"]
        states.append(state)
    return chunks, states


def message_error(answer: dict[str, Any]) -> str:
    return str(answer["error"]["message"])


# -- non-streaming ---------------------------------------------------------------------


def test_chat_roundtrip_is_the_recorded_vllm_answer(client: Client) -> None:
    status, answer = client.chat(chat_body(REASONED))
    assert status == 200
    assert answer["id"] == "req-1"
    assert answer["object"] == "chat.completion"
    assert answer["model"] == "deepseek-v4"
    assert isinstance(answer["created"], int)
    (choice,) = answer["choices"]
    assert choice["index"] == 0
    assert choice["message"]["role"] == "assistant"
    assert choice["message"]["content"] == "Hello there! 你好 😀"
    assert choice["message"]["reasoning"] == "The user wants a greeting."
    assert choice["finish_reason"] == "stop"
    assert choice["stop_reason"] is None
    n = len(PROMPT_IDS)
    assert answer["usage"] == {"prompt_tokens": n, "completion_tokens": 15, "total_tokens": n + 15}


def test_metrics_passthrough_in_vllm_full_shape(client: Client) -> None:
    """vLLM's test_derender_chat_metrics_passthrough: the keys of `metrics` are exactly
    PerRequestMetrics' (timings null when not sent), `speculative_decoding` with its
    per-step lists; a shape vLLM cannot read is a 400 naming the field."""
    spec = {
        "mean_acceptance_length": 2.0,
        "draft_acceptance_rate": 0.5,
        "acceptance_histogram": [0, 1],
        "num_spec_steps": 1,
        "num_accepted_draft_tokens": 1,
        "num_draft_tokens": 2,
        "num_spec_tokens": 1,
    }
    metrics = {"speculative_decoding": spec}
    status, answer = client.chat(
        chat_body(REASONED, generate_response=generate_response(REASONED, metrics=metrics))
    )
    assert status == 200, answer
    assert answer["metrics"] == {
        "time_to_first_token_ms": None,
        "generation_time_ms": None,
        "queue_time_ms": None,
        "mean_itl_ms": None,
        "tokens_per_second": None,
        "speculative_decoding": {**spec, "per_step_accepted": None, "per_step_drafted": None},
    }
    body = chunk_body(REASONED, None)
    body["generate_chunk"]["metrics"] = metrics
    status, answer = client.chat(body)
    assert status == 200, answer
    assert answer["chunk"]["metrics"]["speculative_decoding"]["per_step_drafted"] is None
    assert answer["chunk"]["metrics"]["queue_time_ms"] is None
    bad = {"speculative_decoding": {"num_spec_steps": 1}}
    status, answer = client.chat(
        chat_body(REASONED, generate_response=generate_response(REASONED, metrics=bad))
    )
    assert status == 400
    assert "speculative_decoding.mean_acceptance_length" in message_error(answer)


def test_chat_usage_defaults_to_zero_prompt_tokens_and_model_to_the_served_name(
    client: Client,
) -> None:
    body = chat_body(PLAIN, model="plain")
    del body["prompt_tokens"], body["model"]
    body["chat_request"] = {"messages": []}
    status, answer = client.chat(body)
    assert status == 200
    assert answer["model"] == "deepseek-v4"  # the registry's default
    assert answer["usage"]["prompt_tokens"] == 0
    assert answer["usage"]["completion_tokens"] == len(PLAIN)


def test_chat_plain_model_needs_no_chat_request(client: Client) -> None:
    status, answer = client.chat({"model": "plain", "generate_response": generate_response(PLAIN)})
    assert status == 200
    assert (
        answer["choices"][0]["message"]["content"]
        == "Hello there! 😀 General Kenobi. 日本語のテキスト"
    )


def test_chat_tool_call_and_finish_reason(client: Client) -> None:
    cr = dict(CHAT_REQUEST, tools=TOOLS)
    status, answer = client.chat(chat_body(TOOL_CALL, chat_request=cr))
    assert status == 200
    msg = answer["choices"][0]["message"]
    (call,) = msg["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"location": "杭州", "days": 5}
    assert call["id"].startswith("chatcmpl-tool-")
    assert answer["choices"][0]["finish_reason"] == "tool_calls"
    assert msg["reasoning"] == "Use the tool."


def test_chat_passthrough_fields(client: Client) -> None:
    gen = generate_response(
        PLAIN, prompt_logprobs=[None, None], kv_transfer_params={"key": "value"}
    )
    status, answer = client.chat({"model": "plain", "generate_response": gen})
    assert status == 200
    assert answer["prompt_logprobs"] == [None, None]
    assert answer["kv_transfer_params"] == {"key": "value"}


def test_chat_stop_string_is_cut_in_a_whole_response(client: Client) -> None:
    body = {
        "model": "plain",
        "generate_response": generate_response(PLAIN),
        "chat_request": {"messages": [], "stop": ["Kenobi"]},
    }
    status, answer = client.chat(body)
    assert status == 200
    choice = answer["choices"][0]
    assert choice["message"]["content"] == "Hello there! 😀 General "
    assert choice["stop_reason"] == "Kenobi"


def test_chat_logprobs_resolve_ids_to_text_and_bytes(client: Client) -> None:
    token = PLAIN[0]
    lp = {
        "content": [
            {
                "token_id": token,
                "logprob": -0.25,
                "rank": 1,
                "top_logprobs": [{"token_id": token, "logprob": -0.25, "rank": 1}],
            }
        ]
    }
    gen = {
        "request_id": "lp",
        "choices": [{"index": 0, "token_ids": [token], "finish_reason": "length", "logprobs": lp}],
    }
    body = {
        "model": "plain",
        "generate_response": gen,
        "chat_request": {"messages": [], "logprobs": True, "top_logprobs": 1},
    }
    status, answer = client.chat(body)
    assert status == 200, answer
    (entry,) = answer["choices"][0]["logprobs"]["content"]
    assert entry["token"] == "Hello" and entry["bytes"] == list(b"Hello")
    assert entry["top_logprobs"][0]["token"] == "Hello"


def test_completion_roundtrip_reindexes_and_sums_usage(client: Client) -> None:
    body = {
        "model": "plain",
        "generate_responses": [
            generate_response(ids(" ab"), rid="cmpl-first"),
            generate_response(ids(" cd"), rid="cmpl-second", finish="length"),
        ],
        "prompt_tokens": [5, 10],
    }
    status, answer = client.completion(body)
    assert status == 200
    assert answer["id"] == "cmpl-first"
    assert answer["object"] == "text_completion"
    got = [(c["index"], c["text"], c["finish_reason"]) for c in answer["choices"]]
    assert got == [(0, " ab", "stop"), (1, " cd", "length")]
    completion = len(ids(" ab")) + len(ids(" cd"))
    assert answer["usage"] == {
        "prompt_tokens": 15,
        "completion_tokens": completion,
        "total_tokens": 15 + completion,
    }


def test_completion_kv_transfer_params_agree_or_null(client: Client) -> None:
    def body(a: Any, b: Any) -> dict[str, Any]:
        return {
            "model": "plain",
            "generate_responses": [
                generate_response(PLAIN[:2], kv_transfer_params=a),
                generate_response(PLAIN[:2], kv_transfer_params=b),
            ],
        }

    assert client.completion(body({"node": "a"}, {"node": "a"}))[1]["kv_transfer_params"] == {
        "node": "a"
    }
    status, answer = client.completion(body({"node": "a"}, {"node": "b"}))
    assert status == 200 and answer["kv_transfer_params"] is None


def test_completion_prompt_token_ids_seed_per_response(client: Client) -> None:
    """A null entry falls back to the generate output's own prompt ids (vLLM)."""
    out = ids(" world")
    body = {
        "model": "plain",
        "generate_responses": [generate_response(out), generate_response(out)],
        "prompt_token_ids": [ids("Hello"), None],
    }
    status, answer = client.completion(body)
    assert status == 200
    assert [c["text"] for c in answer["choices"]] == [" world", " world"]


# -- non-streaming errors and bounds ----------------------------------------------------


@pytest.mark.parametrize(
    ("body", "status", "needle"),
    [
        ({"model": "nope", "generate_response": generate_response(PLAIN)}, 404, "does not exist"),
        (
            {"model": "plain", "generate_response": generate_response([])},
            400,
            "empty or null token_ids",
        ),
        (
            {"model": "plain", "generate_response": generate_response(None)},
            400,
            "empty or null token_ids",
        ),
        ({"model": "plain", "generate_response": generate_response([-1, 42])}, 400, "token_ids"),
        (
            {"model": "tiny", "generate_response": generate_response([42] * 129)},
            400,
            "max_model_len",
        ),
        (
            {
                "model": "tiny",
                "prompt_token_ids": [42] * 129,
                "generate_response": generate_response([42]),
            },
            400,
            "max_model_len",
        ),
        ({"model": "plain"}, 400, "generate_response"),
        ({"model": "plain", "generate_response": {"choices": "x"}}, 400, "generate_response"),
        (
            {"model": "deepseek-v4", "generate_response": generate_response(PLAIN)},
            400,
            "chat_request is required",
        ),
        (
            {"model": "plain", "stream": "yes", "generate_response": generate_response(PLAIN)},
            400,
            "stream",
        ),
    ],
)
def test_chat_errors(client: Client, body: dict[str, Any], status: int, needle: str) -> None:
    got, answer = client.chat(body)
    assert got == status, answer
    err = answer["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["code"] == status
    assert needle in err["message"]
    assert err["type"] in ("BadRequestError", "Bad Request", "NotFoundError")
    if status == 404:
        assert err["message"] == (
            "The model `nope` does not exist. Valid aliases: deepseek-v4, plain, tiny."
        )
        assert err["param"] == "model" and err["type"] == "NotFoundError"


def test_chat_bounds_choices_and_top_logprobs(client: Client) -> None:
    many = {
        "request_id": "r",
        "choices": [{"index": i, "token_ids": [42]} for i in range(16385)],
    }
    status, answer = client.chat({"model": "plain", "generate_response": many})
    assert status == 400 and "choices count" in message_error(answer)
    top = [{"token_id": 42, "logprob": -1.0}] * 25
    lp = {"content": [{"token_id": 42, "logprob": -1.0, "top_logprobs": top}]}
    gen = {"request_id": "r", "choices": [{"index": 0, "token_ids": [42], "logprobs": lp}]}
    status, answer = client.chat({"model": "plain", "generate_response": gen})
    assert status == 400
    assert "top_logprobs count" in message_error(answer) and "max_logprobs" in message_error(answer)


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"model": "plain", "generate_responses": []}, "generate_responses must not be empty"),
        (
            {
                "model": "plain",
                "generate_responses": [generate_response(PLAIN)],
                "prompt_tokens": [5, 10],
            },
            "prompt_tokens length (2) must equal generate_responses length (1)",
        ),
        (
            {
                "model": "plain",
                "generate_responses": [generate_response(PLAIN)],
                "prompt_token_ids": [[1, 2], [3, 4]],
            },
            "prompt_token_ids length (2) must equal generate_responses length (1)",
        ),
        (
            {
                "model": "tiny",
                "generate_responses": [generate_response([42])],
                "prompt_token_ids": [[42] * 129],
            },
            "max_model_len",
        ),
        (
            {
                "model": "plain",
                "generate_responses": [
                    {"request_id": "r", "choices": [{"index": 0, "token_ids": []}]}
                ],
            },
            "empty or null token_ids",
        ),
        ({"model": "plain"}, "generate_responses"),
    ],
)
def test_completion_errors(client: Client, body: dict[str, Any], needle: str) -> None:
    status, answer = client.completion(body)
    assert status == 400, answer
    assert needle in message_error(answer)
    assert answer["error"]["code"] == 400


def test_completion_too_many_generate_responses(client: Client) -> None:
    body = {"model": "plain", "generate_responses": [generate_response([42])] * 16385}
    status, answer = client.completion(body)
    assert status == 400 and "generate_responses count" in message_error(answer)


# -- streaming ---------------------------------------------------------------------------


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
    """vLLM's rule for n > 1: one stream_state per choice index. Each stream's first
    answer opens every choice (roles 0…n−1, in order), as one state does not know of the
    others: a client forwarding both streams sends those openings once."""
    states: dict[int, Any] = {0: None, 1: None}
    texts = {0: "", 1: ""}
    request = {"model": "plain", "messages": [], "n": 2}
    for t in PLAIN:
        for index in (0, 1):
            body = chunk_body([t], states[index], model="plain", index=index, chat_request=request)
            status, answer = client.chat(body)
            assert status == 200
            cs = answer["chunk"]["choices"]
            if states[index] is None:
                assert [(c["index"], c["delta"]["role"]) for c in cs] == [
                    (0, "assistant"),
                    (1, "assistant"),
                ]
            else:
                assert [c["index"] for c in cs] == [index]
                assert "role" not in cs[0]["delta"]
            texts[index] += next(c for c in cs if c["index"] == index)["delta"].get("content") or ""
            states[index] = answer["stream_state"]
    assert texts[0] == texts[1] == "Hello there! 😀 General Kenobi. 日本語のテキスト"


def test_stream_n_choices_in_one_state_open_once(client: Client) -> None:
    """One stream_state for every choice (the core interleaves them, as on Kafka): the
    first answer opens choices 0…n−1 in order whichever choice came first, with that
    choice's first delta joined to its opening; no later delta has a role."""
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
    first = answers[0]["choices"]
    assert [(c["index"], c["delta"].get("role")) for c in first] == [
        (0, "assistant"),
        (1, "assistant"),
        (2, "assistant"),
    ]
    assert [c["delta"]["content"] for c in first[:2]] == ["", ""]
    assert not any("role" in c["delta"] for a in answers[1:] for c in a["choices"])
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


# -- other endpoints and generic HTTP ---------------------------------------------------


def test_models_health_metrics(server: LiveServer) -> None:
    c = Client(server.port)
    try:
        status, data, _ = c.request("GET", "/v1/models")
        assert status == 200
        models = json.loads(data)
        assert models["object"] == "list"
        assert [m["id"] for m in models["data"]] == ["deepseek-v4", "plain", "tiny"]
        card = models["data"][2]
        assert card["object"] == "model" and card["max_model_len"] == 128
        assert card["owned_by"] == "vllm" and isinstance(card["created"], int)
        (perm,) = card["permission"]
        assert perm["object"] == "model_permission" and perm["id"].startswith("modelperm-")
        assert perm["allow_sampling"] and perm["allow_logprobs"] and not perm["allow_fine_tuning"]
        status, data, _ = c.request("GET", "/health")
        assert (status, data) == (200, b"")
        c.chat({"model": "plain", "generate_response": generate_response(PLAIN)})
        status, data, resp = c.request("GET", "/metrics")
        assert status == 200 and resp.headers["content-type"].startswith("text/plain")
        text = data.decode()
        assert 'derender_http_requests_total{endpoint="chat",status="200"}' in text
        assert "derender_tokens_total" in text
    finally:
        c.close()


def test_unknown_path_and_method_are_vllm_json_errors(client: Client) -> None:
    status, data, _ = client.request("GET", "/v1/nope")
    assert status == 404
    assert json.loads(data) == {
        "error": {"message": "Not Found", "type": "Not Found", "param": None, "code": 404}
    }
    status, data, resp = client.request("GET", CHAT)
    assert status == 405 and json.loads(data)["error"]["code"] == 405
    assert resp.headers["allow"] == "POST"


def test_body_must_be_json_content(client: Client) -> None:
    body = json.dumps(chat_body(PLAIN, model="plain")).encode()
    status, data, _ = client.request("POST", CHAT, body, {"Content-Type": "text/plain"})
    assert status == 400
    assert "Only 'application/json' is allowed" in json.loads(data)["error"]["message"]
    # a charset parameter is fine
    status, _, _ = client.request(
        "POST", CHAT, body, {"Content-Type": "application/json; charset=utf-8"}
    )
    assert status == 200


def test_prompt_ids_seed_the_first_token(client: Client) -> None:
    """The prompt's tail seeds the decoder (vLLM PY-4): same text, parity of leading spaces."""
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
