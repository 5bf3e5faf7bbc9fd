"""Tool formats whose arguments are key/value markup (vLLM 0.33.0's configs in
vllm/parser/, the file named at each table): DSML, Qwen3 XML and its relatives, GLM,
MiniMax M2 and M3, Kimi K3's XTML, Gemma 4.

The tables name each parameter's key and value markers; params.py turns `key → value`
into a JSON object as values complete (gemma.py and elements.py read Gemma's and
MiniMax M3's own argument syntax).
"""

from __future__ import annotations

from dataclasses import replace

from worker.core.parsers.language.grammar import (
    ARGS,
    BETWEEN,
    CALL_END,
    CALL_START,
    CONTENT,
    DROP,
    FORCED_JSON,
    FORCED_NATIVE,
    HEAD_ATTRS,
    HEAD_GEMMA,
    NAME,
    NAME_END,
    PARAM_END,
    PARAM_START,
    PKEY,
    PREAMBLE,
    PTYPE,
    PVALUE,
    VALUE_START,
    Table,
    ToolFormat,
    Transition,
)
from worker.core.parsers.language.markers import (
    MINIMAX_TOOL_CALL,
    QWEN_TOOL_CALL,
    XTML_CLOSE,
    XTML_OPEN,
    XTML_SEP,
)
from worker.core.parsers.language.state import CallElements, CallGemma, CallParams

# -- DSML: deepseek_v4, deepseek_v32 (vllm/parser/deepseek_v4.py, deepseek_v32.py) ---------


def dsml(name: str, wrapper: str, space: str = "", variants: tuple[str, ...] = ()) -> ToolFormat:
    """DSML; `space` is V4.1's blank after `｜DSML｜`, `variants` other spellings of the
    block opener seen in production (vLLM 0.33 accepts them)."""
    d = f"｜DSML｜{space}"
    block, block_end = f"<{d}{wrapper}>", f"</{d}{wrapper}>"
    invoke, invoke_end = f'<{d}invoke name="', f"</{d}invoke>"
    param, param_end = f'<{d}parameter name="', f"</{d}parameter>"
    flag, close = '" string="', '">'
    t: Table = {
        (CONTENT, block): Transition(PREAMBLE),
        (CONTENT, invoke): Transition(NAME, CALL_START),  # an invoke without its block
        (PREAMBLE, invoke): Transition(NAME, CALL_START),
        (NAME, close): Transition(ARGS),
        (NAME, invoke_end): Transition(BETWEEN, CALL_END),
        (ARGS, param): Transition(PKEY, PARAM_START),
        (ARGS, invoke_end): Transition(BETWEEN, CALL_END),
        (PKEY, flag): Transition(PTYPE),
        (PKEY, close): Transition(PVALUE, VALUE_START),
        (PTYPE, close): Transition(PVALUE, VALUE_START),
        (PVALUE, param_end): Transition(ARGS, PARAM_END),
        # A missing close tag is tolerated: the next parameter or the end closes it.
        (PVALUE, param): Transition(PKEY, PARAM_END | PARAM_START),
        (PVALUE, invoke_end): Transition(BETWEEN, PARAM_END | CALL_END),
        (BETWEEN, invoke): Transition(NAME, CALL_START),
        (BETWEEN, block): Transition(PREAMBLE),
        # A tool call ends the turn: text after the block is dropped (vLLM 0.33 stays in
        # its TOOL_BETWEEN state), so the block's end leads nowhere else.
        (PREAMBLE, block_end): Transition(BETWEEN),
        (ARGS, block_end): Transition(BETWEEN, CALL_END),
        (PVALUE, block_end): Transition(BETWEEN, PARAM_END | CALL_END),
    }
    for other in variants:
        t[(CONTENT, other)] = Transition(PREAMBLE)
        t[(BETWEEN, other)] = Transition(PREAMBLE)
    return ToolFormat(name, t, CallParams, typed_flag=True, schema=True)


# -- qwen3_coder / qwen3_xml (vllm/parser/qwen3.py) ----------------------------------------


def qwen3_xml(
    name: str,
    block: str = QWEN_TOOL_CALL,
    block_end: str = "</tool_call>",
    value_newlines: bool = True,
    keep_whitespace: bool = False,
) -> ToolFormat:
    """Qwen3 XML; the relatives rename the wrappers (seed_oss), keep values verbatim
    (mimo) or keep whitespace-only content before calls (step5)."""
    fn, fn_end = "<function=", "</function>"
    param, param_end = "<parameter=", "</parameter>"
    return ToolFormat(
        name,
        {
            (CONTENT, block): Transition(PREAMBLE),
            (CONTENT, fn): Transition(NAME, CALL_START),  # a call without the wrapper
            (PREAMBLE, fn): Transition(NAME, CALL_START),
            (PREAMBLE, block_end): Transition(CONTENT),
            (NAME, ">"): Transition(ARGS),
            (NAME, fn_end): Transition(BETWEEN, CALL_END),  # malformed: dropped
            (ARGS, param): Transition(PKEY, PARAM_START),
            (ARGS, fn_end): Transition(BETWEEN, CALL_END),
            (ARGS, block_end): Transition(CONTENT, CALL_END),
            (PKEY, ">"): Transition(PVALUE, VALUE_START),
            (PVALUE, param_end): Transition(ARGS, PARAM_END),
            (PVALUE, param): Transition(PKEY, PARAM_END | PARAM_START),
            (PVALUE, fn_end): Transition(BETWEEN, PARAM_END | CALL_END),
            (PVALUE, block_end): Transition(CONTENT, PARAM_END | CALL_END),
            (BETWEEN, block_end): Transition(CONTENT),
            (BETWEEN, block): Transition(PREAMBLE),
            (BETWEEN, fn): Transition(NAME, CALL_START),  # missing </tool_call> tolerated
        },
        CallParams,
        value_newlines=value_newlines,
        schema=True,
        keep_whitespace=keep_whitespace,
    )


