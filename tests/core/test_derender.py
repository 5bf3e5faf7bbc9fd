"""Streaming semantics, usage, errors and determinism of `step`, as data tables.

Docstrings name the vLLM tests a case mirrors (vLLM's
tests/entrypoints/scale_out/derender/; names without `test_` are its Rust port's,
rust/src/server/src/routes/tests.rs).
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from tokenizers import Tokenizer

from tests.support.helpers import Run, chunk, end, registry
from worker.core.model import Model, Registry


@pytest.fixture
def reg(deepseek: Tokenizer) -> Registry:
    return registry(deepseek, name="deepseek-v4", max_model_len=64, max_logprobs=5)


def ids_of(tok: Tokenizer, text: str) -> list[int]:
    return list(tok.encode(text, add_special_tokens=False).ids)


def choices(run: Run) -> list[dict[str, Any]]:
    return [c for v in run.values("chunk") for c in v["choices"]]


def errors(run: Run) -> list[dict[str, Any]]:
    return [v["error"] for v in run.values("error")]


# -- streaming semantics --------------------------------------------------------------


def test_chat_chunks_have_the_openai_shape(reg: Registry, deepseek: Tokenizer) -> None:
    """test_streaming_chat_derender_roundtrip, test_role_on_first_chunk_only and
    derender_chat_stream_finish_reason_and_id_forwarded: the role in the opening chunk only;
    id, object, finish forwarded."""
    ids = ids_of(deepseek, "Hello ✅ 日本語")
    run = Run(reg)
    run.feed(chunk("chatcmpl-1", 0, ids[:2], created=1767225600))
    run.feed(chunk("chatcmpl-1", 1, ids[2:], "length"))
    run.feed(end("chatcmpl-1", 2))
    opening, first, second, done = run.values()
    assert list(first) == ["id", "object", "created", "model", "choices"]
    assert first["id"] == "chatcmpl-1"
    assert first["object"] == "chat.completion.chunk"
    assert first["created"] == 1767225600
    assert first["model"] == "deepseek-v4"
    assert opening["choices"] == [
        {
            "index": 0,
            "delta": {"role": "assistant", "content": ""},
            "logprobs": None,
            "finish_reason": None,
            "stop_reason": None,
        }
    ]
    assert "role" not in first["choices"][0]["delta"]
    assert "role" not in second["choices"][0]["delta"]
    assert second["choices"][0]["finish_reason"] == "length"
    assert second["created"] == 1767225600
    assert done == "[DONE]"
    assert run.text() == "Hello ✅ 日本語"


def test_role_is_sent_even_when_the_first_text_is_held(reg: Registry, deepseek: Tokenizer) -> None:
    ids = ids_of(deepseek, "🎉")  # two byte-level pieces: the first says nothing yet
    run = Run(reg)
    run.feed(chunk("r", 0, ids[:1]))
    run.feed(chunk("r", 1, ids[1:]))
    assert [c["delta"] for c in choices(run)] == [
        {"role": "assistant", "content": ""},
        {"content": "🎉"},
    ]


def test_records_with_nothing_to_say_produce_no_output(reg: Registry, deepseek: Tokenizer) -> None:
    ids = ids_of(deepseek, "Hi 🎉")
    run = Run(reg)
    run.feed(chunk("r", 0, ids[:1]))
    assert run.feed(chunk("r", 1, ids[1:2])) == []  # held: half an emoji
    assert run.feed(chunk("r", 2, [])) == []
    assert len(run.feed(chunk("r", 3, ids[2:]))) == 1


def test_n_greater_than_one_interleaves_with_one_role_per_index(
    reg: Registry, deepseek: Tokenizer
) -> None:
    a, b = ids_of(deepseek, "first answer"), ids_of(deepseek, "second 答案")
    run = Run(reg)
    run.feed(chunk("r", 0, a[:1], index=0, chat_request={"n": 2}))
    run.feed(chunk("r", 1, b[:1], index=1))
    run.feed(chunk("r", 2, a[1:], "stop", index=0))
    run.feed(chunk("r", 3, b[1:], "stop", index=1))
    cs = choices(run)
    assert [c["index"] for c in cs] == [0, 1, 0, 1, 0, 1]
    assert ["role" in c["delta"] for c in cs] == [True, True, False, False, False, False]
    assert run.text(index=0) == "first answer"
    assert run.text(index=1) == "second 答案"


OPENING = {"role": "assistant", "content": ""}


@pytest.mark.parametrize("first", [0, 1, 2])
def test_chat_stream_opens_with_one_role_chunk_per_choice_in_order(
    reg: Registry, deepseek: Tokenizer, first: int
) -> None:
    """vLLM's chat server opens every stream so (the official SDKs index choices by
    position, and crash on a stream whose first chunk is choice 1's): whichever choice
    the engine sends first, the roles of 0…n−1 come first, then no delta has a role."""
    ids = ids_of(deepseek, "an answer")
    run = Run(reg)
    order = [first] + [i for i in range(3) if i != first]
    for seq, index in enumerate(order):
        ctx = {"chat_request": {"n": 3}} if seq == 0 else {}
        run.feed(chunk("r", seq, ids, "stop", index=index, **ctx))
    cs = choices(run)
    assert [(c["index"], c["delta"]) for c in cs[:3]] == [(i, OPENING) for i in range(3)]
    assert all(len(v["choices"]) == 1 for v in run.values("chunk"))
    assert [c["index"] for c in cs[3:]] == order
    assert not any("role" in c["delta"] for c in cs[3:])
    assert all(run.text(index=i) == "an answer" for i in range(3))


def test_opening_before_end_and_abort_without_output(reg: Registry) -> None:
    """A stream whose first record ends it still opens: every choice has its role."""
    run = Run(reg)
    run.feed(chunk("r", 0, [], index=1, chat_request={"n": 2}))
    run.feed({"request_id": "r", "seq": 1, "type": "abort"})
    cs = choices(run)
    assert [(c["index"], c["delta"]) for c in cs[:2]] == [(0, OPENING), (1, OPENING)]
    assert [(c["index"], c["finish_reason"]) for c in cs[2:]] == [(0, "abort"), (1, "abort")]


def test_a_state_from_before_the_opening_keeps_its_roles(
    reg: Registry, deepseek: Tokenizer
) -> None:
    """A stream in flight when the worker was upgraded began with a choice's role on its
    first text: it goes on that way (no opening in the middle of a stream)."""
    from worker.core.state import decode_state, encode_state

    a, b = ids_of(deepseek, "first"), ids_of(deepseek, "second")
    run = Run(reg)
    run.feed(chunk("r", 0, a, index=0, chat_request={"n": 2}))
    old = decode_state(run.stored("r").blob)
    old.opened = False  # as the older worker wrote it: choice 0's role went with its text
    run.plant("r", 0, encode_state(old))
    run.feed(chunk("r", 1, b, index=1))
    assert choices(run)[-1]["delta"] == {"role": "assistant", "content": "second"}


def test_abort_cuts_a_character_the_cancellation_split(reg: Registry, deepseek: Tokenizer) -> None:
    """An abort cuts the output where the client cancelled it, inside a character the
    next token would have completed: the final delta holds the text up to it, never a
    U+FFFD the model did not write (an `end` flushes as the one-shot decode shows it)."""
    ids = ids_of(deepseek, "smile 😀")
    held = ids[:-1]  # " \xf0\x9f\x98": the space and half the emoji
    for kind, tail in (("abort", " "), ("end", " \ufffd")):
        run = Run(reg)
        run.feed(chunk("r", 0, held))
        run.feed({"request_id": "r", "seq": 1, "type": kind})
        assert run.text() == "smile" + tail
        assert choices(run)[-1]["finish_reason"] == ("abort" if kind == "abort" else None)


def test_a_chunk_carries_its_records_engine_metrics_in_vllm_shape(
    reg: Registry, deepseek: Tokenizer
) -> None:
    """vLLM's streaming derender passes a generate chunk's `metrics` on its chunk, in
    PerRequestMetrics' full shape (as whole responses: core/records/engine_metrics.py)."""
    run = Run(reg)
    rec = chunk("r", 0, ids_of(deepseek, "hi"), "stop")
    rec["generate_chunk"]["metrics"] = {"time_to_first_token_ms": 7}
    run.feed(rec)
    opening, first = run.values("chunk")
    assert "metrics" not in opening
    assert first["metrics"] == {
        "time_to_first_token_ms": 7.0,
        "generation_time_ms": None,
        "queue_time_ms": None,
        "mean_itl_ms": None,
        "tokens_per_second": None,
        "speculative_decoding": None,
    }


