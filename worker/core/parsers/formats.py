"""Every supported format as a small configuration of the one engine (engine.py).

A reasoning format names its two think markers and how the start state is chosen; a
tool format is a `(state, marker) -> Transition` table plus how the text between the
markers becomes a name and JSON arguments. A model's registry entry picks one of each
by name (`reasoning_parser`, `tool_parser`, CONTRACT.md §7). Markers are literal
strings; `engine.compile_parser` finds which of them are single added tokens of the
model's tokenizer and matches those by token id, the rest on text.

Formats follow reference/vllm-parsers.md §2 (the section is named at each config).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

# -- engine states -----------------------------------------------------------------------
CONTENT = 0
REASONING = 1
PREAMBLE = 2  # inside a tool block, outside a call: text is dropped
NAME = 3  # a call's name / header text
ARGS = 4  # a call's arguments (or a JSON / pythonic call list)
BETWEEN = 5  # after a call, inside the block: text is dropped
PKEY = 6  # a parameter's name (XML, DSML)
PTYPE = 7  # a DSML parameter's `string="…"` flag
PVALUE = 8  # a parameter's value
HEADER = 9  # call header text that is not the name (DeepSeek V3 "function"): dropped
# Message frames (gpt-oss Harmony): output is a sequence of messages, each a header and
# a body; the header decides what the body is (Frames below).
FRAME = 10  # a message header being read (kept in ParserState.head)
GAP = 11  # after a message, before the next header starts: text is dropped
DROP = 12  # the body of a message no one reads (another channel, a built-in tool)
N_STATES = 13

# -- transition actions (bit flags, applied in this order) -------------------------------
PARAM_END = 1
CALL_END = 2
CALL_START = 4
PARAM_START = 8
VALUE_START = 16
NAME_END = 32  # the call's name is complete even though the call ends too (GLM zero-arg)
HEAD_OPEN = 64  # a message header starts: what was read before it is forgotten
HEAD_TEXT = 128  # the marker is header text (Harmony's <|channel|>, <|constrain|>)
HEAD_DONE = 256  # the header is complete: it picks the body's state (engine.Run.framed)

# -- how ARGS text becomes arguments ---------------------------------------------------
ARGS_JSON = 0  # raw JSON text, streamed as written (Kimi, Mistral v11)
ARGS_PARAMS = 1  # parameter markup → JSON object, converted per value (XML, DSML)
ARGS_CALLS = 2  # JSON objects holding name + arguments (hermes, llama3, required)
ARGS_PYTHONIC = 3  # a Python list of calls with keyword arguments
ARGS_VERBATIM = 4  # every later character is arguments (a named tool_choice's JSON output)
ARGS_GEMMA = 5  # Gemma 4's `{key:value,…}` with `<|"|>` strings (gemma.py)
ARGS_ELEMENTS = 6  # MiniMax M3's parameter elements, converted at the call's end (elements.py)

# -- JSON call lists (ARGS_CALLS) --------------------------------------------------------
SHAPE_SINGLE = 0  # one object (hermes: one per <tool_call>)
SHAPE_SEQUENCE = 1  # objects separated by ";" or whitespace (llama3_json)
SHAPE_ARRAY = 2  # a JSON array of objects (mistral pre-v11, tool_choice "required")

# -- call headers and ids ---------------------------------------------------------------
HEAD_PLAIN = 0  # the header text is the name
HEAD_KIMI = 1  # `functions.NAME:IDX` (the id), or a bare counter with the name inferred
HEAD_MISTRAL = 2  # the name, with a visible `[ARGS]` removed
HEAD_GEMMA = 3  # `call:NAME` (or `:NAME`): the name after the colon
HEAD_ATTRS = 4  # XML attributes, `tool="NAME" index="1"`: the name is `tool` (Kimi K3)
ID_HASH = 0  # "chatcmpl-tool-" + 32 hex digits of a hash (CONTRACT.md §3)
ID_MISTRAL = 1  # 9 alphanumerics from the same hash (mistral-common requires exactly 9)
ID_NATIVE = 2  # the id the model wrote (Kimi K2), which its chat template reads back

# -- what tool_choice "required" / named expect (vLLM 0.33 `supports_required_and_named`) --
FORCED_STRICT = 0  # the model's own format with strict tool calling, else bare JSON
FORCED_JSON = 1  # always the bare JSON of constrained decoding (no structural tag)
FORCED_NATIVE = 2  # always the model's own format (its JSON path does not apply)


class Transition(NamedTuple):
    to: int
    act: int = 0
    # The marker also acts in the new state (an implicit end: `<tool_call>` ends
    # reasoning and opens the tool block; mistral's `{` ends a name and starts arguments).
    keep: bool = False


Table = dict[tuple[int, str], Transition]


@dataclass(frozen=True)
class CallShape:
    """How a JSON call list is laid out (ARGS_CALLS)."""

    shape: int
    arg_keys: tuple[str, ...] = ("arguments",)
    # The header waits for the arguments key (llama3: `{"name": "x"}` alone is no call).
    need_args_key: bool = False


# -- an answer left without content (ReasoningFormat.swap; vLLM's nemotron_v3) ----------
SWAP_NONE = 0
SWAP_BLANK = 1  # content null or whitespace-only: reasoning and content change places
SWAP_ABSENT = 2  # only when the answer wrote no content at all (Granite 4.2)


@dataclass(frozen=True)
class Frames:
    """Output made of messages (gpt-oss Harmony, vllm-parsers-0.33.md §3.1): a header
    (read whole, bounded) up to `body`, then the body up to one of `ends`, then text
    that is dropped until `start` opens the next header. The first header needs no
    `start`: the prompt ended with it (`<|start|>assistant`). What a header says is
    read by frames.py; the body's state follows from its channel and recipient."""

    start: str
    body: str
    ends: tuple[str, ...]
    head_markers: tuple[str, ...]  # special tokens that are header text

    def table(self) -> Table:
        t: Table = {
            (FRAME, self.body): Transition(CONTENT, HEAD_DONE),
            (FRAME, self.start): Transition(FRAME, HEAD_TEXT),
            (GAP, self.start): Transition(FRAME, HEAD_OPEN),
        }
        for marker in self.head_markers:
            t[(FRAME, marker)] = Transition(FRAME, HEAD_TEXT)
        for state in (CONTENT, REASONING, ARGS, DROP):
            for marker in self.ends:
                t[(state, marker)] = Transition(GAP, CALL_END)
        return t


