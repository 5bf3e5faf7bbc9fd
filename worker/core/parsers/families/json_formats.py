"""Tool formats whose arguments are JSON text, or a Python call list
(vLLM 0.33.0 vllm/tool_parsers/, the file named at each table): hermes and its
relatives, Kimi K2, Mistral, Llama 3 JSON, pythonic, DeepSeek V3.

Markers delimit a call (or a block of calls); call_list.py reads `{"name", "arguments"}`
objects, json_args.py passes JSON arguments through, pythonic.py converts keyword
arguments.
"""

from __future__ import annotations

from worker.core.parsers.language.grammar import (
    ARGS,
    BETWEEN,
    CALL_END,
    CALL_START,
    CONTENT,
    FORCED_JSON,
    FORCED_NATIVE,
    FORCED_STRICT,
    HEAD_KIMI,
    HEAD_MISTRAL,
    HEADER,
    ID_MISTRAL,
    ID_NATIVE,
    NAME,
    PREAMBLE,
    SHAPE_ARRAY,
    SHAPE_SEQUENCE,
    SHAPE_SINGLE,
    CallShape,
    Table,
    ToolFormat,
    Transition,
)
from worker.core.parsers.language.markers import KIMI_SECTION, MISTRAL_TOOL_CALLS, QWEN_TOOL_CALL
from worker.core.parsers.language.state import CallJson, CallList, CallPythonic

# -- hermes (hermes_tool_parser.py) --------------------------------------------------------


def hermes(
    name: str,
    call: str = QWEN_TOOL_CALL,
    call_end: str = "</tool_call>",
    text_after: bool = False,
    forced: int = FORCED_STRICT,
) -> ToolFormat:
    """`{"name", "arguments"}` in tags; text after or between calls is not content
    (vLLM's streaming hermes), unless `text_after` (granite4 keeps it)."""
    after = CONTENT if text_after else BETWEEN
    return ToolFormat(
        name,
        {
            (CONTENT, call): Transition(ARGS, CALL_START),
            (ARGS, call_end): Transition(after, CALL_END),
            (BETWEEN, call): Transition(ARGS, CALL_START),
        },
        CallList,
        calls=CallShape(SHAPE_SINGLE),
        forced=forced,
    )


HERMES = hermes("hermes")

# -- kimi_k2 (kimi_k2_tool_parser.py, vllm/parser/kimi_k2.py) ------------------------------


def _kimi_k2() -> ToolFormat:
    call, arg, call_end = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"
    t: Table = {
        (PREAMBLE, call): Transition(NAME, CALL_START),
        (CONTENT, call): Transition(NAME, CALL_START),  # a call without its section
        (NAME, arg): Transition(ARGS),
        (NAME, call_end): Transition(PREAMBLE, CALL_END),
        (ARGS, call_end): Transition(PREAMBLE, CALL_END),
        (ARGS, call): Transition(NAME, CALL_END | CALL_START),
    }
    # The singular spellings are tolerated (legacy parser); text after the section is
    # suppressed (the section end leads back to the preamble, not to content).
    for begin, end in (
        (KIMI_SECTION, "<|tool_calls_section_end|>"),
        ("<|tool_call_section_begin|>", "<|tool_call_section_end|>"),
    ):
        t[(CONTENT, begin)] = Transition(PREAMBLE)
        t[(PREAMBLE, end)] = Transition(PREAMBLE)
        t[(ARGS, end)] = Transition(PREAMBLE, CALL_END)
    return ToolFormat("kimi_k2", t, CallJson, header=HEAD_KIMI, ids=ID_NATIVE, schema=True)


KIMI_K2 = _kimi_k2()


# -- mistral (mistral_tool_parser.py, vllm/parser/mistral.py) ------------------------------

