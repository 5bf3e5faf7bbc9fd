"""`serve`'s other endpoints (models, health, metrics) and generic HTTP (unknown paths and
methods, the body's content type), over real HTTP, as vLLM 0.33 answers them.

The calls they share are in contract_calls.py; the other parts: test_contract.py (whole
responses), test_contract_errors.py, test_contract_stream.py, test_contract_http.py."""

from __future__ import annotations

import json

from tests.serve.bodies import (
    PLAIN,
    chat_body,
    generate_response,
)
from tests.serve.conftest import Client, LiveServer
from tests.serve.contract.contract_calls import CHAT


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
