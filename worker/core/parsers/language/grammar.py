"""The language formats are written in: engine states, transition actions, and the two
configurations a model's registry entry picks by name (docs/reference/parsers.md) — a
`ReasoningFormat` (two think markers, how the start state is chosen) and a `ToolFormat`
(a `(state, marker) -> Transition` table, and which argument scanner reads the text
between the markers). The formats themselves are in reasoning_formats.py,
json_formats.py and markup_formats.py; formats.py names them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from worker.core.parsers.language.state import Call

if TYPE_CHECKING:
    from worker.core.parsers.arguments.tools import ToolTable

# A held tool block's reader (ToolFormat.held): the block's body and the request's tools
# give its calls as (name, arguments JSON), or None when the block is no call.
HeldReader = Callable[[str, "ToolTable"], "list[tuple[str, str]] | None"]

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
HEAD_DONE = 256  # the header is complete: it picks the body's state (prose.body)
# The message header read so far is content (Inkling: a header that no block kind follows).
HEAD_FLUSH = 512
# melody's trimming (ReasoningFormat.trim_segments, Cohere): the marker ends a text
# segment, whose held trailing whitespace is dropped; TRIM_LEFT: the text after it starts
# at its first non-whitespace (up to the first text sent, content or reasoning).
SEGMENT = 1024
TRIM_LEFT = 2048
# The whitespace held before the marker is text after all, and a left trim ends: the
# marker is markup inside a segment (melody trims the raw text, citation markup included).
HELD_WS = 4096
# The whitespace-only content held before the marker is dropped (ERNIE 4.5: the
# `<response>` wrapper's content is what it holds, not the newlines before it).
DROP_WS = 8192

# -- JSON call lists (CallList) ----------------------------------------------------------
SHAPE_SINGLE = 0  # one object (hermes: one per <tool_call>)
SHAPE_SEQUENCE = 1  # objects separated by ";" or whitespace (llama3_json)
SHAPE_ARRAY = 2  # a JSON array of objects (mistral pre-v11, tool_choice "required")

# -- call headers and ids ---------------------------------------------------------------
HEAD_PLAIN = 0  # the header text is the name
HEAD_KIMI = 1  # `functions.NAME:IDX` (the id), or a bare counter with the name inferred
HEAD_MISTRAL = 2  # the name, with a visible `[ARGS]` removed
HEAD_GEMMA = 3  # `call:NAME` (or `:NAME`): the name after the colon
HEAD_ATTRS = 4  # XML attributes, `tool="NAME" index="1"`: the name is `tool` (Kimi K3)
HEAD_DOUBLED = 5  # the name, `x.x` read as `x` when the request offers `x` (Muse)
ID_HASH = 0  # "chatcmpl-tool-" + 32 hex digits of a hash (docs/integrate/contract.md, "Guarantees")
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
    """How a JSON call list is laid out (call_list.py)."""

    shape: int
    arg_keys: tuple[str, ...] = ("arguments",)
    # The key of the call's name (Cohere's `tool_name`).
    name_key: str = "name"
    # The header waits for the arguments key (llama3: `{"name": "x"}` alone is no call).
    need_args_key: bool = False
    # Each object's first key is the function's name and its value the arguments
    # (Apertus: `[{"get_weather": {"city": "Bern"}}]`).
    keyed: bool = False


# tool_choice "required": the constrained output is `[{"name", "parameters"}, …]` (vLLM's
# `get_json_schema_from_tools`, vllm/tool_parsers/utils.py).
REQUIRED_CALLS = CallShape(SHAPE_ARRAY, ("parameters",))


# -- an answer left without content (ReasoningFormat.swap; vLLM's nemotron_v3) ----------
SWAP_NONE = 0
SWAP_BLANK = 1  # content null or whitespace-only: reasoning and content change places
SWAP_ABSENT = 2  # only when the answer wrote no content at all (Granite 4.2)


@dataclass(frozen=True)
class Frames:
    """Output made of messages (gpt-oss Harmony, vLLM's vllm/parser/harmony.py): a header
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
    # The start state when neither the prompt nor kwargs decide, where it is neither
    # reasoning nor content (-1: `thinking_default` says which); Inkling starts in a
    # message header.
    initial: int = -1
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
    # Other spellings of the two markers, as (start, end) pairs read as `start` / `end`
    # are (Granite 3.2 writes "Here's" for "Here is").
    spellings: tuple[tuple[str, str], ...] = ()
    # With `once`: the start marker opens the one reasoning block from content (Granite
    # 3.2's phrases are no tokens and may follow other text); after the block ended the
    # markers are text (engine.transition).
    opens_once: bool = False
    # `reasoning_effort` (chat_template_kwargs', else the request's) switches thinking:
    # this value turns it off, any other on; unset, `thinking_default` decides (HY3 / HY4's
    # "no_think").
    effort_off: str = ""
    # More transitions (markers that switch between text modes from every state, as
    # Cohere's melody filter's special tokens do), applied last.
    more: tuple[tuple[tuple[int, str], Transition], ...] = ()
    # melody's trimming (Cohere): every text segment, content or reasoning, loses its
    # trailing whitespace (held in `rws` until text follows; a SEGMENT marker or the end
    # drops it) and, after a TRIM_LEFT marker, its leading whitespace.
    trim_segments: bool = False
    # Thinking switched off (kwargs) starts in content with the think rules on and the
    # reasoning they find dropped (MiniCPM-V: a stray `<think>…</think>` is not shown).
    off_hides: bool = False
    # Content and reasoning written with literal `\\n` escapes are given real newlines
    # (MiniCPM-V's tokenizer decodes a newline so; escapes.py).
    escaped_newlines: bool = False
    # The whole table as given, when it is no think-tag table (response templates:
    # response_template.py builds it from the checkpoint's metadata).
    rules: tuple[tuple[tuple[int, str], Transition], ...] | None = None
    # What these rules find is content, not reasoning (a response template's thinking
    # region when only its tool parser is selected: vLLM routes that text to content).
    as_content: bool = False
    # Markers that drop the whitespace right before them (a template delimiter written
    # `\\s*<marker>`): content's trailing whitespace is held until it is known whether
    # one of them follows (prose.py, `ParserState.cws`).
    swallow_ws: tuple[str, ...] = ()

    def table(self) -> Table:
        if self.frames is not None:
            return self.frames.table()
        if self.rules is not None:
            return dict(self.rules)
        t: Table = {}
        for start, end in ((self.start, self.end), *self.spellings):
            t[(REASONING, start)] = Transition(REASONING)  # duplicate start: absorbed
            t[(REASONING, end)] = Transition(CONTENT)
            if self.opens_once:
                t[(CONTENT, start)] = Transition(REASONING)
        if self.once:
            return {**t, **dict(self.more)}
        t[(CONTENT, self.end)] = Transition(CONTENT)  # stray end: absorbed
        if self.reenter:
            t[(CONTENT, self.start)] = Transition(REASONING)
        for marker in self.implicit_end:
            t[(REASONING, marker)] = Transition(CONTENT, keep=True)
        t.update(self.more)
        return t


@dataclass(frozen=True)
class ToolFormat:
    name: str
    transitions: Table
    # The scanner that reads ARGS text: the kind of call a CALL_START opens.
    args: type[Call]
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
    # Sniffed blocks that turn out not to be calls are given back as content (the call
    # list kinds, CallList and CallPythonic).
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
    # A pythonic block's marker opens the list itself: calls follow one per line, with no
    # `[` (OLMo 3's `<function_calls>f(a=1)\ng()</function_calls>`).
    bare_list: bool = False
    # Parameter values lose their surrounding whitespace (vLLM's Step-3 parser strips
    # every value; params.py).
    strip_values: bool = False
    # Another format a request picks by one chat_template_kwargs value (K2 Horizon's
    # `tool_call_format: "json"`): (key, value, format). compile_parser compiles it as
    # the spec's `variant`; open_parser sets ALT_TOOLS when the request asks for it.
    variant: tuple[str, str, ToolFormat] | None = None
    # A block read whole when it ends (CallHeld, held.py): this reader gives its calls.
    held: HeldReader | None = None
    # A held block that is no call is content, markers included (MiniCPM5); so is every
    # block when the request parses no tools (response templates).
    give_back: bool = False
    suppressed_as_text: bool = False
    # The request tools' `required` parameter lists are read (ToolSchema.required).
    required_params: bool = False
    # As ReasoningFormat.swallow_ws (a call's opener swallows only when calls are parsed).
    swallow_ws: tuple[str, ...] = ()

    def opens(self) -> set[str]:
        """Markers that open a tool block from content (what may end reasoning)."""
        return {m for (s, m) in self.transitions if s == CONTENT}