HARMONY = Frames(
    "<|start|>",
    "<|message|>",
    ("<|end|>", "<|call|>", "<|return|>"),
    ("<|channel|>", "<|constrain|>"),
)


@dataclass(frozen=True)
class ReasoningFormat:
    name: str
    start: str
    end: str
    thinking_default: bool  # start state when neither the prompt nor kwargs decide
    from_prompt: bool = True  # the last think marker of the prompt decides the start state
    from_kwargs: bool = True  # chat_template_kwargs (thinking / enable_thinking) decide
    reenter: bool = True  # a start marker in content opens reasoning again
    # Markers that end reasoning implicitly (a tool block opening inside reasoning).
    implicit_end: tuple[str, ...] = ()
    # Thinking off (by chat_template_kwargs, or by default) means no reasoning parsing at
    # all: the think markers are then plain text (vLLM's GLM config drops its think
    # rules; its DeepSeek V3 parser hands off to an identity parser).
    off_is_plain: bool = False
    # The reasoning's trailing whitespace is dropped (vLLM 0.33's engine parsers, unless
    # their config says otherwise; its older think-tag classes keep it).
    strip_trailing: bool = True
    # A whole response that was in reasoning but wrote none says `reasoning: ""` (the
    # older think-tag classes); the engine parsers say null.
    empty_as_text: bool = False
    # The chat_template_kwargs that switch thinking (any true one turns it on, as vLLM
    # ORs them; with `kwargs_on`, the one value that does, e.g. MiniMax M3's
    # `thinking_mode: "enabled"`); `effort_none`: `reasoning_effort: "none"` turns it off
    # (DeepSeek V4).
    kwargs_keys: tuple[str, ...] = ("enable_thinking", "thinking")
    kwargs_on: str = ""
    # The think markers are matched on text even where they are single tokens (MiniMax
    # M3 may write `<mm:think>` as several ordinary tokens; vLLM matches its text).
    text_match: bool = False
    effort_none: bool = False
    # No separation at all: the output is content, after the start marker the template
    # already wrote (MiniMax M2 "append think", so clients keep the trace in history).
    append: bool = False
    # Messages with headers instead of think markers (Harmony): `start`/`end` unused.
    frames: Frames | None = None
    # The older think-tag classes end reasoning once: everything after the end marker,
    # markers included, is content (vLLM's DeepSeek R1 parser streams it so).
    once: bool = False
    # Content's leading newlines are dropped (Granite 4.2 writes "\n</think>\n").
    lstrip_newlines: bool = False
    # A whole answer without content gets its reasoning as content when the request asks
    # (`force_nonempty_content: true`, or thinking switched off): SWAP_*.
    swap: int = SWAP_NONE
    # Text that opens every reasoning block and is not reasoning: the channel's name
    # (Gemma 4's `<|channel>thought\n`). Reasoning that is only its first line says none.
    prefix: str = ""

    def table(self) -> Table:
        if self.frames is not None:
            return self.frames.table()
        t: Table = {
            (REASONING, self.start): Transition(REASONING),  # duplicate start: absorbed
            (REASONING, self.end): Transition(CONTENT),
        }
        if self.once:
            return t
        t[(CONTENT, self.end)] = Transition(CONTENT)  # stray end: absorbed
        if self.reenter:
            t[(CONTENT, self.start)] = Transition(REASONING)
        for marker in self.implicit_end:
            t[(REASONING, marker)] = Transition(CONTENT, keep=True)
        return t


