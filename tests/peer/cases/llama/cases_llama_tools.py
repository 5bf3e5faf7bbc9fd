"""Llama 3.2's last groups of cases_llama.py, in its order: what the model wrote, by shape,
under every tool_choice on the tool servers; completions; refused requests."""

from __future__ import annotations

import json
from typing import Any

from tests.peer.cases.cases import CALLS, TEXTS, TOOL_CHOICES, TOOLS, Builder
from tests.peer.cases.llama.cases_llama_text import (
    EOM,
    EOS,
    EOT,
    IMAGE,
    TOOL_SERVERS,
    call,
    calls,
    chat_request,
    completion_request,
)
from tests.peer.drive import Case, Gen

# What the model wrote, by shape. `python-tag*` and `bare*` are llama3_json; the
# `json-*` shapes are what a forced tool_choice constrains generation to without strict
# tool calling; the rest are text that is no call.
NAME, ARGS = CALLS[0]
SHAPES: dict[str, str] = {
    "python-tag": calls(CALLS[:1], tag=True),
    "bare": calls(CALLS[:1]),
    "python-tag-multi": calls(CALLS[:2], tag=True),
    "bare-multi": calls(CALLS[1:4]),
    "arguments-key": call(NAME, ARGS, key="arguments"),
    "prose-then-call": "Let me check the weather.\n" + calls(CALLS[2:3]),
    # A `{` in the text before the call that opens no JSON.
    "brace-then-call": "Use {braces} wisely.\n" + calls(CALLS[2:3]),
    "call-then-prose": calls(CALLS[:1]) + "\nI asked for the forecast.",
    # A built-in tool call (code after the tag), which is no JSON call.
    "python-tag-code": '<|python_tag|>brave_search.call(query="weather in Paris")',
    "prose": "I cannot call tools right now. 😀",
    "json-not-call": json.dumps({"city": "Paris", "temperature": 21}),
    "json-required": json.dumps([{"name": NAME, "parameters": ARGS}], ensure_ascii=False),
    "json-named": json.dumps(ARGS, ensure_ascii=False),
}


def _tools(b: Builder) -> None:
    # Every tool_choice on both strict settings, with every shape.
    for server in TOOL_SERVERS:
        for choice_name, choice in TOOL_CHOICES:
            for shape, text in SHAPES.items():
                extra: dict[str, Any] = {}
                if choice_name != "no-tools":
                    extra["tools"] = TOOLS
                    extra["tool_choice"] = choice
                ids = [*b.ids(text), EOS]
                case = Case(
                    f"llama-tool-choice-{choice_name}-{shape}-{server}",
                    server,
                    "chat",
                    False,
                    chat_request(**extra),
                    [[Gen(ids)]],
                )
                case.extra["shape"] = shape
                b.both(case, "random")
    # Auto calls streamed one token at a time, ending with <|eom_id|> (a tool turn).
    for shape in ("python-tag", "bare-multi"):
        ids = [*b.ids(SHAPES[shape]), EOM]
        case = Case(
            f"llama-tools-auto-{shape}-eom",
            "llama-tools",
            "chat",
            False,
            chat_request(tools=TOOLS),
            [[Gen(ids, "stop", EOM)]],
        )
        case.extra["shape"] = shape
        b.both(case, 1)
    # A call cut by length (unfinished JSON).
    ids = b.ids(SHAPES["python-tag"])
    case = Case(
        "llama-tools-auto-cut",
        "llama-tools",
        "chat",
        False,
        chat_request(tools=TOOLS),
        [[Gen(ids[: len(ids) - 4], "length")]],
    )
    case.extra["shape"] = "python-tag"
    b.both(case, "random")
    # parallel_tool_calls false with two calls.
    ids = [*b.ids(SHAPES["python-tag-multi"]), EOS]
    req = chat_request(tools=TOOLS, parallel_tool_calls=False)
    case = Case("llama-tools-single-call-only", "llama-tools", "chat", False, req, [[Gen(ids)]])
    case.extra["shape"] = "python-tag-multi"
    b.both(case, 2)
    # Calls with logprobs.
    ids = [*b.ids(SHAPES["bare"]), EOS]
    req = chat_request(tools=TOOLS, logprobs=True, top_logprobs=2)
    case = Case(
        "llama-tools-logprobs",
        "llama-tools",
        "chat",
        False,
        req,
        [[Gen(ids, logprobs=b.logprobs(ids, 2))]],
    )
    case.extra["shape"] = "bare"
    b.both(case, "random")
    # A call with no arguments (`{}`), streamed one token at a time.
    ids = [*b.ids(calls([("search", {})], tag=True)), EOM]
    case = Case(
        "llama-tools-auto-empty-args",
        "llama-tools",
        "chat",
        False,
        chat_request(tools=TOOLS),
        [[Gen(ids, "stop", EOM)]],
    )
    case.extra["shape"] = "python-tag"
    b.both(case, 1)
    # Leading whitespace before the call, and a call whose arguments hold nested JSON.
    nested = call("search", {"query": "a {b} [c]", "filters": {"x": [1, {"y": None}]}})
    for name, text in (("leading-space", "  " + SHAPES["bare"]), ("nested", nested)):
        case = Case(
            f"llama-tools-auto-{name}",
            "llama-tools",
            "chat",
            False,
            chat_request(tools=TOOLS),
            [[Gen([*b.ids(text), EOS])]],
        )
        case.extra["shape"] = name
        b.both(case, "random")


