"""One case, two implementations: the same engine output sent to vLLM's derender endpoints
and, as ChunkRecords, through our pipeline.

A `Case` is what a generate engine produced for one request: per generate output (one
per prompt; chat and streaming have exactly one) its choices' token ids, finish and stop
reasons, logprobs and — for streaming — how the ids were cut into chunks and how the
choices' chunks interleave. Both sides see exactly the same chunks.

Nothing here imports vLLM; the vLLM side talks HTTP through `vllm_server.Peer`, which
the caller passes in.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tests.support.helpers import Run
from worker.core.model import Registry

if TYPE_CHECKING:
    from tests.peer.vllm_server import Peer

MODEL = "deepseek-v4"
# The other tokenizer families, each on the servers whose name starts with its prefix:
# Llama 3.2 (llama-*), GLM-4.7 (glm-*), MiniMax M2 (minimax-*), Qwen3 (qwen-*), gpt-oss
# (gptoss-*), MiniMax M3 (minimax_m3-*).
LLAMA_MODEL = "llama-3.2"
GLM_MODEL = "glm-4.7"
MINIMAX_MODEL = "minimax-m2"
QWEN_MODEL = "qwen3"
GPTOSS_MODEL = "gpt-oss"
M3_MODEL = "minimax-m3"
FAMILY_MODELS = {
    "llama": LLAMA_MODEL,
    "glm": GLM_MODEL,
    "minimax": MINIMAX_MODEL,
    "qwen": QWEN_MODEL,
    "gptoss": GPTOSS_MODEL,
    "minimax_m3": M3_MODEL,
}
REQUEST_ID = "req-parity"
CHAT_PATH = "/v1/chat/completions/derender"
COMPLETION_PATH = "/v1/completions/derender"


def served_model(server: str) -> str:
    """The model name a server serves (and our registry for it holds)."""
    prefix, dash, _ = server.partition("-")
    return FAMILY_MODELS.get(prefix, MODEL) if dash else MODEL


# A recorded family's server (test_recorded.py) is `<family>-recorded`.
RECORDED = "recorded"


def family(server: str) -> str:
    """The family a server belongs to: its name's prefix (`glm-on`: glm; `gemma4-recorded`:
    gemma4), or "deepseek"."""
    prefix, dash, rest = server.partition("-")
    return prefix if dash and (prefix in FAMILY_MODELS or rest == RECORDED) else "deepseek"


@dataclass
class Gen:
    """One choice of one generate output."""

    token_ids: list[int]
    finish_reason: str | None = "stop"
    stop_reason: int | str | None = None
    # One generate-wire entry per token ({"token_id", "logprob", "rank", "top_logprobs"}).
    logprobs: list[dict[str, Any]] | None = None
    # Streaming: chunk sizes, summing to len(token_ids) (an empty chunk is allowed: it
    # carries only the finish reason when it is the last).
    cuts: list[int] | None = None
    index: int = 0


@dataclass
class Case:
    name: str
    # DeepSeek V4: "on" (parsers), "off" (no parsers), "lax" (parsers, strict tool calling
    # off); Llama 3.2: "llama-off", "llama-tools" (llama3_json), "llama-lax" (the same,
    # strict tool calling off); GLM-4.7: "glm-on", "glm-lax"; MiniMax M2: "minimax-on",
    # "minimax-append"; Qwen3: "qwen-hermes", "qwen-coder"; gpt-oss: "gptoss-on",
    # "gptoss-reasoning"; MiniMax M3: "minimax_m3-on" (vllm_server.SPECS).
    server: str
    api: str  # "chat" | "completion"
    stream: bool
    # The client's request as rendered: a chat request (with messages) or a completion
    # request (with prompt). It is sent to vLLM's render for the prompt ids and passed
    # as chat_request / completion_request to both derenders.
    request: dict[str, Any]
    # Generate outputs: one per prompt (completion may have several), each a list of choices.
    outputs: list[list[Gen]]
    # Streaming: what the engine sends for usage: "none", "final" (one `choices: []`
    # event after the last chunk) or "continuous" (usage on every chunk, and final).
    engine_usage: str = "none"
    # Streaming n > 1: the order of the calls, as choice indexes (each one's chunks in
    # order); None = one choice after the other.
    order: list[int] | None = None
    # Prompt ids per generate output, filled in from vLLM's render (or set explicitly).
    prompts: list[list[int]] | None = None
    # Other settings: "model" (the served name sent; default the server's), "shape" (what
    # a tool-choice case's output is: dsml, json-required, json-named, prose, and for
    # Llama python-tag, bare, …).
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def client_request(self) -> dict[str, Any]:
        """The request as the client sent it (a streaming one says `stream: true`)."""
        return {**self.request, "stream": True} if self.stream else self.request

    @property
    def model(self) -> str:
        return str(self.extra.get("model", served_model(self.server)))

    def describe(self, decode: Callable[[list[int]], str] | None = None) -> str:
        gens = self.outputs
        parts = [
            f"{self.name} [server {self.server}, {self.api}, "
            f"{'stream' if self.stream else 'whole'}]",
            "request: " + json.dumps(_trim_request(self.request), ensure_ascii=False),
        ]
        for g, gen in enumerate(gens):
            for c in gen:
                line = (
                    f"output {g} choice {c.index}: ids {c.token_ids} finish {c.finish_reason!r}"
                    f" stop_reason {c.stop_reason!r}"
                )
                if decode is not None:
                    line += f"\n  text (specials kept): {decode(c.token_ids)!r}"
                if c.cuts is not None and self.stream:
                    line += f" cuts {c.cuts}"
                if c.logprobs is not None:
                    line += " logprobs (sampled id: candidate ids) " + " ".join(
                        f"{e['token_id']}:{[t['token_id'] for t in e.get('top_logprobs') or []]}"
                        for e in c.logprobs
                    )
                parts.append(line)
        if self.stream:
            parts.append(f"engine usage: {self.engine_usage}; order: {self.order}")
        return "\n".join(parts)


def _trim_request(req: dict[str, Any]) -> dict[str, Any]:
    out = dict(req)
    if "tools" in out:
        out["tools"] = [t["function"]["name"] for t in out["tools"]]
    return out


# --------------------------------------------------------------------------- streaming schedule


@dataclass
class Call:
    """One streamed generate event: one choice's chunk, or the usage-only event."""

    index: int | None  # None: the usage-only event (`choices: []`)
    token_ids: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    logprobs: list[dict[str, Any]] | None = None
    usage: dict[str, int] | None = None