# -- GLM-4.5 … 5.x (vllm/parser/glm47_moe.py) ----------------------------------------------


def _glm45() -> ToolFormat:
    call, call_end = QWEN_TOOL_CALL, "</tool_call>"
    key, key_end, value, value_end = "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"
    return ToolFormat(
        "glm45",
        {
            (CONTENT, call): Transition(NAME, CALL_START),
            (NAME, key): Transition(PKEY, PARAM_START),
            (NAME, call_end): Transition(CONTENT, NAME_END | CALL_END),  # no arguments
            (PKEY, key_end): Transition(ARGS),  # the key waits in the call for its value
            (PKEY, call_end): Transition(CONTENT, CALL_END),
            (ARGS, value): Transition(PVALUE, VALUE_START),
            (ARGS, key): Transition(PKEY, PARAM_START),
            (ARGS, call_end): Transition(CONTENT, CALL_END),
            (PVALUE, value_end): Transition(ARGS, PARAM_END),
            # A value left open: the call's end closes it (the JSON stays valid).
            (PVALUE, call_end): Transition(CONTENT, PARAM_END | CALL_END),
        },
        CallParams,
        schema=True,
        known_names=True,
        forced=FORCED_NATIVE,  # vLLM's GLM parser never takes the JSON path
        # vLLM matches only the call's wrapper by token id; the argument tags by text.
        text_markers=(key, key_end, value, value_end),
    )


GLM45 = _glm45()
# poolside_v1_tool_parser.py: Laguna writes GLM-4's calls; any name is taken, untyped values
# are guessed.
POOLSIDE_V1 = replace(
    GLM45,
    name="poolside_v1",
    known_names=False,
    guess_types=True,
    # vLLM's Laguna parser is regexes over the text: every marker is matched on text.
    text_markers=(
        "<tool_call>",
        "</tool_call>",
        "<arg_key>",
        "</arg_key>",
        "<arg_value>",
        "</arg_value>",
    ),
)

# -- MiniMax M2 / M2.x (vllm/parser/minimax_m2.py) -----------------------------------------


def _minimax_m2() -> ToolFormat:
    block, block_end = MINIMAX_TOOL_CALL, "</minimax:tool_call>"
    invokes = ('<invoke name="', "<invoke name='", "<invoke name=")  # quoted or bare
    invoke_end, param, param_end = "</invoke>", "<parameter name=", "</parameter>"
    t: Table = {
        (CONTENT, block): Transition(PREAMBLE),
        (CONTENT, block_end): Transition(CONTENT),  # stray: absorbed
        (PREAMBLE, block_end): Transition(CONTENT),
        (BETWEEN, block_end): Transition(CONTENT),
        (NAME, invoke_end): Transition(BETWEEN, CALL_END),
        (ARGS, param): Transition(PKEY, PARAM_START),
        (ARGS, invoke_end): Transition(BETWEEN, CALL_END),
        (ARGS, block_end): Transition(CONTENT, CALL_END),
        (PKEY, ">"): Transition(PVALUE, VALUE_START),  # the key keeps its quotes
        (PVALUE, param_end): Transition(ARGS, PARAM_END),
        # A missing closer is tolerated: the next parameter or the call's end closes it.
        (PVALUE, param): Transition(PKEY, PARAM_END | PARAM_START),
        (PVALUE, invoke_end): Transition(BETWEEN, PARAM_END | CALL_END),
        (PVALUE, block_end): Transition(CONTENT, PARAM_END | CALL_END),
    }
    for state in (CONTENT, PREAMBLE, BETWEEN):  # an invoke outside its block is a call too
        for opener in invokes:
            t[(state, opener)] = Transition(NAME, CALL_START)
    for name_end in ('">', "'>", ">"):
        t[(NAME, name_end)] = Transition(ARGS)
    return ToolFormat("minimax_m2", t, CallParams, schema=True, known_names=True)


MINIMAX_M2 = _minimax_m2()

# -- Gemma 4, FunctionGemma (vllm/parser/gemma4.py, functiongemma_tool_parser.py) ----------