def test_completion_api_streams_text_completion_chunks(reg: Registry, deepseek: Tokenizer) -> None:
    """test_chunked_equals_oneshot, derender_completion_stream_roundtrip,
    test_finish_reason_forwarded."""
    ids = ids_of(deepseek, "streaming completion test")
    run = Run(reg)
    run.feed(chunk("cmpl-1", 0, ids[:3], api="completion"))
    run.feed(chunk("cmpl-1", 1, ids[3:], "length"))
    values = run.values("chunk")
    assert all(v["object"] == "text_completion" for v in values)
    assert [list(c) for v in values for c in v["choices"]] == [
        ["index", "text", "logprobs", "finish_reason", "stop_reason"]
    ] * 2
    assert run.text() == deepseek.decode(ids)
    assert values[-1]["choices"][0]["finish_reason"] == "length"


def test_skip_special_tokens_false_keeps_eos_text(synthetic: Tokenizer) -> None:
    """test_skip_special_tokens_threaded: the flag is honoured, not hard-coded."""
    ids = [*synthetic.encode("hello").ids, synthetic.token_to_id("<eos>")]
    texts = []
    for skip in (False, True):
        run = Run(registry(synthetic))
        req = {"skip_special_tokens": skip}
        run.feed(chunk("r", 0, ids, "length", api="completion", completion_request=req))
        texts.append(run.text())
    assert texts == ["hello<eos>", "hello"]