def schedule(case: Case) -> list[Call]:
    """The generate events of a streaming case, in the order they are sent."""
    assert case.stream and len(case.outputs) == 1
    prompt = len(case.prompts[0]) if case.prompts else 0
    per_choice: dict[int, list[Call]] = {}
    for c in case.outputs[0]:
        cuts = c.cuts if c.cuts is not None else [1] * len(c.token_ids)
        assert sum(cuts) == len(c.token_ids), (cuts, c.token_ids)
        calls, at = [], 0
        for k, size in enumerate(cuts):
            last = k == len(cuts) - 1
            ids = c.token_ids[at : at + size]
            lp = c.logprobs[at : at + size] if c.logprobs is not None else None
            at += size
            calls.append(
                Call(
                    c.index,
                    ids,
                    c.finish_reason if last else None,
                    c.stop_reason if last else None,
                    lp,
                )
            )
        per_choice[c.index] = calls
    order = case.order
    if order is None:
        order = [i for i, calls in per_choice.items() for _ in calls]
    out: list[Call] = []
    pos = dict.fromkeys(per_choice, 0)
    for i in order:
        out.append(per_choice[i][pos[i]])
        pos[i] += 1
    assert all(pos[i] == len(per_choice[i]) for i in per_choice), "order misses chunks"
    done = 0
    for call in out:
        done += len(call.token_ids)
        if case.engine_usage == "continuous":
            call.usage = {"prompt_tokens": prompt, "completion_tokens": done}
    if case.engine_usage in ("final", "continuous"):
        out.append(Call(None, usage={"prompt_tokens": prompt, "completion_tokens": done}))
    return out


def _choice(
    index: int, token_ids: Any, finish: Any, stop_reason: Any, logprobs: Any
) -> dict[str, Any]:
    """One generate-wire choice, the same for a streamed chunk and a whole response."""
    ch: dict[str, Any] = {"index": index, "token_ids": token_ids, "finish_reason": finish}
    if stop_reason is not None:
        ch["stop_reason"] = stop_reason
    if logprobs is not None:
        ch["logprobs"] = {"content": logprobs}
    return ch


def generate_chunk(call: Call) -> dict[str, Any]:
    choices = []
    if call.index is not None:
        choices.append(
            _choice(call.index, call.token_ids, call.finish_reason, call.stop_reason, call.logprobs)
        )
    chunk: dict[str, Any] = {"request_id": REQUEST_ID, "choices": choices}
    if call.usage is not None:
        chunk["usage"] = call.usage
    return chunk


