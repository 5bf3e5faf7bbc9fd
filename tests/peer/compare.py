"""Normalise both sides' answers to one case into the same shape, and diff them.

Normalised away (they may differ): `id`, tool-call ids, `created`, chunk boundaries (text,
reasoning, tool-call names and arguments and logprobs are compared as concatenations per
choice; a delta holding both content and the rest of an open call counts as the call, then
the content), and fields that are null on one side and absent on the other. Compared exactly:
the role (value, and that it comes once, on the choice's first delta), finish_reason,
stop_reason, usage (the final usage chunk; with continuous usage, the usage of every
chunk), chat logprobs (token, bytes, logprob, top_logprobs in order), completion logprobs
(tokens, token_logprobs, top_logprobs, text_offset), completion `text`, whole-response
message fields, and errors (vLLM's HTTP status against our error code; the messages by
what they are about).

Imports nothing of vLLM or httpx.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from tests.peer.drive import Case, OursResult, VllmResult

# vLLM's HTTP status → our error code for the same refusal.
STATUS_CODE = {400: "invalid_request_error", 404: "model_not_found"}

# What an error message is about: the first of these that it mentions.
ERROR_TOPICS = (
    ("stop strings", "stop-streaming"),
    ("does not exist", "unknown-model"),
    ("top_logprobs", "top-logprobs-bound"),
    ("max_model_len", "length-bound"),
    ("vocab", "out-of-vocab"),
    ("empty or null token_ids", "empty-token-ids"),
    ("tool_choice", "tool-choice"),
    ("tools", "tools"),
)


@dataclass
class Diff:
    path: str
    vllm: Any
    ours: Any

    def show(self) -> str:
        return f"  {self.path}:\n    vllm: {_j(self.vllm)}\n    ours: {_j(self.ours)}"


def _j(v: Any) -> str:
    s = json.dumps(v, ensure_ascii=False)
    return s if len(s) <= 2000 else s[:2000] + "…"


def error_topic(message: str) -> str:
    low = message.lower()
    for needle, topic in ERROR_TOPICS:
        if needle in low:
            return topic
    return "other"


# --------------------------------------------------------------------------- normal forms


def _lp_entry(e: dict[str, Any]) -> dict[str, Any]:
    out = {"token": e.get("token"), "logprob": e.get("logprob"), "bytes": e.get("bytes")}
    if "top_logprobs" in e:
        out["top_logprobs"] = [_lp_entry(t) for t in e.get("top_logprobs") or []]
    return out


def _chat_lp(lp: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    if lp is None:
        return None
    return [_lp_entry(e) for e in lp.get("content") or []]


def _completion_lp(lp: dict[str, Any] | None) -> dict[str, list[Any]] | None:
    if lp is None:
        return None
    return {
        k: list(lp.get(k) or [])
        for k in ("tokens", "token_logprobs", "top_logprobs", "text_offset")
    }


def _usage(u: dict[str, Any] | None) -> dict[str, int] | None:
    if u is None:
        return None
    return {k: u.get(k) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}


def _tool_calls(calls: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    out = []
    for tc in calls or []:
        fn = tc.get("function") or {}
        out.append(
            {
                "type": tc.get("type"),
                "has_id": bool(tc.get("id")),
                "name": fn.get("name"),
                "arguments": fn.get("arguments"),
            }
        )
    return out


class _Choice:
    """One choice of a stream, folded."""

    def __init__(self) -> None:
        self.deltas = 0
        self.role_at: list[int] = []
        self.roles: list[Any] = []
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.tools: dict[int, dict[str, Any]] = {}
        self.finish: list[Any] = []
        self.stop_reason: Any = None
        self.logprobs: list[Any] | None = None
        self.completion_lp: dict[str, list[Any]] | None = None
        self.text: list[str] = []
        self.finish_usage: Any = None
        # What the choice said, in order, consecutive repeats collapsed (reasoning,
        # content, tool:<index>, text): chunk boundaries do not show, order does.
        self.order: list[str] = []
        # Deltas after the one carrying finish_reason that still say something.
        self.after_finish = 0

    def said(self, kind: str) -> None:
        if self.finish:
            self.after_finish += 1
        if self.order[-1:] != [kind]:
            self.order.append(kind)

    def view(self, chat: bool) -> dict[str, Any]:
        v: dict[str, Any] = {
            "finish_reason": self.finish,
            "stop_reason": self.stop_reason,
            "order": self.order,
            "said_after_finish": self.after_finish,
        }
        if chat:
            v["role"] = {
                "value": self.roles[:1],
                "count": len(self.role_at),
                "first": self.role_at[:1] == [0],
            }
            v["content"] = "".join(self.content)
            v["reasoning"] = "".join(self.reasoning)
            v["tool_calls"] = {str(i): t for i, t in sorted(self.tools.items())}
            v["logprobs"] = self.logprobs
        else:
            v["text"] = "".join(self.text)
            v["logprobs"] = self.completion_lp
        return v


def fold_stream(chunks: list[dict[str, Any]], chat: bool) -> dict[str, Any]:
    """Streamed payloads → per choice concatenations, plus the usage chunks."""
    choices: dict[int, _Choice] = {}
    usage_chunks: list[Any] = []
    continuous: list[Any] = []
    objects: set[Any] = set()
    models: set[Any] = set()
    for chunk in chunks:
        objects.add(chunk.get("object"))
        models.add(chunk.get("model"))
        u = _usage(chunk.get("usage"))
        if not chunk.get("choices"):
            if u is not None:
                usage_chunks.append(u)
            continue
        if u is not None:
            continuous.append(u)
        for ch in chunk["choices"]:
            c = choices.setdefault(ch["index"], _Choice())
            if chat:
                d = ch.get("delta") or {}
                if d.get("role") is not None:
                    c.role_at.append(c.deltas)
                    c.roles.append(d["role"])
                reasoning = d.get("reasoning") or d.get("reasoning_content") or ""
                if reasoning:
                    c.said("reasoning")
                # One delta does not say in which order its fields came. The rest of a
                # call already open came before any content beside it (text cannot
                # appear inside a call); other calls are taken to follow the content.
                kinds = [f"tool:{tc['index']}" for tc in d.get("tool_calls") or []]
                if kinds and c.order[-1:] == kinds[:1]:
                    c.said(kinds.pop(0))
                if d.get("content"):
                    c.said("content")
                for kind in kinds:
                    c.said(kind)
                c.content.append(d.get("content") or "")
                c.reasoning.append(reasoning)
                for tc in d.get("tool_calls") or []:
                    t = c.tools.setdefault(
                        tc["index"], {"type": [], "headers": 0, "name": "", "arguments": ""}
                    )
                    if tc.get("id"):
                        t["headers"] += 1
                    if tc.get("type") is not None and tc["type"] not in t["type"]:
                        t["type"].append(tc["type"])
                    fn = tc.get("function") or {}
                    t["name"] += fn.get("name") or ""
                    t["arguments"] += fn.get("arguments") or ""
                lp = _chat_lp(ch.get("logprobs"))
                if lp is not None:
                    c.logprobs = (c.logprobs or []) + lp
            else:
                if ch.get("text"):
                    c.said("text")
                c.text.append(ch.get("text") or "")
                lp2 = _completion_lp(ch.get("logprobs"))
                if lp2 is not None:
                    if c.completion_lp is None:
                        c.completion_lp = {k: [] for k in lp2}
                    for k, vals in lp2.items():
                        c.completion_lp[k] += vals
            if ch.get("finish_reason") is not None:
                c.finish.append(ch["finish_reason"])
                c.stop_reason = ch.get("stop_reason")
                c.finish_usage = u
            c.deltas += 1
    view: dict[str, Any] = {
        "object": sorted(objects, key=str),
        "model": sorted(models, key=str),
        "choices": {str(i): c.view(chat) for i, c in sorted(choices.items())},
        "usage": usage_chunks,
    }
    view["_continuous"] = continuous
    view["_finish_usage"] = {str(i): c.finish_usage for i, c in sorted(choices.items())}
    return view


def fold_whole(body: dict[str, Any], chat: bool) -> dict[str, Any]:
    choices = {}
    for ch in body.get("choices") or []:
        v: dict[str, Any] = {
            "finish_reason": ch.get("finish_reason"),
            "stop_reason": ch.get("stop_reason"),
        }
        if chat:
            m = ch.get("message") or {}
            v["message"] = {
                "role": m.get("role"),
                "content": m.get("content"),
                "reasoning": m.get("reasoning", m.get("reasoning_content")),
                "tool_calls": _tool_calls(m.get("tool_calls")),
            }
            v["logprobs"] = _chat_lp(ch.get("logprobs"))
        else:
            v["text"] = ch.get("text")
            v["logprobs"] = _completion_lp(ch.get("logprobs"))
        choices[str(ch.get("index"))] = v
    return {
        "object": body.get("object"),
        "model": body.get("model"),
        "choices": choices,
        "usage": _usage(body.get("usage")),
    }


# --------------------------------------------------------------------------- the diff


# Compared as a whole: a completion `top_logprobs` entry (a dict keyed by token text).
ATOMIC = re.compile(r"\.logprobs\.top_logprobs\[\d+\]$")


def diff_values(a: Any, b: Any, path: str, out: list[Diff]) -> None:
    """Where two normal forms differ, as leaf paths (dict keys and list indexes)."""
    if ATOMIC.search(path):
        if a != b:
            out.append(Diff(path, a, b))
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            diff_values(a.get(k, "<absent>"), b.get(k, "<absent>"), f"{path}.{k}", out)
        return
    if (
        isinstance(a, list)
        and isinstance(b, list)
        and len(a) == len(b)
        and any(isinstance(x, dict | list) for x in a + b)
    ):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            diff_values(x, y, f"{path}[{i}]", out)
        return
    if a != b:
        out.append(Diff(path, a, b))


def _is_subsequence(small: list[Any], big: list[Any]) -> bool:
    it = iter(big)
    return all(any(x == y for y in it) for x in small)


def compare(case: Case, vllm: VllmResult, ours: OursResult) -> list[Diff]:
    chat = case.api == "chat"
    diffs: list[Diff] = []
    errors = ours.of_kind("error")
    if ours.dead:
        diffs.append(Diff("dead_letters", 0, ours.dead))
    if vllm.status != 200 or errors:
        v_err = None
        if vllm.status != 200:
            msg = (
                vllm.error["error"]["message"] if isinstance(vllm.error, dict) else str(vllm.error)
            )
            v_err = {
                "code": STATUS_CODE.get(vllm.status, f"http-{vllm.status}"),
                "topic": error_topic(msg),
                "message": msg,
            }
        o_err = None
        if errors:
            e = errors[0]["error"]
            o_err = {"code": e["code"], "topic": error_topic(e["message"]), "message": e["message"]}
        if v_err is None or o_err is None:
            diffs.append(Diff("error", v_err, o_err))
        else:
            for k in ("code", "topic"):
                if v_err[k] != o_err[k]:
                    diffs.append(Diff(f"error.{k}", v_err, o_err))
        return diffs
    if not case.stream:
        responses = ours.of_kind("response")
        if len(responses) != 1:
            diffs.append(Diff("response", "one response", [k for k, _ in ours.outputs]))
            return diffs
        assert vllm.body is not None
        diff_values(fold_whole(vllm.body, chat), fold_whole(responses[0], chat), "", diffs)
        return diffs
    kinds = [k for k, _ in ours.outputs]
    if kinds[-1:] != ["done"] or kinds.count("done") != 1 or set(kinds) - {"chunk", "done"}:
        diffs.append(Diff("output_kinds", "chunks then [DONE]", kinds))
    v = fold_stream(vllm.chunks, chat)
    o_chunks = ours.of_kind("chunk")
    if chat:
        opened, o_chunks = _opening(o_chunks)
        if opened is not None:  # `stream-opening`: vLLM's derender sends none
            diffs.append(Diff("stream_opening", None, opened))
    o = fold_stream(o_chunks, chat)
    v_cont, o_cont = v.pop("_continuous"), o.pop("_continuous")
    v_fin, o_fin = v.pop("_finish_usage"), o.pop("_finish_usage")
    diff_values(v, o, "", diffs)
    # A choice whose text differs says different things: its `order` differing then
    # adds nothing.
    texty = (".content", ".reasoning", ".text")
    differing = {d.path.rsplit(".", 1)[0] for d in diffs if d.path.endswith(texty)}
    diffs = [d for d in diffs if not (d.path.endswith(".order") and d.path[:-6] in differing)]
    if v_cont or o_cont:
        # Continuous usage: every usage we send is one vLLM sent, in order, and the
        # chunk finishing each choice carries the same usage.
        if not _is_subsequence(o_cont, v_cont) or (v_cont and o_cont[-1:] != v_cont[-1:]):
            diffs.append(Diff("continuous_usage", v_cont, o_cont))
        diff_values(v_fin, o_fin, ".finish_usage", diffs)
    return diffs


OPENING_DELTA = {"role": "assistant", "content": ""}


def _opening(chunks: list[dict[str, Any]]) -> tuple[list[int] | None, list[dict[str, Any]]]:
    """Our chat stream's opening (one role chunk per choice, as vLLM's chat server opens
    a stream): the indices it opened, in order, or None; and the chunks with the
    opening's continuous usage taken out (vLLM's derender sends no such chunk, so its
    usage is none it sent). The opening's role stays: it is the choice's first delta."""
    opened: list[int] = []
    out: list[dict[str, Any]] = []
    for i, chunk in enumerate(chunks):
        cs = chunk.get("choices") or []
        is_opening = (
            len(cs) == 1
            and cs[0].get("delta") == OPENING_DELTA
            and cs[0].get("finish_reason") is None
            and cs[0].get("logprobs") is None
        )
        if i != len(opened) or not is_opening:
            out.append(chunk)
            continue
        opened.append(cs[0]["index"])
        out.append({k: v for k, v in chunk.items() if k != "usage"})
    return (opened or None), out


def compare_to_whole(case: Case, vllm_whole: dict[str, Any], ours: OursResult) -> list[Diff]:
    """Our stream against vLLM's whole response to the same output (used where vLLM
    refuses the streaming request: with `stop`, the cut must land where vLLM's
    non-streaming derender cuts). Text, reasoning, tool calls, finish and stop reasons."""
    chat = case.api == "chat"
    w = fold_whole(vllm_whole, chat)["choices"]
    s = fold_stream(ours.of_kind("chunk"), chat)["choices"]
    diffs: list[Diff] = []
    for i in sorted(set(w) | set(s)):
        wc, sc = w.get(i), s.get(i)
        if wc is None or sc is None:
            diffs.append(Diff(f"whole.choices.{i}", wc, sc))
            continue
        want: dict[str, Any] = {
            "finish_reason": [wc["finish_reason"]],
            "stop_reason": wc["stop_reason"],
        }
        got: dict[str, Any] = {k: sc[k] for k in want}
        if chat:
            m = wc["message"]
            want["content"] = m["content"] or ""
            want["reasoning"] = m["reasoning"] or ""
            want["tool_calls"] = [(t["name"], t["arguments"]) for t in m["tool_calls"]]
            got["content"], got["reasoning"] = sc["content"], sc["reasoning"]
            got["tool_calls"] = [(t["name"], t["arguments"]) for t in sc["tool_calls"].values()]
        else:
            want["text"], got["text"] = wc["text"], sc["text"]
        diff_values(want, got, f"whole.choices.{i}", diffs)
    return diffs
