"""DeepSeek V4 parity cases of its parsers: reasoning (think on, off, cut), DSML tool calls
under every tool_choice, and DSML's rules."""

from __future__ import annotations

from typing import Any

from tests.peer.cases.cases_builder import (
    CALLS,
    END_THINK,
    EOS,
    NO_THINK,
    REASONINGS,
    TEXTS,
    THINK,
    TOOL_CHOICES,
    TOOLS,
    Builder,
    chat_request,
    dsml,
    json_and_prose,
)
from tests.peer.drive import Case, Gen


def add_reasoning(b: Builder) -> None:
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


def add_tools(b: Builder) -> None:
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


def add_dsml_rules(b: Builder) -> None:
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