def test_prompt_seed_keeps_sentencepiece_leading_space(llama_sp: Tokenizer) -> None:
    """test_derender_{chat,completion}_leading_space_seeded_from_prompt."""
    prompt = llama_sp.encode("[INST] hi [/INST]").ids
    out = llama_sp.encode("Hello there, output", add_special_tokens=False).ids
    texts = []
    for seed in (None, prompt):
        run = Run(registry(llama_sp))
        run.feed(chunk("r", 0, out[:3], prompt_token_ids=seed))
        run.feed(chunk("r", 1, out[3:], "stop"))
        texts.append(run.text())
    unseeded, seeded = texts
    assert not unseeded.startswith(" ") and seeded.startswith(" ")
    assert seeded.lstrip(" ") == unseeded


# -- end and abort --------------------------------------------------------------------


def test_end_flushes_and_sends_done_once(reg: Registry, deepseek: Tokenizer) -> None:
    ids = ids_of(deepseek, "cut 🎉")
    run = Run(reg)
    run.feed(chunk("r", 0, ids[:-1]))  # ends inside the emoji: held
    run.feed(end("r", 1))
    run.feed(end("r", 1))  # redelivered: nothing
    assert run.values()[-1] == "[DONE]"
    assert run.values().count("[DONE]") == 1
    assert run.text() == deepseek.decode(ids[:-1])  # flushed as one-shot shows it


def test_abort_finishes_every_unfinished_choice(reg: Registry, deepseek: Tokenizer) -> None:
    ids = ids_of(deepseek, "partial answer")
    run = Run(reg)
    run.feed(chunk("r", 0, ids, index=0, chat_request={"n": 3}))
    run.feed(chunk("r", 1, ids, "stop", index=2))
    run.feed({"request_id": "r", "seq": 2, "type": "abort"})
    last = run.values()[-3:]
    assert last[-1] == "[DONE]"
    aborted = [(c["index"], c["finish_reason"]) for v in last[:-1] for c in v["choices"]]
    assert aborted == [(0, "abort"), (1, "abort")]  # 2 had finished; 1 was never seen


# -- usage ----------------------------------------------------------------------------


def usage_of(run: Run) -> list[dict[str, Any]]:
    return [v["usage"] for v in run.values("chunk") if not v["choices"]]


def test_include_usage_final_chunk_from_the_engine_event(
    reg: Registry, deepseek: Tokenizer
) -> None:
    """test_streaming_usage_chunk, derender_completion_stream_usage_chunk: choices [] with
    usage; the request's prompt_tokens win; total recomputed."""
    run = Run(reg)
    req = {"stream_options": {"include_usage": True}}
    run.feed(chunk("r", 0, [1000, 1001], "stop", chat_request=req, prompt_tokens=10))
    usage_event = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 5}}
    run.feed({"request_id": "r", "seq": 1, "generate_chunk": usage_event})
    run.feed(end("r", 2))
    assert usage_of(run) == [{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}]