@dataclass(frozen=True)
class ToolFormat:
    name: str
    transitions: Table
    args: int
    # Characters that open a call list when they are the first non-whitespace of the
    # content (llama3_json "{", pythonic "["): formats without an opening marker.
    sniff: str = ""
    calls: CallShape | None = None
    header: int = HEAD_PLAIN
    ids: int = ID_HASH
    # XML values: one leading and one trailing newline are template formatting.
    value_newlines: bool = False
    # DSML: a `string="true|false"` flag says whether a value is a raw string.
    typed_flag: bool = False
    # Sniffed blocks that turn out not to be calls are given back as content.
    fallback: bool = False
    # The request tools' parameter types are needed (argument conversion, name inference).
    schema: bool = False
    # Whitespace-only content before a call is content too (vLLM's step5 config).
    keep_whitespace: bool = False
    # Calls whose name is not among the request's tools are dropped (vLLM's
    # `validate_tool_names`); with no tools in the request every name is taken.
    known_names: bool = False
    # What the output of tool_choice "required" / a named function looks like: with
    # strict tool calling vLLM constrains formats that have a structural tag to the
    # model's own syntax, so that is what gets parsed.
    forced: int = FORCED_STRICT
    # Calls are messages addressed to a function (Harmony): the frames' table.
    frames: Frames | None = None
    # Values that are not string parameters are JSON, else a Python literal, else text,
    # whatever type the schema names (poolside_v1); otherwise the schema types them.
    guess_types: bool = False
    # Parameter headers are XML attributes (`key="K" type="T"`; Kimi K3): `type`
    # "string" (or none) means raw text, anything else JSON (with `typed_flag`).
    attrs: bool = False
    # The schema's every type per parameter, not just the first (ToolSchema.types holds
    # `integer|string`; MiniMax M3 tries them in turn).
    type_unions: bool = False
    # Special tokens that are text wherever no transition takes them (Gemma 4's `<|"|>`
    # string delimiter, which vLLM keeps in content).
    text_markers: tuple[str, ...] = ()

    def opens(self) -> set[str]:
        """Markers that open a tool block from content (what may end reasoning)."""
        return {m for (s, m) in self.transitions if s == CONTENT}


# -- reasoning (reference §2.1-2.6) ------------------------------------------------------

THINK, END_THINK = "<think>", "</think>"
DSML_V4_BLOCK = "<｜DSML｜tool_calls>"
DSML_V4_VARIANTS = ("<｜DSML｜toolcalls>", "<｜DSML｜tool>")
DSML_V41_BLOCK = "<｜DSML｜ calls>"
QWEN_TOOL_CALL = "<tool_call>"
KIMI_SECTION = "<|tool_calls_section_begin|>"
MISTRAL_TOOL_CALLS = "[TOOL_CALLS]"

