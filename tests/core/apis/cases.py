"""Generated Responses requests for the SDK oracle (test_responses_sdk.py): one request's
output, streamed as ChunkRecords and answered whole through the one loop, plus the same
tokens answered as a chat request (what the format must say, in its own shape).

The cases are the chat SDK oracle's (`tests/core/sdk/sdk_cases.py`) with `n` = 1 and no
logprobs: every registered reasoning / tool-call format's random conversations and a
plain model with stop strings, random chunkings, `length` finishes and aborts.
"""

from __future__ import annotations

import functools
from typing import Any

from hypothesis import strategies as st

from tests.core.parsers.properties.test_properties import _tokenizer, conversations
from tests.core.parsers.shared.samples import SETUPS, chat_request
from tests.core.sdk.sdk_cases import CREATED, PLAIN, STOPS, Case, _chunks, _plain_ids, _plan
from tests.support.helpers import Run
from worker.core.model import Model, Registry
from worker.wire.outbound import DONE


@functools.cache
def registry(name: str) -> Registry:
    """A registry of the one model `name` (the plain model or a format's)."""
    if name == PLAIN:
        return Registry({PLAIN: Model(name=PLAIN, tokenizer=_tokenizer("deepseek"))}, default=PLAIN)
    s = SETUPS[name]
    model = Model(
        name=name,
        tokenizer=_tokenizer(s.tokenizer),
        reasoning_parser=s.reasoning_parser,
        tool_parser=s.tool_parser,
        strict_tool_calling=s.strict,
        response_template=s.template,
    )
    return Registry({name: model}, default=name)


def responses_request(chat: dict[str, Any]) -> dict[str, Any]:
    """A chat request's fields as a Responses request says them."""
    req: dict[str, Any] = {}
    for key, value in chat.items():
        if key == "tools":
            req["tools"] = [{"type": "function", **t["function"]} for t in value]
        elif key == "tool_choice" and isinstance(value, dict):
            req["tool_choice"] = {"type": "function", "name": value["function"]["name"]}
        elif key != "n":
            req[key] = value
    return req


@st.composite
def cases(draw: st.DrawFn, name: str) -> Case:
    """A case of format `name` (or the plain model)."""
    if name == PLAIN:
        case = draw(_plan([_plain_ids(draw)], "responses", PLAIN))
        if draw(st.booleans(), label="stop"):
            case.request["stop"] = draw(st.lists(st.sampled_from(STOPS), min_size=1, max_size=2))
        case.prompt = [0]
    else:
        setup = SETUPS[name]
        tok = _tokenizer(setup.tokenizer)
        conv = draw(conversations(setup), label="conversation")
        outputs = [list(tok.encode(setup.render(conv), add_special_tokens=False).ids)]
        case = draw(_plan(outputs, "responses", name))
        case.request.update(chat_request(setup, conv))
        case.prompt = list(tok.encode(setup.prompt_tail, add_special_tokens=False).ids)
    case.logprobs, case.top = False, 0
    return case


class Answers:
    """One case's three answers: the Responses stream's output values (ending with the
    request-end marker), the whole Responses response, and the chat whole response to
    the same tokens (the semantics every format keeps)."""

    def __init__(self, stream: list[bytes], whole: bytes, chat: bytes) -> None:
        self.stream, self.whole, self.chat = stream, whole, chat


def run(case: Case, rid: str = "resp_sdk") -> Answers:
    ids = case.outputs[0]
    parts = _chunks(ids, case.cuts[0])
    limit = case.abort_after[0] if case.abort_after is not None else len(parts)
    context: dict[str, Any] = {
        "model": case.model,
        "created": CREATED,
        "prompt_token_ids": case.prompt,
        "prompt_tokens": len(case.prompt),
    }
    req = responses_request(case.request)
    records: list[dict[str, Any]] = []
    kept: list[int] = []
    for k, part in enumerate(parts[:limit]):
        finish = case.finishes[0] if k == len(parts) - 1 else None
        choice = {"index": 0, "token_ids": part, "finish_reason": finish}
        rec: dict[str, Any] = {"request_id": rid, "seq": k, "generate_chunk": {"choices": [choice]}}
        if k == 0:
            rec.update(context, api="responses", responses_request=dict(req, stream=True))
        records.append(rec)
        kept += part
    finish = case.finishes[0] if limit == len(parts) else "abort"
    kind = "abort" if case.abort_after is not None else "end"
    records.append({"request_id": rid, "seq": len(records), "type": kind})
    case.records = records
    stream = Run(registry(case.model))
    stream.feed(*records)
    choice = {"index": 0, "token_ids": kept, "finish_reason": finish}
    whole_rec = {
        "request_id": rid,
        "seq": 0,
        "type": "response",
        **context,
        "api": "responses",
        "responses_request": req,
        "generate_response": {"choices": [choice]},
    }
    case.whole_record = whole_rec
    whole = Run(registry(case.model))
    whole.feed(whole_rec)
    chat = Run(registry(case.model))
    chat.feed(
        dict(whole_rec, api="chat", responses_request=None, chat_request=dict(case.request, n=1))
    )
    errors = [o.value for o in stream.outputs + whole.outputs + chat.outputs if o.kind == "error"]
    assert not errors, errors
    assert stream.outputs[-1].kind == "done" and stream.outputs[-1].value == DONE
    assert [o.kind for o in stream.outputs[:-1]] == ["chunk"] * (len(stream.outputs) - 1)
    (response,) = [o.value for o in whole.outputs if o.kind == "response"]
    (chat_response,) = [o.value for o in chat.outputs if o.kind == "response"]
    return Answers([o.value for o in stream.outputs], response, chat_response)