def _completion(b: Builder) -> None:
    prompts = ["Once upon a time", "日本語で", "def main():"]
    outs = [
        b.ids(" there was a tokenizer. 日本語"),
        b.ids("話しましょう 😀"),
        b.ids("\n    pass\n"),
    ]
    creq = completion_request(prompt=prompts)
    gens = [[Gen(o, "length")] for o in outs]
    b.add(Case("llama-completion-prompts3/whole", "llama-off", "completion", False, creq, gens))
    creq = completion_request(prompt=prompts, logprobs=1)
    gens = [[Gen(o, "length", logprobs=b.logprobs(o, 2))] for o in outs]
    name = "llama-completion-prompts3-logprobs/whole"
    b.add(Case(name, "llama-off", "completion", False, creq, gens))
    creq = completion_request(prompt=prompts[:2], n=2)
    gens = [[Gen(o, "length", index=0), Gen([*o[:3], EOS], "stop", EOT, index=1)] for o in outs[:2]]
    b.add(Case("llama-completion-prompts2-n2/whole", "llama-off", "completion", False, creq, gens))
    for i, o in enumerate(outs):
        creq = completion_request(prompt=prompts[i])
        b.both(
            Case(
                f"llama-completion-{i}", "llama-off", "completion", False, creq, [[Gen([*o, EOS])]]
            ),
            1 if i else "random",
        )
    # Completion on the tool-parser server: the parser does not apply.
    o = b.ids(calls(CALLS[:1], tag=True))
    b.both(
        Case(
            "llama-completion-tools-server",
            "llama-tools",
            "completion",
            False,
            completion_request(),
            [[Gen([*o, EOS])]],
        ),
        1,
    )


def _errors(b: Builder) -> None:
    ids = [*b.ids(TEXTS[0]), EOS]
    # One past the last id (<|image|>, 128256).
    g = Gen([9906, IMAGE + 1, EOS])
    b.both(Case("llama-error-out-of-vocab", "llama-off", "chat", False, chat_request(), [[g]]), 1)
    b.add(
        Case(
            "llama-error-empty-token-ids/whole",
            "llama-off",
            "chat",
            False,
            chat_request(),
            [[Gen([], "stop")]],
        )
    )
    bad = Case(
        "llama-error-unknown-model", "llama-off", "chat", False, chat_request(), [[Gen(ids)]]
    )
    bad.request = dict(bad.request, model="deepseek-v4")
    bad.extra["model"] = "deepseek-v4"
    b.add(bad)