MISTRAL_V11 = ToolFormat(
    "mistral",
    {
        (CONTENT, MISTRAL_TOOL_CALLS): Transition(NAME, CALL_START),
        (NAME, "[ARGS]"): Transition(ARGS),
        # mistral-common does not render [ARGS]: the name then ends at the JSON's "{".
        (NAME, "{"): Transition(ARGS, keep=True),
        (NAME, MISTRAL_TOOL_CALLS): Transition(NAME, CALL_END | CALL_START),
        (ARGS, MISTRAL_TOOL_CALLS): Transition(NAME, CALL_END | CALL_START),
    },
    CallJson,
    header=HEAD_MISTRAL,
    ids=ID_MISTRAL,
    forced=FORCED_NATIVE,
)

MISTRAL_PRE_V11 = ToolFormat(
    "mistral",
    {
        (CONTENT, MISTRAL_TOOL_CALLS): Transition(ARGS, CALL_START),
        (ARGS, MISTRAL_TOOL_CALLS): Transition(ARGS, CALL_END | CALL_START),
    },
    CallList,
    calls=CallShape(SHAPE_ARRAY),
    ids=ID_MISTRAL,
    fallback=True,
    forced=FORCED_NATIVE,
)

# -- llama3_json (llama_tool_parser.py) ----------------------------------------------------

LLAMA3_JSON = ToolFormat(
    "llama3_json",
    {
        (CONTENT, "<|python_tag|>"): Transition(ARGS, CALL_START),
        # A call after some prose (vLLM finds calls anywhere in non-streaming mode).
        (CONTENT, '{"name"'): Transition(ARGS, CALL_START, keep=True),
    },
    CallList,
    sniff="{",
    calls=CallShape(SHAPE_SEQUENCE, ("parameters", "arguments"), need_args_key=True),
    fallback=True,
)

# -- pythonic (pythonic_tool_parser.py, llama4_pythonic_tool_parser.py) --------------------

PYTHONIC = ToolFormat(
    "pythonic",
    {
        (CONTENT, "<|python_start|>"): Transition(ARGS, CALL_START),
        (ARGS, "<|python_end|>"): Transition(BETWEEN, CALL_END),
    },
    CallPythonic,
    sniff="[",
    fallback=True,
    forced=FORCED_JSON,  # vLLM has no structural tag for it
)

# -- DeepSeek V3 / V3.1 (deepseekv3_tool_parser.py, deepseekv31_tool_parser.py) ------------
# Not asked for, but two more tables cost nothing.

_V3_CALLS, _V3_CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
_V3_CALL, _V3_CALL_END, _V3_SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"

DEEPSEEK_V31 = ToolFormat(
    "deepseek_v31",
    {
        (CONTENT, _V3_CALLS): Transition(PREAMBLE),
        (PREAMBLE, _V3_CALL): Transition(NAME, CALL_START),
        (NAME, _V3_SEP): Transition(ARGS),
        (ARGS, _V3_CALL_END): Transition(PREAMBLE, CALL_END),
        (NAME, _V3_CALL_END): Transition(PREAMBLE, CALL_END),
        # Text after the block is dropped (test_tool_cases_markers.py D02).
        (PREAMBLE, _V3_CALLS_END): Transition(PREAMBLE),
    },
    CallJson,
)

DEEPSEEK_V3 = ToolFormat(
    "deepseek_v3",
    {
        (CONTENT, _V3_CALLS): Transition(PREAMBLE),
        (PREAMBLE, _V3_CALL): Transition(HEADER, CALL_START),  # "function" is dropped
        (HEADER, _V3_SEP): Transition(NAME),
        (NAME, "\n```json\n"): Transition(ARGS),  # the closing fence ends the JSON value
        (ARGS, _V3_CALL_END): Transition(PREAMBLE, CALL_END),
        (NAME, _V3_CALL_END): Transition(PREAMBLE, CALL_END),
        (PREAMBLE, _V3_CALLS_END): Transition(PREAMBLE),
    },
    CallJson,
)