REASONING_FORMATS: dict[str, ReasoningFormat] = {
    # §2.2: no <think> in the output means the template put it in the prompt.
    # vLLM 0.33 still runs both with its older think-tag class.
    "deepseek_r1": ReasoningFormat(
        "deepseek_r1",
        THINK,
        END_THINK,
        thinking_default=True,
        strip_trailing=False,
        empty_as_text=True,
        once=True,
    ),
    # §2.4: V3.1/V3.2 think only when asked to (`thinking` / `enable_thinking`).
    "deepseek_v3": ReasoningFormat(
        "deepseek_v3",
        THINK,
        END_THINK,
        thinking_default=False,
        strip_trailing=False,
        empty_as_text=True,
        off_is_plain=True,
        once=True,
    ),
    # vllm-parsers-0.33.md §3.7: deepseek_v3 thinking unless the kwargs switch it off.
    "holo2": ReasoningFormat(
        "holo2",
        THINK,
        END_THINK,
        thinking_default=True,
        strip_trailing=False,
        empty_as_text=True,
        off_is_plain=True,
        once=True,
    ),
    # §2.3: Qwen3.5 may open a tool call without closing </think>.
    "qwen3": ReasoningFormat(
        "qwen3",
        THINK,
        END_THINK,
        thinking_default=True,
        reenter=False,
        implicit_end=(QWEN_TOOL_CALL,),
        strip_trailing=False,  # vLLM 0.33's qwen3 config keeps it
        off_is_plain=True,  # `enable_thinking: false`: the output is content, verbatim
        kwargs_keys=("enable_thinking",),
    ),
    # §2.4: thinking on by default; a DSML block inside reasoning ends it.
    "deepseek_v4": ReasoningFormat(
        "deepseek_v4",
        THINK,
        END_THINK,
        thinking_default=True,
        implicit_end=(DSML_V4_BLOCK, *DSML_V4_VARIANTS),
        effort_none=True,
    ),
    # vllm-parsers-0.33.md §3.6: V4 with spaced DSML.
    "deepseek_v41": ReasoningFormat(
        "deepseek_v41",
        THINK,
        END_THINK,
        thinking_default=True,
        implicit_end=(DSML_V41_BLOCK,),
        effort_none=True,
    ),
    # §2.6
    "kimi_k2": ReasoningFormat(
        "kimi_k2",
        THINK,
        END_THINK,
        thinking_default=True,
        implicit_end=(KIMI_SECTION,),
        off_is_plain=True,  # vLLM's config drops its think rules when thinking is off
    ),
    # §2.5: a trace must start with [THINK]; the prompt does not decide (old system
    # prompts carry pre-filled [THINK]…[/THINK]).
    "mistral": ReasoningFormat(
        "mistral",
        "[THINK]",
        "[/THINK]",
        thinking_default=False,
        from_prompt=False,
        from_kwargs=False,
        implicit_end=(MISTRAL_TOOL_CALLS,),
    ),
    # §3.3: GLM-4.5 … 5.x; thinking on unless `thinking` / `enable_thinking` is false,
    # and then the think tags are text.
    "glm45": ReasoningFormat(
        "glm45",
        THINK,
        END_THINK,
        thinking_default=True,
        implicit_end=(QWEN_TOOL_CALL,),
        off_is_plain=True,
    ),
}
MINIMAX_TOOL_CALL = "<minimax:tool_call>"
# §3.5: the template opens <think>; the prompt decides, chat_template_kwargs do not.
REASONING_FORMATS["minimax_m2"] = ReasoningFormat(
    "minimax_m2",
    THINK,
    END_THINK,
    thinking_default=True,
    from_kwargs=False,
    reenter=False,
    implicit_end=(MINIMAX_TOOL_CALL,),
)
REASONING_FORMATS["minimax_m2_append_think"] = ReasoningFormat(
    "minimax_m2_append_think", THINK, END_THINK, thinking_default=False, append=True
)
# §3.1: gpt-oss. vLLM parses Harmony whenever the model is gpt-oss; the names say which
# parts are kept (no reasoning parser: analysis is dropped; no tool parser: calls are).
# Nothing is stripped: a message's text is sent as written.
REASONING_FORMATS["openai_gptoss"] = ReasoningFormat(
    "openai_gptoss",
    "",
    "",
    thinking_default=False,
    from_prompt=False,
    from_kwargs=False,
    strip_trailing=False,
    frames=HARMONY,
)
REASONING_FORMATS["qwen3_xml"] = REASONING_FORMATS["qwen3"]
REASONING_FORMATS["glm47"] = REASONING_FORMATS["glm45"]
REASONING_FORMATS["step5"] = REASONING_FORMATS["deepseek_r1"]  # vLLM: the same class
_QWEN3 = REASONING_FORMATS["qwen3"]
REASONING_FORMATS["seed_oss"] = replace(
    _QWEN3,
    name="seed_oss",
    start="<seed:think>",
    end="</seed:think>",
    implicit_end=("<seed:tool_call>",),
)
# The template always opens <think> (no switch) and the model ends it with "\n</think>\n".
REASONING_FORMATS["step3p5"] = replace(
    _QWEN3, name="step3p5", from_kwargs=False, strip_trailing=True
)
REASONING_FORMATS["mimo"] = replace(_QWEN3, name="mimo")
# §3.7: Nemotron 3 (served with the qwen3_coder tools): thinking from `enable_thinking`,
# which switched off leaves the think rules on (a stray </think> is dropped); reasoning's
# trailing whitespace stripped; an answer that wrote only reasoning can ask for it as
# content.
REASONING_FORMATS["nemotron_v3"] = replace(
    _QWEN3, name="nemotron_v3", strip_trailing=True, off_is_plain=False, swap=SWAP_BLANK
)
# Granite 4.2: nemotron_v3 without the content's leading newlines.
REASONING_FORMATS["granite_thinking_parser"] = replace(
    REASONING_FORMATS["nemotron_v3"],
    name="granite_thinking_parser",
    lstrip_newlines=True,
    swap=SWAP_ABSENT,
)
# §3.2: Gemma 4. Reasoning is a channel, opened anywhere, its first line the channel
# name; the prompt says whether the output starts inside one (thinking is the prompt's
# business, not the parser's).
REASONING_FORMATS["gemma4"] = ReasoningFormat(
    "gemma4",
    "<|channel>",
    "<channel|>",
    thinking_default=False,
    from_kwargs=False,
    implicit_end=("<|tool_call>",),
    prefix="thought\n",
)
# §3.5: MiniMax M3. `thinking_mode: "enabled"` means the template opened the block;
# otherwise reasoning is whatever the model puts in one. Whitespace is kept.
REASONING_FORMATS["minimax_m3"] = ReasoningFormat(
    "minimax_m3",
    "<mm:think>",
    "</mm:think>",
    thinking_default=False,
    strip_trailing=False,
    kwargs_keys=("thinking_mode",),
    kwargs_on="enabled",
    text_match=True,
    empty_as_text=True,  # an empty block says `reasoning: ""`
)
# §3.4: Kimi K3's XTML. Every marker is `<|open|>` / `<|close|>` + a name (+ attributes)
# + `<|sep|>`; vLLM matches them all on text. Thinking is on unless switched off.
XTML_OPEN, XTML_CLOSE, XTML_SEP = "<|open|>", "<|close|>", "<|sep|>"
REASONING_FORMATS["kimi_k3"] = ReasoningFormat(
    "kimi_k3",
    XTML_OPEN + "think" + XTML_SEP,
    XTML_CLOSE + "think" + XTML_SEP,
    thinking_default=True,
    from_prompt=False,
    strip_trailing=False,
    kwargs_keys=("thinking", "enable_thinking"),
    effort_none=True,
    implicit_end=(
        XTML_OPEN + "response" + XTML_SEP,
        XTML_OPEN + " response " + XTML_SEP,
        XTML_OPEN + "tools" + XTML_SEP,
    ),
    text_match=True,
)
# §3.3: Ling 3 runs GLM's parser; poolside Laguna's reasoning is deepseek_v3's.
REASONING_FORMATS["ling3"] = REASONING_FORMATS["glm45"]
REASONING_FORMATS["poolside_v1"] = replace(REASONING_FORMATS["deepseek_v3"], name="poolside_v1")


