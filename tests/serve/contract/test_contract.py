"""`serve`'s bodies, errors and bounds over real HTTP, against what vLLM 0.33 answers (its
tests in tests/entrypoints/scale_out/derender/; an exchange recorded from its render
server): whole (non-streaming) responses.

The calls they share are in contract_calls.py; the other parts: test_contract.py (whole
responses), test_contract_errors.py, test_contract_stream.py, test_contract_http.py."""

from __future__ import annotations

import json
from typing import Any

from tests.serve.bodies import (
    CHAT_REQUEST,
    PLAIN,
    PROMPT_IDS,
    REASONED,
    TOOL_CALL,
    TOOLS,
    chat_body,
    chunk_body,
    generate_response,
    ids,
)
from tests.serve.conftest import Client
from tests.serve.contract.contract_calls import message_error


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