def _gemma(
    name: str, call: str, end: str, quote: str, turn_end: str, forced: int, guess: bool = False
) -> ToolFormat:
    return ToolFormat(
        name,
        {
            (CONTENT, call): Transition(NAME, CALL_START),
            # The name ends where its arguments open; the brace is theirs too.
            (NAME, "{"): Transition(ARGS, keep=True),
            (NAME, "("): Transition(ARGS, keep=True),
            (NAME, end): Transition(CONTENT, NAME_END | CALL_END),
            (ARGS, quote): Transition(PVALUE, VALUE_START),
            (PVALUE, quote): Transition(ARGS, PARAM_END),
            (ARGS, end): Transition(CONTENT, CALL_END),
            (PVALUE, end): Transition(CONTENT, CALL_END),
            (ARGS, turn_end): Transition(CONTENT, CALL_END),
            (PVALUE, turn_end): Transition(CONTENT, CALL_END),
        },
        CallGemma,
        header=HEAD_GEMMA,
        schema=True,
        # FunctionGemma's parser is regexes over the text: all its markers are text.
        text_markers=(call, end, quote, turn_end) if guess else (quote,),
        forced=forced,
        guess_types=guess,
    )


# vllm/parser/gemma4.py: Gemma 4's calls; `<|"|>` strings, bare values typed by the schema.
GEMMA4 = _gemma("gemma4", "<|tool_call>", "<tool_call|>", '<|"|>', "<turn|>", FORCED_NATIVE)
# FunctionGemma 270M: the same call syntax with `<escape>` strings; only those values
# count, each JSON when it parses (no schema), and tool_choice required / named are the
# constrained JSON of other models.
FUNCTIONGEMMA = _gemma(
    "functiongemma",
    "<start_function_call>",
    "<end_function_call>",
    "<escape>",
    "<end_of_turn>",
    FORCED_JSON,
    guess=True,
)

# -- MiniMax M3 (vllm/parser/minimax_m3.py) ------------------------------------------------


def _minimax_m3() -> ToolFormat:
    ns = "]<]minimax[>["  # every tag inside a call block carries it
    block, block_end, invoke_end = ns + "<tool_call>", ns + "</tool_call>", ns + "</invoke>"
    t: Table = {
        (CONTENT, block): Transition(PREAMBLE),
        (DROP, block): Transition(PREAMBLE),  # text after a block is dropped, as in vLLM
        (PREAMBLE, block_end): Transition(DROP),
        (BETWEEN, block_end): Transition(DROP),
        (NAME, invoke_end): Transition(BETWEEN, CALL_END),
        (ARGS, invoke_end): Transition(BETWEEN, CALL_END),
        (ARGS, block_end): Transition(DROP, CALL_END),
    }
    for state in (PREAMBLE, BETWEEN):
        for opener in ('<invoke name="', "<invoke name='", "<invoke name="):
            t[(state, ns + opener)] = Transition(NAME, CALL_START)
    for name_end in ('">', "'>", ">"):
        t[(NAME, name_end)] = Transition(ARGS)
    return ToolFormat(
        "minimax_m3", t, CallElements, schema=True, forced=FORCED_NATIVE, type_unions=True
    )


MINIMAX_M3 = _minimax_m3()

# -- Kimi K3 (vllm/parser/kimi_k3.py, kimi_k3_tool_parser.py) ------------------------------


def _kimi_k3() -> ToolFormat:
    o, c, sep = XTML_OPEN, XTML_CLOSE, XTML_SEP
    tools, tools_end = o + "tools" + sep, c + "tools" + sep
    t: Table = {
        # The answer channel's wrappers and the message's end are not text.
        (CONTENT, c + "message" + sep): Transition(DROP),  # the message ends
        (CONTENT, tools): Transition(PREAMBLE),
        (DROP, tools): Transition(PREAMBLE),
        # A call outside the tools channel is a call all the same.
        (CONTENT, o + "call"): Transition(NAME, CALL_START),
        (DROP, o + "call"): Transition(NAME, CALL_START),
        (PREAMBLE, o + "call"): Transition(NAME, CALL_START),
        (NAME, sep): Transition(ARGS),  # the attributes are read: `tool="NAME"`
        (ARGS, o + "argument"): Transition(PKEY, PARAM_START),
        (PKEY, sep): Transition(PVALUE, VALUE_START),  # `key="K" type="T"`
        (PVALUE, c + "argument" + sep): Transition(ARGS, PARAM_END),
        (ARGS, c + "call" + sep): Transition(PREAMBLE, CALL_END),
        (PREAMBLE, tools_end): Transition(DROP),
        (PREAMBLE, c + "message" + sep): Transition(DROP),
    }
    # The answer channel's wrappers are not text (also written with spaces inside);
    # after the answer closes, only another channel counts.
    for name in ("response", " response "):
        t[(CONTENT, o + name + sep)] = Transition(CONTENT)
        t[(DROP, o + name + sep)] = Transition(CONTENT)
        t[(CONTENT, c + name + sep)] = Transition(DROP)
    return ToolFormat(
        "kimi_k3",
        t,
        CallParams,
        header=HEAD_ATTRS,
        typed_flag=True,
        attrs=True,
        forced=FORCED_NATIVE,
        text_markers=(o, c, sep),
    )


KIMI_K3 = _kimi_k3()
