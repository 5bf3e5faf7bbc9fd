"""MiniMax M3's last groups of cases_minimax_m3.py, in its order: schema typing, every
tool_choice, and include_reasoning false (each kind of reasoning hidden)."""

from __future__ import annotations

from typing import Any

from tests.peer.cases import cases as C
from tests.peer.cases.cases import CALLS, REASONINGS, TEXTS, TOOL_CHOICES, TOOLS, Builder
from tests.peer.cases.families.cases_families import TYPED_CALLS, TYPED_TOOLS
from tests.peer.cases.minimax_m3.cases_minimax_m3_text import (
    ENABLED,
    EOS,
    M3,
    MODES,
    ORDER_TOOLS,
    _case,
    _text,
    block,
    el,
    enabled_think,
    m3_calls,
    raw_invoke,
    think_for,
)
from tests.peer.drive import Gen


def _typed(b: Builder) -> None:
    """Parameters of every JSON type against the tool's schema, as elements (the
    template's layout) and as JSON text; nested schemas; values that miss their type."""
    for name, items in TYPED_CALLS.items():
        for json_text in (False, True):
            text = enabled_think("Booking.", m3_calls(items, json_text))
            label = f"typed-{name}-{'json' if json_text else 'xml'}"
            _text(b, label, text, "random", tools=TYPED_TOOLS, shape="native", **ENABLED)
    misfits = {
        "misfit": {"city": "Rome", "nights": "three", "pets": 2},
        "json-misfit": {"city": "Rome", "nights": 2.5, "breakfast": [1], "prefs": [1, 2]},
        "words": {"city": "Rome", "nights": " 7 ", "breakfast": "True", "budget": "1e3"},
        "null-words": {"city": "null", "nights": "null", "breakfast": "None"},
    }
    for name, misfit in misfits.items():
        text = m3_calls([("book_hotel", misfit)])
        _text(b, f"typed-{name}", text, 1, tools=TYPED_TOOLS, shape="native")
    # Nested schemas.
    nested = {
        "nested-leaves": raw_invoke(
            "create_order",
            el("user_id", "42"),
            el("shipping", el("zip", "018956") + el("city", "Oslo")),
            el("tags", el("item", "a") + el("item", "7")),
            el("free", el("t", "x") + el("t", "1")),
        ),
        "array-items-typed": raw_invoke(
            "create_order", el("qty", el("item", "1") + el("item", "2"))
        ),
        "anyof-items": raw_invoke("create_order", el("either", el("item", "1") + el("item", "2"))),
        "anyof-text": raw_invoke("create_order", el("either", "just text")),
        "empty-elements": raw_invoke(
            "create_order", el("tags", ""), el("shipping", ""), el("note", ""), el("free", "")
        ),
        "empty-anyof": raw_invoke("create_order", el("either", "")),
        "mixed-text": raw_invoke(
            "create_order", el("free", "hi " + el("k", "v") + " there"), el("note", "n")
        ),
        "single-item": raw_invoke("create_order", el("tags", el("item", "only"))),
        "json-in-array": raw_invoke(
            "create_order", el("tags", '["a", "b"]'), el("shipping", '{"zip": 1}')
        ),
    }
    coerce = {
        "bool-digits": [("flag", "1"), ("count", "0")],
        "bool-zero": [("flag", "0")],
        "none-word": [("count", "None"), ("flag", "None"), ("label", "None")],
        "null-word": [("count", "null"), ("flag", "NULL"), ("label", "null")],
        "type-list": [("multi", "5"), ("maybe", "null")],
        "type-list-text": [("multi", "five"), ("maybe", "7")],
        "anyof-string-first": [("opt", "5")],
        "enum-integers": [("level", "2")],
        "number-words": [("ratio", "1e3"), ("count", " 7 ")],
        "integer-float": [("count", "2.0"), ("ratio", "2.50")],
    }
    for name, params in coerce.items():
        nested[f"coerce-{name}"] = raw_invoke("set_values", *(el(k, v) for k, v in params))
    for k, (name, inv) in enumerate(nested.items()):
        how: str | int = 1 if k % 2 == 0 else "random"
        _text(b, f"typed-{name}", block(inv), how, tools=ORDER_TOOLS, shape="native")


def _tool_choice(b: Builder) -> None:
    """Every tool_choice with the output in the model's own format, the bare JSON each
    forced mode would constrain to without strict tool calling, and prose; thinking
    enabled (the reasoning before the answer) and absent (no reasoning)."""
    name, args = CALLS[0]
    shapes = {
        "native": m3_calls([(name, args)]),
        **C.json_and_prose(name, args),
        "content-then-call": "Sure. " + m3_calls([(name, args)]),
    }
    for mode in ("absent", "enabled"):
        for choice_name, choice in TOOL_CHOICES:
            for shape, text in shapes.items():
                if mode == "enabled" and shape in ("json-required", "json-named"):
                    continue
                extra: dict[str, Any] = dict(MODES[mode])
                if choice_name != "no-tools":
                    extra["tools"] = TOOLS
                    extra["tool_choice"] = choice
                out = enabled_think("Hm.", text) if mode == "enabled" else text
                label = f"tool-choice-{choice_name}-{shape}-{mode}"
                b.both(_case(label, M3.chat_request(**extra), [Gen([*b.ids(out), EOS])], shape))


def _hidden(b: Builder) -> None:
    """include_reasoning false: each kind of reasoning, with a call, with logprobs."""
    for mode in ("enabled", "absent", "disabled"):
        think = think_for(mode)
        for k, answer in enumerate((TEXTS[0], "Checking. " + m3_calls(CALLS[:1]))):
            req = M3.chat_request(include_reasoning=False, tools=TOOLS, **MODES[mode])
            g = Gen([*b.ids(think(REASONINGS[k], answer)), EOS])
            b.both(_case(f"hidden-{mode}-{k}", req, [g], "native"), 1 if k else "random")
    ids = [*b.ids(enabled_think(REASONINGS[2], TEXTS[2])), EOS]
    req = M3.chat_request(include_reasoning=False, logprobs=True, top_logprobs=1, **ENABLED)
    b.both(_case("hidden-logprobs-enabled", req, [Gen(ids, logprobs=b.logprobs(ids, 1))]))