def think_tags(name: str, start: str, end: str, thinking_default: bool) -> ReasoningFormat:
    """The generic think-tag parser with other markers (`<seed:think>`, tests): vLLM's
    older base class."""
    return ReasoningFormat(
        name,
        start,
        end,
        thinking_default=thinking_default,
        strip_trailing=False,
        empty_as_text=True,
    )


# -- DSML: deepseek_v4, deepseek_v32 (§2.12) ----------------------------------------------


def _dsml(name: str, wrapper: str, space: str = "", variants: tuple[str, ...] = ()) -> ToolFormat:
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
    return ToolFormat(name, t, ARGS_PARAMS, typed_flag=True, schema=True)


# -- qwen3_coder / qwen3_xml (§2.13) ------------------------------------------------------


def _qwen3_xml(
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
        ARGS_PARAMS,
        value_newlines=value_newlines,
        schema=True,
        keep_whitespace=keep_whitespace,
    )


# -- GLM-4.5 … 5.x (vllm-parsers-0.33.md §3.3) ---------------------------------------------


def _glm() -> ToolFormat:
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
        ARGS_PARAMS,
        schema=True,
        known_names=True,
        forced=FORCED_NATIVE,  # vLLM's GLM parser never takes the JSON path
        # vLLM matches only the call's wrapper by token id; the argument tags by text.
        text_markers=(key, key_end, value, value_end),
    )


