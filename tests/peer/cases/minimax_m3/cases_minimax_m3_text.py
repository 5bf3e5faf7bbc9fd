"""MiniMax M3's parity cases, the text side (cases_minimax_m3.py builds the cases; the markup
is described there): the server, the thinking modes, calls and think blocks as M3 writes
them, the family, the schema-typed tools, and the case builders every group uses."""

from __future__ import annotations

import json
from typing import Any

from tokenizers import Tokenizer

from tests.peer.cases import cases as C
from tests.peer.cases.cases import Builder
from tests.peer.cases.families import cases_families as F
from tests.peer.cases.families.cases_families import TYPED_TOOLS, Family, Items, Server
from tests.peer.drive import M3_MODEL, Case, Gen

NS = "]<]minimax[>["
THINK, END_THINK = "<mm:think>", "</mm:think>"
SERVER = "minimax_m3-on"
EOS = 200020  # [e~[

ENABLED = {"chat_template_kwargs": {"thinking_mode": "enabled"}}
DISABLED = {"chat_template_kwargs": {"thinking_mode": "disabled"}}
ADAPTIVE = {"chat_template_kwargs": {"thinking_mode": "adaptive"}}
# Request extras per thinking mode ("absent": no chat_template_kwargs, the template's
# adaptive default).
MODES: dict[str, dict[str, Any]] = {
    "absent": {},
    "enabled": ENABLED,
    "disabled": DISABLED,
    "adaptive": ADAPTIVE,
}


def xml(value: Any) -> str:
    """A value as the chat template's `to_xml` writes it: an object's members as elements
    (None members left out), a list's entries as `<item>` elements, booleans as JSON, the
    rest as text."""
    if isinstance(value, dict):
        return "".join(f"{NS}<{k}>{xml(v)}{NS}</{k}>" for k, v in value.items() if v is not None)
    if isinstance(value, list):
        return "".join(f"{NS}<item>{xml(v)}{NS}</item>" for v in value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def invoke(name: str, args: dict[str, Any], json_text: bool = False, quote: str = '"') -> str:
    """One invoke, its parameters as the template writes them (`json_text`: objects and
    arrays as JSON text instead of elements)."""
    params = ""
    for k, v in args.items():
        if v is None:
            continue
        body = (
            json.dumps(v, ensure_ascii=False)
            if json_text and isinstance(v, dict | list)
            else xml(v)
        )
        params += f"{NS}<{k}>{body}{NS}</{k}>"
    return f"{NS}<invoke name={quote}{name}{quote}>{params}{NS}</invoke>\n"


def m3_calls(items: Items, json_text: bool = False) -> str:
    """One `<tool_call>` block with an invoke per call."""
    invokes = "".join(invoke(n, a, json_text) for n, a in items)
    return f"{NS}<tool_call>\n{invokes}{NS}</tool_call>"


def el(tag: str, body: str) -> str:
    return f"{NS}<{tag}>{body}{NS}</{tag}>"


def block(*invokes: str) -> str:
    return f"{NS}<tool_call>\n" + "".join(invokes) + f"{NS}</tool_call>"


def raw_invoke(name: str, *params: str) -> str:
    return f'{NS}<invoke name="{name}">' + "".join(params) + f"{NS}</invoke>\n"


def enabled_think(reasoning: str, answer: str) -> str:
    """Thinking enabled: the prompt opened the block; the model ends it."""
    return f"{reasoning}{END_THINK}{answer}"


def explicit_think(reasoning: str, answer: str) -> str:
    """Any other mode: the model writes the whole block."""
    return f"{THINK}{reasoning}{END_THINK}{answer}"


def think_for(mode: str) -> Any:
    return enabled_think if mode == "enabled" else explicit_think


M3 = Family(
    prefix="minimax_m3",
    data="minimax-m3",
    model=M3_MODEL,
    folder="minimax_m3",
    eos=(EOS,),
    servers=(Server(SERVER, "minimax_m3", "minimax_m3", calls=m3_calls),),
    seed=20261207,
    no_think=DISABLED,
    think=explicit_think,
    # ]!p~[, <fim_prefix>, ]~b], ]<]image[>[; <think> and <tool_call> (added, not special:
    # text to M3's parsers)
    specials=(200000, 200001, 200019, 200025),
    added=(200050, 200052),
    alternatives=(19739, 275, 32, 44, 46, 230, 240, 159, 18396, 1085),
    plain=((SERVER, {}),),
)

# A tool whose parameters have nested schemas (vLLM's own engine test): a nested object's
# leaves, an array's items, an anyOf array|string, a free-form object.
ORDER = C.function_tool(
    "create_order",
    "Create an order",
    {
        "user_id": {"type": "integer"},
        "note": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "qty": {"type": "array", "items": {"type": "integer"}},
        "shipping": {
            "type": "object",
            "properties": {"zip": {"type": "integer"}, "city": {"type": "string"}},
        },
        "either": {"anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "string"}]},
        "free": {"type": "object"},
    },
)
# Schemas whose type is not one name: a list of types, anyOf alternatives, an enum; and
# single types given words that are no JSON of theirs.
COERCE = C.function_tool(
    "set_values",
    "Set values",
    {
        "flag": {"type": "boolean"},
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "multi": {"type": ["string", "integer"]},
        "maybe": {"type": ["integer", "null"]},
        "opt": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        "level": {"enum": [1, 2, 3]},
        "label": {"type": "string"},
    },
)
ORDER_TOOLS = [*TYPED_TOOLS, ORDER, COERCE]


def mark_texts(case: Case, tok: Tokenizer) -> Case:
    """Record each choice's output text (special tokens kept) for the differences about
    M3's think markup (`case.extra["texts"]`, by choice index), and the special tokens'
    texts (`case.extra["specials"]`)."""
    case.extra["texts"] = {
        str(g.index): tok.decode(g.token_ids, skip_special_tokens=False) for g in case.outputs[0]
    }
    return F.mark_specials(case, tok)


def _case(
    name: str, req: dict[str, Any], gens: list[Gen], shape: str | None = None, api: str = "chat"
) -> Case:
    case = Case(f"minimax_m3-{name}", SERVER, api, False, req, [gens])
    if shape is not None:
        case.extra["shape"] = shape
    return case


def _text(b: Builder, name: str, text: str, how: str | int = "random", **kw: Any) -> None:
    """A case of one output text, ending on EOS, streamed (chunked by `how`) and whole."""
    shape = kw.pop("shape", None)
    b.both(_case(name, M3.chat_request(**kw), [Gen([*b.ids(text), EOS])], shape), how)


def _plain_ids(b: Builder, text: str) -> list[int]:
    """`text` one character at a time: markers become ordinary tokens."""
    return [i for ch in text for i in b.ids(ch)]
