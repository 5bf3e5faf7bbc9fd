"""The parity cases: engine outputs built from texts tokenized with the DeepSeek V4
tokenizer, generated from a fixed seed (the same list on every run).

Outputs stay short (≤ ~150 tokens): with parsers vLLM replays the whole output on every
streaming call.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from typing import Any

from tokenizers import Tokenizer

from tests.peer.drive import MODEL, Case, Gen

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
    """DeepSeek V4's DSML tool-call block (reference/vllm-parsers.md §2.12)."""
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


def build(tok: Tokenizer) -> list[Case]:
    b = Builder(tok)
    _plain(b)
    _specials(b)
    _usage(b)
    _logprobs(b)
    _stops(b)
    _n(b)
    _reasoning(b)
    _tools(b)
    _completion(b)
    _errors(b)
    _dsml_rules(b)
    return b.cases


# --------------------------------------------------------------------------- groups


def _plain(b: Builder) -> None:
    for i, text in enumerate(TEXTS):
        ids = b.ids(text)
        for server, req in (("off", chat_request()), ("on", chat_request(**NO_THINK))):
            how: str | int = 1 if i % 2 == 0 else "random"
            b.both(
                Case(f"plain-{i}-{server}", server, "chat", False, req, [[Gen([*ids, EOS])]]), how
            )
        # finish "length": no EOS, the text just stops (maybe mid-character)
        cut = ids[: max(1, len(ids) - 1)]
        b.both(
            Case(f"plain-length-{i}", "off", "chat", False, chat_request(), [[Gen(cut, "length")]]),
            "random",
        )
    # The output ends inside a character: the rest never came (length), or EOS follows.
    partial = b.ids("Smile 😀")[:-1]
    for server, req in (("off", chat_request()), ("on", chat_request(**NO_THINK))):
        for finish, tail in (("length", []), ("stop", [EOS])):
            g = Gen(partial + tail, finish)
            b.both(Case(f"partial-char-{finish}-{server}", server, "chat", False, req, [[g]]), 1)
    g = Gen(partial, "length")
    b.both(
        Case("partial-char-completion", "off", "completion", False, completion_request(), [[g]]), 1
    )
    # A final chunk that carries only the finish reason.
    ids = b.ids(TEXTS[4])
    for server, req in (("off", chat_request()), ("on", chat_request(**NO_THINK))):
        b.add(
            Case(
                f"plain-finish-only-chunk-{server}",
                server,
                "chat",
                True,
                req,
                [[Gen([*ids, EOS], cuts=[3] * (len(ids) // 3) + [len(ids) % 3 + 1])]],
            )
        )
        g = Gen(ids, "length", cuts=[*b.cuts(len(ids), 2), 0])
        b.add(Case(f"plain-empty-last-chunk-{server}", server, "chat", True, req, [[g]]))


def _specials(b: Builder) -> None:
    text = [*b.ids("Before"), BOS, *b.ids(" middle "), PAD, THINK, *b.ids(" after")]
    for skip in (True, False):
        req = chat_request(skip_special_tokens=skip)
        b.both(Case(f"special-skip-{skip}", "off", "chat", False, req, [[Gen([*text, EOS])]]), 1)
        creq = completion_request(skip_special_tokens=skip)
        b.both(
            Case(
                f"special-completion-skip-{skip}",
                "off",
                "completion",
                False,
                creq,
                [[Gen(text, "length")]],
            ),
            "random",
        )
        # With parsers the markers' specials stay in the text the parser reads.
        req = chat_request(skip_special_tokens=skip, **NO_THINK)
        b.both(Case(f"special-on-skip-{skip}", "on", "chat", False, req, [[Gen([*text, EOS])]]), 1)
    # EOS kept: include_stop_str_in_output keeps the stop token text.
    req = chat_request(skip_special_tokens=False, include_stop_str_in_output=True)
    b.both(Case("special-eos-kept", "off", "chat", False, req, [[Gen([*b.ids(TEXTS[0]), EOS])]]), 2)
    # spaces_between_special_tokens has no effect on tokenizer.json tokenizers.
    req = chat_request(skip_special_tokens=False, spaces_between_special_tokens=False)
    b.both(Case("special-no-spaces", "off", "chat", False, req, [[Gen([*text, EOS])]]), 3)


def _usage(b: Builder) -> None:
    ids = [*b.ids(TEXTS[2]), EOS]
    variants = [
        ("final", {"include_usage": True}, "final"),
        ("continuous", {"include_usage": True, "continuous_usage_stats": True}, "continuous"),
        ("engine-silent", {"include_usage": True}, "none"),
        ("off", {"include_usage": False}, "none"),
    ]
    for server, extra in (("off", {}), ("on", NO_THINK)):
        for name, so, engine in variants:
            for how in (1, "random"):
                req = chat_request(stream_options=so, **extra)
                g = Gen(ids, cuts=b.cuts(len(ids), how))
                b.add(
                    Case(
                        f"usage-{name}-{server}-{how}",
                        server,
                        "chat",
                        True,
                        req,
                        [[g]],
                        engine_usage=engine,
                    )
                )
    # Completion streaming usage.
    cids = b.ids(" there was a tokenizer. 日本語")
    for name, so, engine in variants[:3]:
        req = completion_request(stream_options=so)
        g = Gen(cids, "length", cuts=b.cuts(len(cids), "random"))
        b.add(
            Case(
                f"usage-completion-{name}",
                "off",
                "completion",
                True,
                req,
                [[g]],
                engine_usage=engine,
            )
        )
    # Reasoning with usage (thinking prompt).
    rids = [*b.ids(REASONINGS[1]), END_THINK, *b.ids(TEXTS[0]), EOS]
    req = chat_request(stream_options={"include_usage": True, "continuous_usage_stats": True})
    g = Gen(rids, cuts=b.cuts(len(rids), "random"))
    b.add(
        Case(
            "usage-continuous-reasoning", "on", "chat", True, req, [[g]], engine_usage="continuous"
        )
    )


def _logprobs(b: Builder) -> None:
    for i, text in enumerate([TEXTS[2], TEXTS[4], "Hello 😀 🦜", TEXTS[5]]):
        ids = [*b.ids(text), EOS]
        for top in (0, 2, 5):
            req = chat_request(logprobs=True, top_logprobs=top)
            g = Gen(ids, logprobs=b.logprobs(ids, top))
            b.both(Case(f"logprobs-chat-{i}-top{top}", "off", "chat", False, req, [[g]]), "random")
        req = chat_request(logprobs=True, top_logprobs=3, **NO_THINK)
        g = Gen(ids, logprobs=b.logprobs(ids, 3))
        b.both(Case(f"logprobs-chat-on-{i}", "on", "chat", False, req, [[g]]), 1)
        for k in (0, 3):
            cids = ids[:-1]
            creq = completion_request(logprobs=k)
            g = Gen(cids, "length", logprobs=b.logprobs(cids, k + 1))
            b.both(
                Case(f"logprobs-completion-{i}-k{k}", "off", "completion", False, creq, [[g]]),
                "random",
            )
    # Logprobs across reasoning and content (thinking prompt).
    rids = [*b.ids(REASONINGS[2]), END_THINK, *b.ids(TEXTS[3]), EOS]
    req = chat_request(logprobs=True, top_logprobs=2)
    g = Gen(rids, logprobs=b.logprobs(rids, 2))
    b.both(Case("logprobs-reasoning", "on", "chat", False, req, [[g]]), "random")
    # The recorded exchange: "Hello", an incomplete emoji, its completing byte, EOS, with
    # lone-byte candidates at every position.
    ids = [19923, 53769, 225, EOS]
    lp = [
        {
            "token_id": t,
            "logprob": -0.25,
            "rank": 1,
            "top_logprobs": [
                {"token_id": t, "logprob": -0.25, "rank": 1},
                {"token_id": 100, "logprob": -3.0, "rank": 2},
                {"token_id": 225, "logprob": -3.5, "rank": 3},
            ],
        }
        for t in ids
    ]
    req = chat_request(logprobs=True, top_logprobs=3)
    b.both(
        Case("logprobs-split-candidates", "off", "chat", False, req, [[Gen(ids, logprobs=lp)]]), 1
    )
    creq = completion_request(logprobs=2)
    g = Gen(ids, logprobs=lp)
    b.both(Case("logprobs-split-candidates-completion", "off", "completion", False, creq, [[g]]), 1)
    # Sampled tokens only (logprobs requested, no top list).
    ids = [*b.ids(TEXTS[4]), EOS]
    lp = [{"token_id": t, "logprob": -0.25} for t in ids]
    b.both(
        Case(
            "logprobs-no-top",
            "off",
            "chat",
            False,
            chat_request(logprobs=True),
            [[Gen(ids, logprobs=lp)]],
        ),
        2,
    )


def _stops(b: Builder) -> None:
    text = "Hello there! General Kenobi. You are a bold one."
    full = b.ids(text)
    # Where "Kenobi" completes: the engine stops at that token, stop_reason = the string.
    upto = next(k for k in range(1, len(full) + 1) if "Kenobi" in b.tok.decode(full[:k]))
    for server, extra in (("off", {}), ("on", NO_THINK)):
        for incl in (False, True):
            req = chat_request(stop=["Kenobi", "never"], include_stop_str_in_output=incl, **extra)
            g = Gen(full[:upto], "stop", "Kenobi")
            b.both(Case(f"stop-string-{server}-incl-{incl}", server, "chat", False, req, [[g]]), 1)
        # An older host reports no stop_reason: the stop list is searched.
        req = chat_request(stop="bold", **extra)
        b.add(Case(f"stop-unreported-{server}", server, "chat", False, req, [[Gen([*full, EOS])]]))
        # stop_token_ids: a client stop token (streaming is accepted here).
        stop_tok = full[3]
        req = chat_request(stop_token_ids=[stop_tok], **extra)
        g = Gen(full[:4], "stop", stop_tok)
        b.both(Case(f"stop-token-{server}", server, "chat", False, req, [[g]]), "random")
        g = Gen(full[:4], "stop", None)
        b.both(Case(f"stop-token-unreported-{server}", server, "chat", False, req, [[g]]), 1)
        req = chat_request(stop_token_ids=[stop_tok], include_stop_str_in_output=True, **extra)
        b.both(
            Case(
                f"stop-token-kept-{server}",
                server,
                "chat",
                False,
                req,
                [[Gen(full[:4], "stop", stop_tok)]],
            ),
            2,
        )
    # Streaming with stop strings (vLLM refuses them).
    for server, extra in (("off", {}), ("on", NO_THINK)):
        req = chat_request(stop=["Kenobi"], **extra)
        g = Gen(full[:upto], "stop", "Kenobi", cuts=b.cuts(upto, "random"))
        b.add(Case(f"stop-string-streaming-{server}", server, "chat", True, req, [[g]]))
    creq = completion_request(stop=["Kenobi"])
    b.both(
        Case(
            "stop-completion",
            "off",
            "completion",
            False,
            creq,
            [[Gen(full[:upto], "stop", "Kenobi")]],
        ),
        1,
    )
    creq = completion_request(stop=["bold"])
    b.add(
        Case(
            "stop-completion-unreported", "off", "completion", False, creq, [[Gen(full, "length")]]
        )
    )
    b.add(
        Case(
            "stop-chat-after-length",
            "off",
            "chat",
            False,
            chat_request(stop=["bold"]),
            [[Gen(full, "length")]],
        )
    )
    # Stop string with logprobs (whole).
    req = chat_request(stop=["Kenobi"], logprobs=True, top_logprobs=1)
    g = Gen(full[:upto], "stop", "Kenobi", logprobs=b.logprobs(full[:upto], 1))
    b.add(Case("stop-string-logprobs", "off", "chat", False, req, [[g]]))


def _n(b: Builder) -> None:
    texts = [TEXTS[0], TEXTS[2], TEXTS[4]]
    for server, extra in (("off", {}), ("on", NO_THINK)):
        gens = [
            Gen(b.ids(t) + ([EOS] if k != 1 else []), "stop" if k != 1 else "length", index=k)
            for k, t in enumerate(texts)
        ]
        req = chat_request(n=3, **extra)
        b.add(Case(f"n3-{server}/whole", server, "chat", False, req, [gens]))
        streamed = [replace(g, cuts=b.cuts(len(g.token_ids), "random")) for g in gens]
        order = [g.index for g in streamed for _ in g.cuts or []]
        b.rng.shuffle(order)
        # each choice's chunks in order, choices interleaved at random
        b.add(
            Case(
                f"n3-{server}/stream-interleaved",
                server,
                "chat",
                True,
                req,
                [streamed],
                order=order,
            )
        )
        req = chat_request(n=3, stream_options={"include_usage": True}, **extra)
        b.add(
            Case(
                f"n3-usage-{server}/stream-interleaved",
                server,
                "chat",
                True,
                req,
                [streamed],
                engine_usage="final",
                order=order,
            )
        )
    # n > 1 with logprobs.
    gens = [
        Gen([*b.ids(t), EOS], index=k, logprobs=None) for k, t in enumerate([TEXTS[4], TEXTS[3]])
    ]
    for g in gens:
        g.logprobs = b.logprobs(g.token_ids, 2)
    req = chat_request(n=2, logprobs=True, top_logprobs=2)
    b.add(Case("n2-logprobs/whole", "off", "chat", False, req, [gens]))
    streamed = [replace(g, cuts=b.cuts(len(g.token_ids), "random")) for g in gens]
    order = [g.index for g in streamed for _ in g.cuts or []]
    b.rng.shuffle(order)
    b.add(Case("n2-logprobs/stream-interleaved", "off", "chat", True, req, [streamed], order=order))
    # n > 1 with reasoning and tool calls (thinking prompt, tools auto).
    gens = [
        Gen([*b.ids(REASONINGS[0]), END_THINK, *b.ids(TEXTS[0]), EOS], index=0),
        Gen([*b.ids(REASONINGS[1]), END_THINK, *b.ids(dsml(CALLS[:1])), EOS], index=1),
    ]
    req = chat_request(n=2, tools=TOOLS)
    b.add(Case("n2-reasoning-tools/whole", "on", "chat", False, req, [gens]))
    streamed = [replace(g, cuts=b.cuts(len(g.token_ids), "random")) for g in gens]
    order = [g.index for g in streamed for _ in g.cuts or []]
    b.rng.shuffle(order)
    b.add(
        Case(
            "n2-reasoning-tools/stream-interleaved",
            "on",
            "chat",
            True,
            req,
            [streamed],
            order=order,
        )
    )


def _reasoning(b: Builder) -> None:
    for i, r in enumerate(REASONINGS):
        content = TEXTS[(i * 3) % len(TEXTS)]
        ids = [*b.ids(r), END_THINK, *b.ids(content), EOS]
        b.both(
            Case(f"reasoning-content-{i}", "on", "chat", False, chat_request(), [[Gen(ids)]]),
            1 if i % 2 else "random",
        )
        # reasoning only: the output ends inside the reasoning
        b.both(
            Case(
                f"reasoning-only-{i}",
                "on",
                "chat",
                False,
                chat_request(),
                [[Gen(b.ids(r), "length")]],
            ),
            "random",
        )
        # include_reasoning false
        req = chat_request(include_reasoning=False)
        b.both(Case(f"reasoning-hidden-{i}", "on", "chat", False, req, [[Gen(ids)]]), "random")
    # Trailing whitespace at the end of the reasoning.
    ids = [*b.ids("Thinking hard.  \n"), END_THINK, *b.ids("\n\nAnswer."), EOS]
    b.both(Case("reasoning-trailing-space", "on", "chat", False, chat_request(), [[Gen(ids)]]), 1)
    # Thinking off through the template kwargs `thinking: false`.
    ids = [*b.ids(TEXTS[1]), EOS]
    req = chat_request(chat_template_kwargs={"thinking": False})
    b.both(Case("reasoning-thinking-false", "on", "chat", False, req, [[Gen(ids)]]), "random")
    # A stray </think> in content mode, and <think> opening reasoning from content.
    ids = [
        *b.ids("Plain "),
        END_THINK,
        *b.ids(" text "),
        THINK,
        *b.ids("inner"),
        END_THINK,
        *b.ids("out"),
        EOS,
    ]
    b.both(
        Case(
            "reasoning-markers-in-content",
            "on",
            "chat",
            False,
            chat_request(**NO_THINK),
            [[Gen(ids)]],
        ),
        1,
    )
    # Reasoning with logprobs hidden.
    ids = [*b.ids(REASONINGS[3]), END_THINK, *b.ids(TEXTS[3]), EOS]
    req = chat_request(include_reasoning=False, logprobs=True, top_logprobs=1)
    b.both(
        Case(
            "reasoning-hidden-logprobs",
            "on",
            "chat",
            False,
            req,
            [[Gen(ids, logprobs=b.logprobs(ids, 1))]],
        ),
        "random",
    )


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


def _tools(b: Builder) -> None:
    # Auto: single and parallel calls, with reasoning and/or content before.
    outputs = {
        "single": dsml(CALLS[:1]),
        "parallel": dsml(CALLS[:2]),
        "parallel3": dsml(CALLS[1:4]),
        "content-then-call": "Let me check.\n\n" + dsml(CALLS[2:3]),
    }
    for name, text in outputs.items():
        for think in (False, True):
            ids = ([*b.ids(REASONINGS[1]), END_THINK] if think else []) + b.ids(text) + [EOS]
            req = chat_request(tools=TOOLS, **({} if think else NO_THINK))
            how: str | int = 1 if name == "single" else "random"
            b.both(
                Case(f"tools-auto-{name}-think-{think}", "on", "chat", False, req, [[Gen(ids)]]),
                how,
            )
    # A tool call cut by length (unfinished block).
    ids = b.ids(dsml(CALLS[:1]))
    req = chat_request(tools=TOOLS, **NO_THINK)
    b.both(
        Case("tools-auto-cut", "on", "chat", False, req, [[Gen(ids[: len(ids) - 9], "length")]]),
        "random",
    )
    # parallel_tool_calls false with two calls.
    req = chat_request(tools=TOOLS, parallel_tool_calls=False, **NO_THINK)
    b.both(
        Case(
            "tools-single-call-only",
            "on",
            "chat",
            False,
            req,
            [[Gen([*b.ids(dsml(CALLS[:2])), EOS])]],
        ),
        2,
    )
    # Every tool_choice against both strict settings, with the output in DSML, bare
    # JSON (the shape each forced mode constrains to) and prose.
    name, args = CALLS[0]
    shapes = {
        "dsml": dsml([(name, args)]),
        **json_and_prose(name, args),
    }
    for server in ("on", "lax"):
        for choice_name, choice in TOOL_CHOICES:
            for shape, text in shapes.items():
                extra: dict[str, Any] = dict(NO_THINK)
                if choice_name != "no-tools":
                    extra["tools"] = TOOLS
                    extra["tool_choice"] = choice
                ids = [*b.ids(text), EOS]
                case = Case(
                    f"tool-choice-{choice_name}-{shape}-{server}",
                    server,
                    "chat",
                    False,
                    chat_request(**extra),
                    [[Gen(ids)]],
                )
                case.extra["shape"] = shape
                b.both(case, "random")
    # Forced modes after reasoning (thinking prompt): the model's format (strict) or
    # the constrained JSON (strictness off).
    reasoning = [*b.ids(REASONINGS[1]), END_THINK]
    for server, shape in (("on", "dsml"), ("lax", "json-required"), ("lax", "json-named")):
        for choice_name, choice in TOOL_CHOICES[3:]:
            if server == "lax" and shape != f"json-{choice_name}":
                continue
            case = Case(
                f"tool-choice-{choice_name}-think-{shape}-{server}",
                server,
                "chat",
                False,
                chat_request(tools=TOOLS, tool_choice=choice),
                [[Gen(reasoning + b.ids(shapes[shape]) + [EOS])]],
            )
            case.extra["shape"] = shape
            b.both(case, 1)
    # Argument conversion against the schema (string="false" values of every JSON
    # kind for string- and integer-typed parameters, and a parameter not in the schema).
    conversions = {
        "string-param-number": ("location", "false", "5"),
        "string-param-array": ("location", "false", "[1, 2]"),
        "string-param-object": ("location", "false", '{"a": 1}'),
        "string-param-null": ("location", "false", "null"),
        "integer-param-string-true": ("days", "true", "7"),
        "integer-param-not-a-number": ("days", "true", "seven"),
        "integer-param-float": ("days", "false", "2.5"),
        "unknown-param-array": ("units", "false", "[]"),
        "string-param-multiline": ("location", "true", 'New\nYork "NY" <b>'),
    }
    for name, (key, flag, value) in conversions.items():
        raw = (
            '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n'
            f'<｜DSML｜parameter name="{key}" string="{flag}">{value}</｜DSML｜parameter>\n'
            "</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
        )
        req = chat_request(tools=TOOLS, **NO_THINK)
        b.both(
            Case(f"dsml-convert-{name}", "on", "chat", False, req, [[Gen([*b.ids(raw), EOS])]]), 1
        )


def _completion(b: Builder) -> None:
    prompts = ["Once upon a time", "日本語で", "def main():"]
    outs = [
        b.ids(" there was a tokenizer. 日本語"),
        b.ids("話しましょう 😀"),
        b.ids("\n    pass\n"),
    ]
    creq = completion_request(prompt=prompts)
    gens = [[Gen(o, "length")] for o in outs]
    b.add(Case("completion-prompts3/whole", "off", "completion", False, creq, gens))
    creq = completion_request(prompt=prompts, logprobs=1)
    gens = [[Gen(o, "length", logprobs=b.logprobs(o, 2))] for o in outs]
    b.add(Case("completion-prompts3-logprobs/whole", "off", "completion", False, creq, gens))
    # n = 2 per prompt on two prompts.
    creq = completion_request(prompt=prompts[:2], n=2)
    gens = [[Gen(o, "length", index=0), Gen([*o[:3], EOS], "stop", index=1)] for o in outs[:2]]
    b.add(Case("completion-prompts2-n2/whole", "off", "completion", False, creq, gens))
    for i, o in enumerate(outs):
        creq = completion_request(prompt=prompts[i])
        b.both(
            Case(f"completion-{i}", "off", "completion", False, creq, [[Gen([*o, EOS])]]),
            1 if i else "random",
        )
    # echo
    for stream in (False, True):
        creq = completion_request(echo=True)
        g = Gen(outs[0], "length", cuts=b.cuts(len(outs[0]), 3))
        b.add(
            Case(
                f"completion-echo-{'stream' if stream else 'whole'}",
                "off",
                "completion",
                stream,
                creq,
                [[g]],
            )
        )
    # Streaming n = 2, interleaved.
    creq = completion_request(n=2)
    gens = [
        Gen(outs[0], "length", index=0, cuts=b.cuts(len(outs[0]), "random")),
        Gen(outs[1] + [EOS], index=1, cuts=b.cuts(len(outs[1]) + 1, 1)),
    ]
    order = [g.index for g in gens for _ in g.cuts or []]
    b.rng.shuffle(order)
    b.add(
        Case(
            "completion-n2/stream-interleaved", "off", "completion", True, creq, [gens], order=order
        )
    )
    # Completion on the parser server: parsers do not apply.
    o = b.ids("</think> <｜DSML｜tool_calls> text")
    b.both(
        Case(
            "completion-on-server",
            "on",
            "completion",
            False,
            completion_request(),
            [[Gen([*o, EOS])]],
        ),
        1,
    )


def _errors(b: Builder) -> None:
    ids = [*b.ids(TEXTS[0]), EOS]
    req = chat_request()
    bad = Case("error-unknown-model", "off", "chat", False, dict(req, model="nope"), [[Gen(ids)]])
    bad.extra["model"] = "nope"
    b.both(bad, 2)
    # top_logprobs over max_logprobs (20) in the engine's entries.
    lp = b.logprobs(ids[:2], 0)
    for e in lp:
        e["top_logprobs"] = [
            {"token_id": 3 + k, "logprob": -1.0 - k, "rank": k + 1} for k in range(21)
        ]
    b.both(
        Case(
            "error-top-logprobs-bound",
            "off",
            "chat",
            False,
            chat_request(logprobs=True),
            [[Gen(ids[:2], logprobs=lp)]],
        ),
        1,
    )
    # An out-of-vocabulary id.
    b.both(Case("error-out-of-vocab", "off", "chat", False, req, [[Gen([19923, 999_999, EOS])]]), 1)
    # Whole response with no token ids.
    b.add(Case("error-empty-token-ids/whole", "off", "chat", False, req, [[Gen([], "stop")]]))
    b.add(
        Case(
            "error-completion-empty-token-ids/whole",
            "off",
            "completion",
            False,
            completion_request(),
            [[Gen([], "stop")]],
        )
    )


def _dsml_rules(b: Builder) -> None:
    """What probing vLLM 0.33 by hand found (session 4), kept here so `make parity` checks
    it every run: an empty reasoning is null; text after a DSML block is dropped; an
    invoke outside its block is a call; a parameter without `string=` is JSON; V4's
    other opener spelling; `reasoning_effort: "none"` with a think block written anyway."""
    inv = (
        '<｜DSML｜invoke name="get_weather">\n'
        '<｜DSML｜parameter name="location" string="true">Paris</｜DSML｜parameter>\n'
        "</｜DSML｜invoke>\n"
    )
    texts = {
        "empty-reasoning": "Hello.",
        "text-after-block": "Sure.\n\n<｜DSML｜tool_calls>\n"
        + inv
        + "</｜DSML｜tool_calls>\nDone.",
        "invoke-outside-block": "Hi " + inv,
        "missing-flag": '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n'
        '<｜DSML｜parameter name="days">5</｜DSML｜parameter>\n'
        '<｜DSML｜parameter name="location">[1]</｜DSML｜parameter>\n'
        "</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
        "variant-opener": "<｜DSML｜toolcalls>\n" + inv + "</｜DSML｜tool_calls>",
    }
    for name, text in texts.items():
        plan = [] if name == "empty-reasoning" else b.ids("Plan.")
        ids = [*plan, END_THINK, *b.ids(text), EOS]
        req = chat_request(tools=TOOLS)
        b.both(Case(f"dsml-rule-{name}", "on", "chat", False, req, [[Gen(ids)]]), 1)
    req = chat_request(chat_template_kwargs={"reasoning_effort": "none"})
    ids = [*b.ids("Hello "), *b.ids("<think>"), *b.ids("x</think>"), EOS]
    b.both(Case("dsml-rule-effort-none-think", "on", "chat", False, req, [[Gen(ids)]]), "random")