# -- MiniMax M2 / M2.x (vllm-parsers-0.33.md §3.5) -----------------------------------------


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
    return ToolFormat("minimax_m2", t, ARGS_PARAMS, schema=True, known_names=True)


# -- hermes (§2.8) -------------------------------------------------------------------------


def _hermes(
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
        ARGS_CALLS,
        calls=CallShape(SHAPE_SINGLE),
        forced=forced,
    )


HERMES = _hermes("hermes")

# -- kimi_k2 (§2.14) -----------------------------------------------------------------------


def _kimi() -> ToolFormat:
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
    return ToolFormat("kimi_k2", t, ARGS_JSON, header=HEAD_KIMI, ids=ID_NATIVE, schema=True)


# -- mistral (§2.10) -------------------------------------------------------------------------

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
    ARGS_JSON,
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
    ARGS_CALLS,
    calls=CallShape(SHAPE_ARRAY),
    ids=ID_MISTRAL,
    fallback=True,
    forced=FORCED_NATIVE,
)

# -- llama3_json (§2.9) ----------------------------------------------------------------------

LLAMA3_JSON = ToolFormat(
    "llama3_json",
    {
        (CONTENT, "<|python_tag|>"): Transition(ARGS, CALL_START),
        # A call after some prose (vLLM finds calls anywhere in non-streaming mode).
        (CONTENT, '{"name"'): Transition(ARGS, CALL_START, keep=True),
    },
    ARGS_CALLS,
    sniff="{",
    calls=CallShape(SHAPE_SEQUENCE, ("parameters", "arguments"), need_args_key=True),
    fallback=True,
)

# -- pythonic (§2.15) ------------------------------------------------------------------------

PYTHONIC = ToolFormat(
    "pythonic",
    {
        (CONTENT, "<|python_start|>"): Transition(ARGS, CALL_START),
        (ARGS, "<|python_end|>"): Transition(BETWEEN, CALL_END),
    },
    ARGS_PYTHONIC,
    sniff="[",
    fallback=True,
    forced=FORCED_JSON,  # vLLM has no structural tag for it
)

# -- DeepSeek V3 / V3.1 (§2.11; not asked for, but two more tables cost nothing) ---------

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
        # Text after the block is dropped (reference D02).
        (PREAMBLE, _V3_CALLS_END): Transition(PREAMBLE),
    },
    ARGS_JSON,
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
    ARGS_JSON,
)

