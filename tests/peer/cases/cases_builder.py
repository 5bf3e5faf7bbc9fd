"""What every parity case group builds with: the DeepSeek V4 ids and texts, the tools
and calls, the request shapes, DSML, the tool choices, and `Builder` (a seeded random
source and the case list it fills, streamed and whole)."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from typing import Any

from tokenizers import Tokenizer

from tests.peer.drive import MODEL, Case

SEED = 20261201

EOS = 1
BOS = 0
PAD = 2
THINK = 128821
END_THINK = 128822

# Texts that stress the detokenizer: byte-split CJK and emoji, combining marks, code,
# whitespace runs.
TEXTS = [
    "Hello there! General Kenobi.",
    "The quick brown fox jumps over the lazy dog.",
    "日本語のテキストです。東京は大きい。",
    "你好，世界！今天天气很好。",
    "Emoji 🦜🧬 party 🎉 done 👍🏽 ok",
    "Combining: e\u0301 a\u0300 n\u0303 — café naïve",
    "def f(x):\n    return x * 2  # double\n",
    "spaces   and\ttabs\n\n\n  end  ",
    "한국어 텍스트와 العربية and Ελληνικά",
    "Math: ∑ᵢ xᵢ² ≤ ∞, ≠ ≈ ∂",
]
REASONINGS = [
    "The user wants a greeting.",
    "Let me think about 杭州 weather: 5 days, metric units.",
    "Step 1: parse. Step 2: answer 🤔.",
    "Considering options… (a) yes (b) no",
]


def function_tool(
    name: str, description: str, properties: dict[str, Any], required: list[str] | None = None
) -> dict[str, Any]:
    """A `tools` entry: a function whose parameters are an object of `properties` (keys in
    the order the chat templates render them)."""
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required is not None:
        parameters["required"] = required
    function = {"name": name, "description": description, "parameters": parameters}
    return {"type": "function", "function": function}


WEATHER = function_tool(
    "get_weather",
    "Weather forecast for a city",
    {"location": {"type": "string"}, "days": {"type": "integer"}},
    required=["location"],
)
SEARCH = function_tool(
    "search",
    "Search the web",
    {"query": {"type": "string"}, "limit": {"type": "integer"}, "filters": {"type": "object"}},
    required=["query"],
)
TOOLS = [WEATHER, SEARCH]
CALLS = [
    ("get_weather", {"location": "杭州", "days": 5}),
    ("search", {"query": 'vLLM derender "quotes" <tags>', "limit": 3}),
    ("get_weather", {"location": "Paris"}),
    ("search", {"query": "emoji 🦜", "filters": {"lang": "en", "safe": True}}),
]

MESSAGES = [{"role": "user", "content": "Say hello"}]
NO_THINK = {"chat_template_kwargs": {"reasoning_effort": "none"}}


def chat_request(**kw: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": MESSAGES, **kw}


def completion_request(**kw: Any) -> dict[str, Any]:
    return {"model": MODEL, "prompt": "Once upon a time", **kw}


def dsml(calls: list[tuple[str, dict[str, Any]]]) -> str:
    """DeepSeek V4's DSML tool-call block (vLLM 0.33.0 vllm/parser/deepseek_v4.py)."""
    invokes = []
    for name, args in calls:
        params = "".join(
            f'<｜DSML｜parameter name="{k}" string="{"true" if isinstance(v, str) else "false"}">'
            f"{v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}"
            "</｜DSML｜parameter>\n"
            for k, v in args.items()
        )
        invokes.append(f'<｜DSML｜invoke name="{name}">\n{params}</｜DSML｜invoke>')
    return "<｜DSML｜tool_calls>\n" + "\n".join(invokes) + "\n</｜DSML｜tool_calls>"


# Logprob alternatives (DeepSeek V4 ids): words, lone UTF-8 bytes, a partial emoji.
ALTERNATIVES = (100, 225, 3574, 102, 19923, 1031, 30594, 3, 260, 53769)


class Builder:
    def __init__(
        self, tok: Tokenizer, seed: int = SEED, alternatives: tuple[int, ...] = ALTERNATIVES
    ) -> None:
        self.tok = tok
        self.rng = random.Random(seed)
        self.alternatives = list(alternatives)
        self.cases: list[Case] = []
        self.names: set[str] = set()

    def ids(self, text: str) -> list[int]:
        return list(self.tok.encode(text, add_special_tokens=False).ids)

    def cuts(self, n: int, how: str | int) -> list[int]:
        """Chunk sizes: 1-token, a fixed size, or random sizes from 1 to many."""
        if n == 0:
            return [0]
        if how == 1:
            return [1] * n
        if isinstance(how, int):
            return [how] * (n // how) + ([n % how] if n % how else [])
        out, left = [], n
        while left:
            k = min(left, self.rng.choice([1, 1, 2, 3, 5, 8, 13, 40]))
            out.append(k)
            left -= k
        return out

    def logprobs(self, ids: list[int], top: int) -> list[dict[str, Any]]:
        """Generate-wire logprobs: the sampled id first, then `top` alternatives (some of
        them lone byte tokens, and sometimes the sampled id again as rank 1)."""
        out = []
        for t in ids:
            lp = -round(self.rng.random() * 3, 4)
            alts: list[int] = []
            if self.rng.random() < 0.4:
                alts.append(t)
            while len(alts) < top:
                a = self.rng.choice(self.alternatives)
                if a not in alts:
                    alts.append(a)
            entry = {"token_id": t, "logprob": lp, "rank": 1 if alts[:1] == [t] else 2}
            entry["top_logprobs"] = [{"token_id": t, "logprob": lp, "rank": entry["rank"]}] + [
                {"token_id": a, "logprob": round(lp - 0.5 * (k + 1), 4), "rank": k + 1}
                for k, a in enumerate(alts)
            ]
            out.append(entry)
        return out

    def add(self, case: Case) -> Case:
        base, k = case.name, 2
        while case.name in self.names:
            case.name = f"{base}#{k}"
            k += 1
        self.names.add(case.name)
        self.cases.append(case)
        return case

    def both(self, case: Case, how: str | int = "random") -> None:
        """The case streamed (chunked by `how`) and whole."""
        streamed = replace(case, name=f"{case.name}/stream-{how}", stream=True)
        streamed.outputs = [
            [replace(g, cuts=self.cuts(len(g.token_ids), how)) for g in gen] for gen in case.outputs
        ]
        self.add(streamed)
        self.add(replace(case, name=f"{case.name}/whole", stream=False))


TOOL_CHOICES: list[tuple[str, Any]] = [
    ("no-tools", None),
    ("none", "none"),
    ("auto", "auto"),
    ("required", "required"),
    ("named", {"type": "function", "function": {"name": "get_weather"}}),
]


def json_and_prose(name: str, args: dict[str, Any]) -> dict[str, str]:
    """Outputs each tool_choice is tried with beside the model's own call format: the bare
    JSON each forced mode constrains to without strict tool calling, and prose."""
    return {
        "json-required": json.dumps([{"name": name, "parameters": args}], ensure_ascii=False),
        "json-named": json.dumps(args, ensure_ascii=False),
        "prose": "I cannot call tools right now. 😀",
    }