def generate_response(case: Case, g: int) -> dict[str, Any]:
    choices = [
        _choice(c.index, c.token_ids, c.finish_reason, c.stop_reason, c.logprobs)
        for c in case.outputs[g]
    ]
    resp: dict[str, Any] = {"request_id": f"{REQUEST_ID}-{g}", "choices": choices}
    if case.prompts is not None and len(case.outputs) > 1:
        resp["prompt_token_ids"] = case.prompts[g]
    return resp


# --------------------------------------------------------------------------- the vLLM side


@dataclass
class VllmResult:
    """What vLLM answered: streaming chunks (one per call), or one whole body, or an
    error (status and body) and the call it came at."""

    chunks: list[dict[str, Any]] = field(default_factory=list)
    body: dict[str, Any] | None = None
    status: int = 200
    error: Any = None
    error_at: int | None = None
    calls: int = 0


def run_vllm(peer: Peer, case: Case) -> VllmResult:
    key = "chat_request" if case.api == "chat" else "completion_request"
    path = CHAT_PATH if case.api == "chat" else COMPLETION_PATH
    res = VllmResult()
    assert case.prompts is not None
    if not case.stream:
        body: dict[str, Any] = {"model": case.model, key: case.client_request}
        if case.api == "chat":
            body["generate_response"] = generate_response(case, 0)
            body["prompt_tokens"] = len(case.prompts[0])
            body["prompt_token_ids"] = case.prompts[0]
        else:
            body["generate_responses"] = [
                generate_response(case, g) for g in range(len(case.outputs))
            ]
            body["prompt_tokens"] = [len(p) for p in case.prompts]
            body["prompt_token_ids"] = case.prompts
        r = peer.post(path, body)
        res.calls = 1
        if r.status != 200:
            res.status, res.error, res.error_at = r.status, r.body, 0
        else:
            res.body = r.body
        return res
    states: dict[int | None, Any] = {}
    prompt = case.prompts[0]
    for k, call in enumerate(schedule(case)):
        body = {
            "stream": True,
            "model": case.model,
            "generate_chunk": generate_chunk(call),
            "stream_state": states.get(call.index),
            "prompt_tokens": len(prompt),
            "prompt_token_ids": prompt,
            key: case.client_request,
        }
        r = peer.post(path, body)
        res.calls += 1
        if r.status != 200:
            res.status, res.error, res.error_at = r.status, r.body, k
            return res
        states[call.index] = r.body["stream_state"]
        res.chunks.append(r.body["chunk"])
    return res


# --------------------------------------------------------------------------- our side


@dataclass
class OursResult:
    """Our outputs, decoded: (kind, value) per output record, in order; `[DONE]` as
    the string."""

    outputs: list[tuple[str, Any]] = field(default_factory=list)
    dead: int = 0

    def of_kind(self, kind: str) -> list[Any]:
        return [v for k, v in self.outputs if k == kind]


def records(case: Case) -> list[dict[str, Any]]:
    """The ChunkRecords a publisher would send for this case."""
    assert case.prompts is not None
    key = "chat_request" if case.api == "chat" else "completion_request"
    head: dict[str, Any] = {
        "request_id": REQUEST_ID,
        "api": case.api,
        "model": case.model,
        "created": 1_700_000_000,
        key: case.client_request,
    }
    if len(case.prompts) == 1:
        head["prompt_tokens"] = len(case.prompts[0])
        head["prompt_token_ids"] = case.prompts[0]
    if not case.stream:
        rec = {**head, "seq": 0, "type": "response"}
        if case.api == "chat":
            rec["generate_response"] = generate_response(case, 0)
        else:
            rec["generate_responses"] = [
                generate_response(case, g) for g in range(len(case.outputs))
            ]
        return [rec]
    recs: list[dict[str, Any]] = []
    for seq, call in enumerate(schedule(case)):
        rec = {"request_id": REQUEST_ID, "seq": seq, "generate_chunk": generate_chunk(call)}
        if seq == 0:
            rec = {**head, **rec}
        recs.append(rec)
    recs.append({"request_id": REQUEST_ID, "seq": len(recs), "type": "end"})
    return recs


def run_ours(registry: Registry, case: Case) -> OursResult:
    """Feed the case's records through the real pipeline, one record per batch (the
    state goes through msgpack between records, as it does through Redis)."""
    run = Run(registry)
    for rec in records(case):
        run.feed(rec, key=REQUEST_ID)
    res = OursResult(dead=len(run.dead))
    for o in run.outputs:
        res.outputs.append((o.kind, "[DONE]" if o.kind == "done" else json.loads(o.value)))
    return res