def test_include_usage_without_engine_event_is_computed_at_end(reg: Registry) -> None:
    run = Run(reg)
    req = {"stream_options": {"include_usage": True}}
    run.feed(chunk("r", 0, [1000, 1001], chat_request=req, prompt_token_ids=[5, 6, 7]))
    run.feed(chunk("r", 1, [1002], "stop"))
    run.feed(end("r", 2))
    assert usage_of(run) == [{"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}]
    assert run.values()[-1] == "[DONE]"


def test_usage_falls_back_to_the_engine_prompt_count(reg: Registry) -> None:
    """test_usage_chunk_passthrough: no request prompt_tokens → the chunk's."""
    run = Run(reg)
    run.feed(chunk("r", 0, [1000], "stop"))  # no chat_request: engine usage is forwarded
    usage_event = {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 10}}
    run.feed({"request_id": "r", "seq": 1, "generate_chunk": usage_event})
    assert usage_of(run) == [{"prompt_tokens": 5, "completion_tokens": 10, "total_tokens": 15}]


def test_no_usage_chunk_unless_asked(reg: Registry) -> None:
    run = Run(reg)
    run.feed(chunk("r", 0, [1000], "stop", chat_request={}))
    usage_event = {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 1}}
    run.feed({"request_id": "r", "seq": 1, "generate_chunk": usage_event})
    run.feed(end("r", 2))
    assert usage_of(run) == []


