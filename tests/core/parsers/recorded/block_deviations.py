"""The typed-block families' entries of test_vllm_answers.py: Inkling.

Answers probed 2026-12-02 from vLLM 0.33.0's render server (`--reasoning-parser inkling
--tool-call-parser inkling`) on the `inkling` folder of `tests/peer/recorded/recorded_blocks.py`:
`inkling_tokenizer()` (Qwen3 vocabulary + Inkling's block tokens); Inkling blocks, the
prompt ending `<|message_model|>` (`chat_template_kwargs.prefill` opens a thinking or text
block too); Qwen3ForCausalLM; EOS `<|endoftext|>`.
"""

from __future__ import annotations

from typing import Any

from tests.support.vocab.synthetic_inkling import inkling_tokenizer
from tests.support.vocab.synthetic_k2_horizon import k2_horizon_tokenizer
from tests.support.vocab.synthetic_muse import muse_tokenizer

# family → (reasoning parser, tool parser, tokenizer, EOS id), as test_vllm_answers.Family.
BLOCK_FAMILIES: dict[str, tuple[Any, ...]] = {
    "inkling": ("inkling", "inkling", inkling_tokenizer, 151643),
    "k2_horizon": ("k2_horizon", "k2_horizon", k2_horizon_tokenizer, 151645),
    "muse": ("muse", "muse", muse_tokenizer, 151672),
    "muse_glimmer": ("muse_glimmer", "muse_glimmer", muse_tokenizer, 151672),
}

