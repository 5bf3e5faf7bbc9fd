"""`serve`'s errors and bounds on whole (non-streaming) requests, over real HTTP, against
what vLLM 0.33 answers (its tests in tests/entrypoints/scale_out/derender/).

The calls they share are in contract_calls.py; the other parts: test_contract.py (whole
responses), test_contract_errors.py, test_contract_stream.py, test_contract_http.py."""

from __future__ import annotations

from typing import Any

import pytest

from tests.serve.bodies import (
    PLAIN,
    generate_response,
)
from tests.serve.conftest import Client
from tests.serve.contract.contract_calls import message_error


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
