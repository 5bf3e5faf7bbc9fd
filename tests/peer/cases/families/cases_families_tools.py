"""The tool-call groups of cases_families.py: each server's own call markup in every shape,
typed arguments, and every tool_choice."""

from __future__ import annotations

from typing import Any

from tests.peer.cases import cases as C
from tests.peer.cases.cases import CALLS, REASONINGS, TOOL_CHOICES, TOOLS, Builder
from tests.peer.cases.families.cases_families_models import (
    QWEN,
    TYPED_CALLS,
    TYPED_TOOLS,
    Family,
    coder_calls,
    family_case,
    glm_calls,
    minimax_calls,
    prefix_ids,
)
from tests.peer.drive import Gen


def add_tools(b: Builder, fam: Family) -> None:
    eos = fam.eos[0]
    for s in fam.servers:
        outputs = {
            "single": s.calls(CALLS[:1]),
            "parallel": s.calls(CALLS[:2]),
            "parallel3": s.calls(CALLS[1:4]),
            "content-then-call": "Let me check.\n\n" + s.calls(CALLS[2:3]),
        }
        if s.calls is glm_calls:
            outputs["newlines"] = glm_calls(CALLS[:2], newlines=True)
        for name, text in outputs.items():
            thinks = (True, False) if fam.no_think is not None else (True,)
            for think in thinks:
                full = fam.think(REASONINGS[1], text) if think else text
                req = fam.chat_request(tools=TOOLS, **({} if think else fam.no_think or {}))
                how: str | int = 1 if name == "single" else "random"
                case = family_case(
                    fam,
                    f"tools-auto-{name}-think-{think}-{s.name}",
                    s.name,
                    req,
                    [Gen([*b.ids(full), eos])],
                    "native",
                )
                b.both(case, how)
        # The call block right after the reasoning, no end marker (it ends the trace).
        text = REASONINGS[0] + s.calls(CALLS[:1])
        if fam is QWEN:
            text = "<think>\n" + text
        req = fam.chat_request(tools=TOOLS)
        case = family_case(
            fam,
            f"tools-call-ends-reasoning-{s.name}",
            s.name,
            req,
            [Gen([*b.ids(text), eos])],
            "native",
        )
        b.both(case, 1)
        # A call cut by length: inside a parameter's name, inside its value, after the
        # value, and (where the closing tag is text of several tokens) inside that tag.
        full = fam.think(REASONINGS[0], s.calls(CALLS[:1]))
        ids = b.ids(full)
        req = fam.chat_request(tools=TOOLS)
        value_end = full.index("5", full.index("days"))
        cuts = {
            "in-name": full.index("days") + 2,
            "in-value": full.index("杭") + 1,
            "after-value": value_end + 1,
        }
        if s.calls in (minimax_calls, coder_calls):
            cuts["in-closer"] = full.index("</parameter>", value_end) + len("</param")
        for where, at in cuts.items():
            g = Gen(prefix_ids(b, ids, full[:at]), "length")
            b.both(
                family_case(fam, f"tools-cut-{where}-{s.name}", s.name, req, [g], "cut"), "random"
            )
        # Text after and between calls.
        text = fam.think(
            "Hm.", "A. " + s.calls(CALLS[:1]) + "\n\nB then. " + s.calls(CALLS[2:3]) + " after."
        )
        case = family_case(
            fam,
            f"tools-text-between-{s.name}",
            s.name,
            req,
            [Gen([*b.ids(text), eos])],
            "text-between",
        )
        b.both(case, 1)
        # A call of a function the request does not offer, next to one it does.
        text = fam.think("Hm.", s.calls([("img_gen", {"prompt": "cat"}), *CALLS[2:3]]))
        case = family_case(
            fam,
            f"tools-unknown-name-{s.name}",
            s.name,
            req,
            [Gen([*b.ids(text), eos])],
            "unknown-name",
        )
        b.both(case, 1)
        # parallel_tool_calls false with two calls.
        req = fam.chat_request(tools=TOOLS, parallel_tool_calls=False)
        g = Gen([*b.ids(fam.think("Hm.", s.calls(CALLS[:2]))), eos])
        b.both(family_case(fam, f"tools-single-call-only-{s.name}", s.name, req, [g], "native"), 2)
        # Calls with logprobs.
        ids = [*b.ids(fam.think("Hm.", s.calls(CALLS[:1]))), eos]
        req = fam.chat_request(tools=TOOLS, logprobs=True, top_logprobs=2)
        g = Gen(ids, logprobs=b.logprobs(ids, 2))
        b.both(family_case(fam, f"tools-logprobs-{s.name}", s.name, req, [g], "native"), "random")
        # A call with no arguments.
        text = fam.think("Hm.", s.calls([("search", {})]))
        case = family_case(
            fam,
            f"tools-no-args-{s.name}",
            s.name,
            fam.chat_request(tools=TOOLS),
            [Gen([*b.ids(text), eos])],
            "native",
        )
        b.both(case, 1)


def add_typed(b: Builder, fam: Family) -> None:
    """Parameters of every JSON type against the tool's schema."""
    eos = fam.eos[0]
    for s in fam.servers:
        for name, items in TYPED_CALLS.items():
            text = fam.think("Booking.", s.calls(items))
            req = fam.chat_request(tools=TYPED_TOOLS)
            case = family_case(
                fam, f"typed-{name}-{s.name}", s.name, req, [Gen([*b.ids(text), eos])], "native"
            )
            b.both(case, "random")
    # Values the schema does not fit: a word for an integer, a parameter not in it; JSON
    # of another type (a number for an integer, an array for an object, …).
    misfits = {
        "misfit": {"city": "Rome", "nights": "three", "pets": 2},
        "json-misfit": {"city": "Rome", "nights": 2.5, "breakfast": [1], "prefs": [1, 2]},
    }
    for name, misfit in misfits.items():
        for s in fam.servers:
            text = fam.think("Booking.", s.calls([("book_hotel", misfit)]))
            req = fam.chat_request(tools=TYPED_TOOLS)
            g = Gen([*b.ids(text), eos])
            b.both(family_case(fam, f"typed-{name}-{s.name}", s.name, req, [g], "native"), 1)


def add_tool_choice(b: Builder, fam: Family) -> None:
    """Every tool_choice on every server, with the output in the model's own format, the
    bare JSON each forced mode constrains to without strict tool calling, and prose."""
    eos = fam.eos[0]
    name, args = CALLS[0]
    for s in fam.servers:
        shapes = {
            "native": s.calls([(name, args)]),
            **C.json_and_prose(name, args),
        }
        for choice_name, choice in TOOL_CHOICES:
            for shape, text in shapes.items():
                extra: dict[str, Any] = dict(fam.no_think or {})
                if choice_name != "no-tools":
                    extra["tools"] = TOOLS
                    extra["tool_choice"] = choice
                if fam.no_think is None:
                    text = fam.think("Hm.", text)
                req = fam.chat_request(**extra)
                case = family_case(
                    fam,
                    f"tool-choice-{choice_name}-{shape}-{s.name}",
                    s.name,
                    req,
                    [Gen([*b.ids(text), eos])],
                    shape,
                )
                b.both(case, "random")
        # Forced modes after reasoning (thinking prompt).
        for choice_name, choice in TOOL_CHOICES[3:]:
            text = fam.think(REASONINGS[1], shapes["native"])
            req = fam.chat_request(tools=TOOLS, tool_choice=choice)
            case = family_case(
                fam,
                f"tool-choice-{choice_name}-think-native-{s.name}",
                s.name,
                req,
                [Gen([*b.ids(text), eos])],
                "native",
            )
            b.both(case, 1)
