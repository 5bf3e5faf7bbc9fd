"""From a client's request to ChunkRecords: the generate call made of vLLM's render, the
request context the seq-0 record carries, and a whole generate output gathered from the
stream for a client that asked for `stream: false`.

docs/integrate/contract.md is the contract: one record per generate event (seq 0 with
`api`, `model`, `created`, `prompt_tokens`, `prompt_token_ids`, the client's request and
the reply partition), `end` at `[DONE]`, `abort` when the generation broke off; a
non-streamed request is one `response` record.
"""

from __future__ import annotations

import uuid
from typing import Any

from worker.gateway.dialects import CHAT, COMPLETION, DIALECTS
from worker.gateway.errors import Refused

__all__ = ["CHAT", "COMPLETION"]
ID_PREFIX = {api: d.id_prefix for api, d in DIALECTS.items()}
# vLLM's completions default: render leaves out a max_tokens equal to it, and generate
# then runs to max_model_len, so the gateway puts it back.
COMPLETION_MAX_TOKENS = DIALECTS[COMPLETION].default_max_tokens


def new_request_id(api: str) -> str:
    """The one id of a request: the engine's, the records' key and the answers' `id`."""
    return ID_PREFIX[api] + uuid.uuid4().hex


def one_rendered(api: str, rendered: Any) -> dict[str, Any]:
    """The generate request of a render answer (completion: its one prompt's)."""
    if api == COMPLETION and isinstance(rendered, list):
        if len(rendered) != 1:
            raise Refused.of(
                f"the gateway takes one prompt per completion request, got {len(rendered)}",
                400,
                "prompt",
            )
        rendered = rendered[0]
    if not isinstance(rendered, dict) or not isinstance(rendered.get("token_ids"), list):
        raise Refused.of("the render answer is not a generate request", 502)
    return rendered


def max_tokens(api: str, body: dict[str, Any]) -> int | None:
    """The output bound the client asked for (None: up to the model's length)."""
    dialect = DIALECTS[api]
    # (the first key given wins, null included: a null completion max_tokens is no bound)
    given = [body[k] for k in dialect.max_tokens_keys if k in body]
    value = given[0] if given else dialect.default_max_tokens
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def generate_request(
    api: str, rendered: dict[str, Any], body: dict[str, Any], request_id: str
) -> dict[str, Any]:
    """The rendered request as the gateway sends it to generate: under its id, streamed
    with usage, its max_tokens restored."""
    params = dict(rendered.get("sampling_params") or {})
    wanted = max_tokens(api, body)
    if wanted is not None and params.get("max_tokens") is None:
        params["max_tokens"] = wanted
    return {
        **rendered,
        "request_id": request_id,
        "sampling_params": params,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def context(
    api: str,
    body: dict[str, Any],
    rendered: dict[str, Any],
    created: int,
    reply_partition: int | None,
) -> dict[str, Any]:
    """What the seq-0 record carries besides its event."""
    prompt = [int(t) for t in rendered["token_ids"]]
    ctx: dict[str, Any] = {
        "api": api,
        "model": body.get("model") or rendered.get("model"),
        "created": created,
        "prompt_tokens": len(prompt),
        "prompt_token_ids": prompt,
        DIALECTS[api].request_field: body,
    }
    if reply_partition is not None:
        ctx["reply_partition"] = reply_partition
    return ctx


def abort_record(reason: str) -> dict[str, Any]:
    # (`reason` is for people reading the topic: the worker ignores fields it does not know.)
    return {"type": "abort", "reason": reason}


class WholeOutput:
    """A generate stream gathered into the one whole output a `response` record carries:
    each choice's token ids and logprobs joined, its last finish and stop reasons."""

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        self.choices: dict[int, dict[str, Any]] = {}
        self.extra: dict[str, Any] = {}

    def add(self, event: dict[str, Any]) -> None:
        for c in event.get("choices") or []:
            index = int(c.get("index", 0))
            choice = self.choices.setdefault(
                index, {"index": index, "token_ids": [], "logprobs": None}
            )
            choice["token_ids"] += c.get("token_ids") or []
            content = (c.get("logprobs") or {}).get("content")
            if content is not None:
                if choice["logprobs"] is None:
                    choice["logprobs"] = {"content": []}
                choice["logprobs"]["content"] += content
            if c.get("finish_reason") is not None:
                choice["finish_reason"] = c["finish_reason"]
                choice["stop_reason"] = c.get("stop_reason")
        for key in ("usage", "prompt_logprobs", "kv_transfer_params"):
            if event.get(key) is not None:
                self.extra[key] = event[key]

    def response(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "choices": [self.choices[i] for i in sorted(self.choices)],
            **self.extra,
        }