TOOL_FORMATS: dict[str, ToolFormat] = {
    "deepseek_v4": _dsml("deepseek_v4", "tool_calls", variants=DSML_V4_VARIANTS),
    "deepseek_v41": _dsml("deepseek_v41", "calls", space=" "),
    "deepseek_v32": _dsml("deepseek_v32", "function_calls"),
    "qwen3_coder": _qwen3_xml("qwen3_coder"),
    "qwen3_xml": _qwen3_xml("qwen3_xml"),
    "hermes": HERMES,
    "kimi_k2": _kimi(),
    "mistral": MISTRAL_V11,
    "llama3_json": LLAMA3_JSON,
    "llama4_json": LLAMA3_JSON,
    "pythonic": PYTHONIC,
    "llama4_pythonic": PYTHONIC,
    "deepseek_v31": DEEPSEEK_V31,
    "deepseek_v3": DEEPSEEK_V3,
    "glm45": _glm(),
    "minimax_m2": _minimax_m2(),
}
TOOL_FORMATS["glm47"] = TOOL_FORMATS["glm45"]
TOOL_FORMATS["ling3"] = TOOL_FORMATS["glm45"]
# §3.3: Laguna writes GLM-4's calls; any name is taken, untyped values are guessed.
TOOL_FORMATS["poolside_v1"] = replace(
    TOOL_FORMATS["glm45"],
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
TOOL_FORMATS["qwen3_json"] = HERMES  # vLLM: the same class
# vllm-parsers-0.33.md §3.7, the Qwen3-grammar relatives.
TOOL_FORMATS["seed_oss"] = _qwen3_xml("seed_oss", "<seed:tool_call>", "</seed:tool_call>")
TOOL_FORMATS["step3p5"] = TOOL_FORMATS["qwen3_coder"]
TOOL_FORMATS["step5"] = _qwen3_xml("step5", keep_whitespace=True)
TOOL_FORMATS["mimo"] = _qwen3_xml("mimo", value_newlines=False)
TOOL_FORMATS["longcat"] = _hermes("longcat", "<longcat_tool_call>", "</longcat_tool_call>")
# Granite 4.0: hermes' tags, the text around calls kept; no structural tag in vLLM.
TOOL_FORMATS["granite4"] = _hermes("granite4", text_after=True, forced=FORCED_JSON)

# §3.1: a call is a message addressed to `functions.NAME`; its body is the arguments as
# written. "required" and named choices are constrained to the same messages.
TOOL_FORMATS["openai"] = ToolFormat(
    "openai", HARMONY.table(), ARGS_VERBATIM, forced=FORCED_NATIVE, frames=HARMONY
)


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
        ARGS_GEMMA,
        header=HEAD_GEMMA,
        schema=True,
        # FunctionGemma's parser is regexes over the text: all its markers are text.
        text_markers=(call, end, quote, turn_end) if guess else (quote,),
        forced=forced,
        guess_types=guess,
    )


# §3.2: Gemma 4's calls; `<|"|>` strings, bare values typed by the schema.
TOOL_FORMATS["gemma4"] = _gemma(
    "gemma4", "<|tool_call>", "<tool_call|>", '<|"|>', "<turn|>", FORCED_NATIVE
)
# FunctionGemma 270M: the same call syntax with `<escape>` strings; only those values
# count, each JSON when it parses (no schema), and tool_choice required / named are the
# constrained JSON of other models.
TOOL_FORMATS["functiongemma"] = _gemma(
    "functiongemma",
    "<start_function_call>",
    "<end_function_call>",
    "<escape>",
    "<end_of_turn>",
    FORCED_JSON,
    guess=True,
)


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
        "minimax_m3", t, ARGS_ELEMENTS, schema=True, forced=FORCED_NATIVE, type_unions=True
    )


TOOL_FORMATS["minimax_m3"] = _minimax_m3()


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
        ARGS_PARAMS,
        header=HEAD_ATTRS,
        typed_flag=True,
        attrs=True,
        forced=FORCED_NATIVE,
        text_markers=(o, c, sep),
    )


TOOL_FORMATS["kimi_k3"] = _kimi_k3()

# tool_choice "required": the constrained output is `[{"name", "parameters"}, …]` (§3.3).
REQUIRED_CALLS = CallShape(SHAPE_ARRAY, ("parameters",))


def tool_format(name: str, added_tokens: set[str]) -> ToolFormat:
    """The format for a registry name; mistral's layout depends on the tokenizer (v11+
    tokenizers have an `[ARGS]` token)."""
    fmt = TOOL_FORMATS[name]
    if fmt is MISTRAL_V11 and "[ARGS]" not in added_tokens:
        return MISTRAL_PRE_V11
    return fmt