STREAM = "stream"  # test_vllm_answers.STREAM: we give vLLM's streamed answer
PREFILL = (
    "differences.md inkling-prefill: vLLM's whole response ignores the block the prompt opened "
    "(its stream reads it, as its parser's prompt scan says); we read it in both"
)
OPEN_THINKING = (
    "differences.md inkling-open-thinking: vLLM shows the markers after an unclosed thinking block "
    "as reasoning text; we read them as the header / block they open"
)
WEATHER = ("get_weather", {"city": "Tokyo", "days": 3})
K2H_OPEN = (
    "differences.md k2h-unterminated-reasoning: an output without the think end marker (or a tool "
    'group): vLLM\'s whole response gives it all as content (reasoning ""), its stream as '
    "reasoning; we follow the stream (the whole answer's way would hold the whole reasoning)"
)
K2H_STRICT = (
    "differences.md k2h-strict-group: vLLM reads a tool group only when all of it is well-formed "
    "(closed, every name a request tool without spaces, no duplicate keys, type tags as "
    "`tool_call_format` says, no text between calls), else gives the group's markup as "
    "content; we read the calls as they stream: each one written makes a call (an unknown "
    "name none), markup never becomes content"
)
K2H_JSON = (
    "differences.md k2h-json-types: with `tool_call_format: json` vLLM converts each argument to "
    'its schema type (`5` for a string parameter → `"5"`); we pass the model\'s JSON through'
)
MARKUP = (
    "differences.md tool-markup-in-content: with tools off vLLM keeps the call group as content; "
    "we drop it, as vLLM's engine parsers do"
)
CUT = (
    "a call cut short: vLLM gives the group's markup as content; we send the call as far as "
    "it was written, its arguments closed, and none for a cut name (differences.md unclosed-value, "
    "cut-name)"
)
ECHO_TEXT = (
    'Example: <atem:function_calls><atem:invoke name="get_weather"><atem:parameter name="city">'
    'Tokyo</atem:parameter><atem:parameter name="days">3</atem:parameter></atem:invoke>'
    "</atem:function_calls>"
)
ECHOED = (
    "differences.md muse-echoed-invoke: ATEM markup quoted in an answer (`to=user`) is text: "
    "vLLM's whole response runs it as a call as well, its stream does not"
)
MUSE_CUT_CALL: dict[str, Any] = {
    "content": None,
    "tool_calls": [("get_weather", {"city": "Tok"})],
}
CUT_MUSE = (
    "a call cut short: vLLM's whole response gives the tool message's raw text as content, "
    "its stream nothing; we send the call as far as it was written, its arguments closed "
    "(differences.md unclosed-value)"
)
MUSE_UNCLOSED_ANSWER: dict[str, Any] = {
    "reasoning": "thinking to=get_weather" + ECHO_TEXT.removeprefix("Example: "),
    "tool_calls": [],
}
MUSE_UNCLOSED = (
    "differences.md muse-unclosed-body: a body never ended (no `<|eom|>`) before a header without "
    "`<|start|>` (`thinking to=get_weather<|message|>…`): vLLM reads the header out of the "
    "body's text; we keep reading the body (its text was sent before `<|message|>` came)"
)
BLOCK_DEVIATIONS: dict[str, dict[str, tuple[str | dict[str, Any], str]]] = {
    "inkling": {
        "prefill thinking": (STREAM, PREFILL),
        "prefill thinking, call": (STREAM, PREFILL),
        "truncated mid-args": (
            {"tool_calls": [("get_weather", {"city": "Tok"})]},
            "differences.md unclosed-value: vLLM sends the cut arguments as written (no JSON); we "
            "close them where the output stopped",
        ),
        "model marker inside thinking": ({"reasoning": "r", "content": "a"}, OPEN_THINKING),
        "text marker inside thinking": ({"reasoning": "r", "content": "a"}, OPEN_THINKING),
    },
    "k2_horizon": {
        "no end: unterminated reasoning": (STREAM, K2H_OPEN),
        "truncated reasoning": (STREAM, K2H_OPEN),
        "effort medium, high end token": (
            {"reasoning": "r", "content": "a"},
            "differences.md k2h-effort-markers: every effort's think markers are read, whatever "
            "`reasoning_effort` the request names (vLLM reads that effort's only)",
        ),
        "start token later": (
            {"reasoning": "rx"},
            "differences.md k2h-repeated-opener: a think opener inside the reasoning is dropped; "
            "vLLM drops only one at the very start and shows a later one as text",
        ),
        "unknown tool": ({"content": None}, K2H_STRICT),
        "no tools, unknown name": ({"content": None}, MARKUP),
        "duplicate argument": (
            {"content": None, "tool_calls": [("get_weather", '{"city": "A", "city": "B"}')]},
            K2H_STRICT,
        ),
        "name with space": ({"content": None}, K2H_STRICT),
        "text inside group": ({"content": None, "tool_calls": [WEATHER]}, K2H_STRICT),
        "missing group end": ({"content": "Hi ", "tool_calls": [WEATHER]}, K2H_STRICT),
        "missing call end": (
            {"content": None, "tool_calls": [("get_weather", {"city": "A"})]},
            K2H_STRICT,
        ),
        "type tag in xml": ({"content": None, "tool_calls": [WEATHER]}, K2H_STRICT),
        "xml_typed missing type": ({"content": None, "tool_calls": [WEATHER]}, K2H_STRICT),
        "xml output under json format": ({"content": None}, K2H_STRICT),
        "tool_choice named, other call": (
            {"content": "", "tool_calls": [("get_current_date", {})]},
            K2H_STRICT,
        ),
        "truncated mid-value": (
            {"content": None, "tool_calls": [("get_weather", {"city": "Tok"})]},
            CUT,
        ),
        "truncated mid-name": ({"content": None}, CUT),
        "xml_typed unknown param typed": (
            {"tool_calls": [("get_weather", {"city": "A", "extra": "[1]"})]},
            "differences.md k2h-typed-unknown: a parameter the schema does not name is a string; "
            "vLLM types it by its `<ifm|arg_type>`",
        ),
        "json format string coerced": (
            {"tool_calls": [("get_weather", {"city": 5, "days": "3"})]},
            K2H_JSON,
        ),
        "json format bad json": (
            {"content": None, "tool_calls": [("get_weather", {})]},
            K2H_STRICT
            + " (a cut JSON body's arguments are closed: differences.md invalid-arguments)",
        ),
        "tool_choice none": ({"content": "Sure."}, MARKUP),
        "no tools + call": ({"content": "Sure."}, MARKUP),
        "two groups": (
            {
                "content": "mid",
                "tool_calls": [WEATHER, ("get_current_date", {})],
            },
            "differences.md k2h-second-group: vLLM reads the first group and shows a later one as "
            "text; we make its calls too",
        ),
    },
    "muse": {
        "truncated in call": (MUSE_CUT_CALL, CUT_MUSE),
        "invoke echoed in answer": (STREAM, ECHOED),
        "unclosed reasoning then call": (MUSE_UNCLOSED_ANSWER, MUSE_UNCLOSED),
        "no tools, call": ({"content": "a"}, MARKUP),
        "tool_choice none": ({"content": "a"}, MARKUP),
    },
    "muse_glimmer": {
        "two answer blocks": (
            {"content": "ab"},
            "differences.md muse-glimmer-first-answer: vLLM's Glimmer keeps the first `to=user` "
            "message only; we keep every one, as Spark does",
        ),
        "truncated in call": (MUSE_CUT_CALL, CUT_MUSE),
        "invoke echoed in answer": (
            {"content": ECHO_TEXT},
            ECHOED + " (Glimmer's whole response also keeps the framing around it)",
        ),
        "string param keeps json-looking text": (
            {"tool_calls": [("get_weather", {"city": "123", "days": 3})]},
            "differences.md muse-glimmer-strings: a parameter the schema types `string` is text; "
            "vLLM's Glimmer decodes `123` to a number",
        ),
        "unclosed reasoning then call": (MUSE_UNCLOSED_ANSWER, MUSE_UNCLOSED),
        "missing eom before next start": (
            {"reasoning": "r"},
            "differences.md muse-glimmer-start-in-body: vLLM's Glimmer keeps the next message's "
            "`<|start|>assistant ` in the reasoning; a body ends where a message starts",
        ),
        "no tools, call": ({"content": "a"}, MARKUP),
        "tool_choice none": ({"content": "a"}, MARKUP),
    },
}