def test_continuous_usage_stats_on_every_chunk(reg: Registry) -> None:
    run = Run(reg)
    opts = {"include_usage": True, "continuous_usage_stats": True}
    run.feed(chunk("r", 0, [1000, 1001], chat_request={"stream_options": opts}, prompt_tokens=4))
    run.feed(chunk("r", 1, [1002], "stop"))
    per_chunk = [v["usage"] for v in run.values("chunk")]
    assert [u["completion_tokens"] for u in per_chunk] == [0, 2, 3]  # the opening's: 0
    assert all(u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"] for u in per_chunk)


def test_usage_overflow_is_an_error(reg: Registry) -> None:
    """derender_chat_usage_overflow_rejected, derender_chat_stream_usage_overflow_rejected."""
    run = Run(reg)
    req = {"stream_options": {"include_usage": True}}
    run.feed(chunk("r", 0, [1000], "stop", chat_request=req, prompt_tokens=2**64 - 1))
    run.feed({"request_id": "r", "seq": 1, "generate_chunk": {"choices": [], "usage": {}}})
    (err,) = errors(run)
    assert "overflows the token counter" in err["message"]
    assert err["code"] == "invalid_request_error"


# -- bad input (docs/integrate/contract.md, "Errors") -------------------------------------


@pytest.mark.parametrize(
    ("record", "code", "message"),
    [
        (chunk("r", 0, [1], model="nope"), "model_not_found", "The model `nope` does not exist."),
        (
            {
                "request_id": "r",
                "seq": 0,
                "generate_chunk": {"choices": [{"index": 0}, {"index": 1}]},
            },
            "invalid_request_error",
            "at most one choice per chunk",
        ),
        (chunk("r", 0, [1] * 65), "invalid_request_error", "exceeds max_model_len (64)"),
        (chunk("r", 0, [-1, 42]), "invalid_request_error", "token id -1 outside the vocabulary"),
        (chunk("r", 0, [10**9]), "invalid_request_error", "outside the vocabulary"),
        (
            chunk("r", 0, [1], prompt_token_ids=[1] * 65),
            "invalid_request_error",
            "prompt_token_ids length (65) exceeds max_model_len",
        ),
        (
            chunk("r", 0, [1], chat_request={"logprobs": True, "top_logprobs": 6}),
            "invalid_request_error",
            "exceeds max_logprobs (5)",
        ),
        (chunk("r", 3, [1]), "state_missing", "no state for request 'r' at seq 3"),
        (
            {"request_id": "r", "seq": 0, "type": "chunk"},
            "invalid_request_error",
            "needs `generate_chunk`",
        ),
    ],
)
def test_bad_records_fail_their_request(
    reg: Registry, record: dict[str, Any], code: str, message: str
) -> None:
    run = Run(reg)
    run.feed(record)
    (err,) = errors(run)
    assert err["code"] == code
    assert message in err["message"]
    # the request is failed: later records are consumed silently, `end` still closes it
    run.feed(chunk("r", record["seq"] + 1, [1000]))
    run.feed(end("r", record["seq"] + 2))
    assert run.values("chunk") == []
    assert run.values()[-1] == "[DONE]"


def test_logprob_bounds_are_checked(reg: Registry) -> None:
    entry = {"token_id": 5, "logprob": -0.1, "top_logprobs": [{"token_id": 5, "logprob": -0.1}] * 6}
    rec = chunk("r", 0, [5])
    rec["generate_chunk"]["choices"][0]["logprobs"] = {"content": [entry]}
    run = Run(reg)
    run.feed(rec)
    (err,) = errors(run)
    assert "top_logprobs count (6) in choice 0 exceeds max_logprobs (5)" in err["message"]


def test_bounds_are_checked_before_any_tokenizer_work(
    reg: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(self: Model, skip: bool) -> None:
        raise AssertionError("tokenizer used before the bounds check")

    run = Run(reg)
    run.feed(chunk("r", 0, [1000]))
    monkeypatch.setattr(Model, "detokenizer", boom)
    run.feed(chunk("r", 1, [1] * 65))
    assert "max_model_len" in errors(run)[0]["message"]


def test_sequence_duplicates_are_skipped_and_gaps_fail(reg: Registry) -> None:
    run = Run(reg)
    run.feed(chunk("r", 0, [1000]))
    run.feed(chunk("r", 1, [1001]))
    assert run.feed(chunk("r", 1, [1001])) == []  # redelivery: nothing
    assert run.feed(chunk("r", 0, [1000])) == []
    run.feed(chunk("r", 3, [1003]))
    (err,) = errors(run)
    assert err["code"] == "sequence_gap"
    assert err["message"] == "sequence gap: got seq 3, expected 2"


def test_corrupt_state_is_replaced_by_a_failed_marker(reg: Registry) -> None:
    run = Run(reg)
    run.feed(chunk("r", 0, [1000]))
    run.plant("r", 0, b"\xc1 not msgpack")
    run.feed(chunk("r", 1, [1001]))
    assert errors(run)[0]["code"] == "state_corrupt"
    run.feed(chunk("r", 2, [1002]))
    run.feed(end("r", 3))
    assert len(errors(run)) == 1
    assert run.values()[-1] == "[DONE]"


def test_undecodable_records_are_dead_lettered_and_the_batch_goes_on(reg: Registry) -> None:
    run = Run(reg)
    good = chunk("ok", 0, [1000], "stop")
    run.feed(
        b"not json",
        json.dumps({"request_id": "bad", "seq": "zero"}).encode(),
        json.dumps(good).encode(),
        key=None,
    )
    assert len(run.dead) == 2
    assert run.dead[0].value == b"not json"
    assert dict(run.dead[0].headers)["derender-error"].startswith(b"invalid ChunkRecord")
    (err,) = errors(run)  # the second had a readable request_id
    assert err["code"] == "invalid_record"
    assert [o.key for o in run.outputs] == ["bad", "ok", "ok"]  # "ok": opening, then text


def test_key_must_equal_request_id(reg: Registry) -> None:
    run = Run(reg)
    run.feed(chunk("r", 0, [1000]), key="other")
    assert len(run.dead) == 1
    assert b"does not equal request_id" in dict(run.dead[0].headers)["derender-error"]


# -- determinism ----------------------------------------------------------------------


def test_created_comes_from_seq0_created_or_timestamp(reg: Registry) -> None:
    from worker.batch.pipeline import decode_batch, process_batch
    from worker.ports import InRecord

    rec = json.dumps(chunk("r", 0, [1000])).encode()
    result = process_batch(
        decode_batch([InRecord(rec, timestamp_ms=1_700_000_123_456)], 1 << 20), {}, reg
    )
    assert json.loads(result.outputs[0].value)["created"] == 1_700_000_123


def test_same_records_give_identical_bytes(reg: Registry, deepseek: Tokenizer) -> None:
    ids = ids_of(deepseek, "determinism: 日本語 and 😀")
    recs = [chunk("r", 0, ids[:4], chat_request={"stop": ["and"]})]
    recs += [chunk("r", 1, ids[4:], "stop"), end("r", 2)]
    runs = []
    for _ in range(2):
        run = Run(reg)
        for r in recs:
            run.feed(r)
        runs.append([(o.key, o.headers, o.value) for o in run.outputs])
    assert runs[0] == runs[1]


def test_state_of_a_plain_request_is_small_and_bounded(reg: Registry, deepseek: Tokenizer) -> None:
    ids = ids_of(deepseek, "A long answer with 中文 and emoji 🎉. " * 50)[:60]
    run = Run(registry(deepseek, max_model_len=100_000))
    sizes = []
    for seq in range(200):
        run.feed(chunk("r", seq, ids[seq % 50 : seq % 50 + 5]))
        stored = run.stored("r")
        assert stored is not None
        sizes.append(len(stored.blob))
    assert max(sizes) <= 96
    assert msgspec.msgpack.decode(stored.blob)[0] == 199  # seq is the first field
