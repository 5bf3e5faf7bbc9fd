"""The long-tail families of test_vllm_answers.py (docs/reference/parsers.md): their
tokenizers and EOS ids, and where we answer otherwise than vLLM 0.33.0's whole response, and
why (the rules of test_vllm_answers.DEVIATIONS).

Recorded 2026-12-02 by `tests/peer/probes/probe_longtail.py` (its docstring says how) from the
folders of `tests/peer/recorded/recorded_longtail.py`; every family is a tool parser only:

- phi4_mini_json: `phi4_mini_tokenizer()`; Phi-4-mini turns; EOS `<|end|>`.
- internlm: `internlm_tokenizer()`; ChatML with a `<|plugin|>` system turn; EOS `<|im_end|>`.
- jamba: `jamba_tokenizer()`; Jamba 1.5 turns; EOS `<|eom|>`.
- gigachat3: `gigachat3_tokenizer()`; GigaChat3 messages; EOS `</s>`.
- apertus: `apertus_tokenizer()`; Apertus turns; EOS `<|assistant_end|>`.
- lfm2: `lfm2_tokenizer()`; ChatML with LFM2's tool list; EOS `<|im_end|>`.
- xlam: `xlam_tokenizer()` (Qwen3's own); ChatML with the tools in the system turn; EOS
  `<|im_end|>`.
- plamo3 (reasoning and tools): `plamo3_tokenizer()`; PLaMo 3 turns, the prompt ending
  `<|plamo:begin_think:plamo|>` unless `enable_thinking` is false; EOS `<|plamo:tag|>`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tokenizers import Tokenizer

from tests.support.vocab import synthetic_longtail as lt

# family → (reasoning parser, tool parser, tokenizer, EOS id)
LONGTAIL_FAMILIES: dict[str, tuple[str | None, str, Callable[[], Tokenizer], int]] = {
    "phi4_mini_json": (None, "phi4_mini_json", lt.phi4_mini_tokenizer, 151672),
    "internlm": (None, "internlm", lt.internlm_tokenizer, 151645),
    "jamba": (None, "jamba", lt.jamba_tokenizer, 151670),
    "gigachat3": (None, "gigachat3", lt.gigachat3_tokenizer, 128247),
    "apertus": (None, "apertus", lt.apertus_tokenizer, 151676),
    "lfm2": (None, "lfm2", lt.lfm2_tokenizer, 151645),
    "plamo3": ("plamo3", "plamo3", lt.plamo3_tokenizer, 151681),
    "dots": (None, "dots", lt.dots_tokenizer, 151674),
    "xlam": (None, "xlam", lt.xlam_tokenizer, 151645),
}

STREAM = "stream"  # test_vllm_answers.STREAM: we give vLLM's streamed answer

TEXT_BEFORE = (
    "differences.md text-before-call: vLLM's whole response drops the text before the call "
    "block; we keep it as content (the stream has sent it before the block began)"
)
CUT = (
    "a call cut short: vLLM returns the raw markup as content and no call; we send the "
    "call as far as it was written, its arguments closed (differences.md llama-cut-call)"
)
CUT_NAME = (
    "differences.md cut-name: a call cut inside its name: vLLM returns the raw markup as content; "
    "we make no call, and markup never becomes content"
)
INVALID = (
    "differences.md invalid-arguments: the call's header was out before its arguments stopped "
    "being JSON; we close them there (`{}`); vLLM's whole response makes no call"
)
MARKUP = (
    "differences.md tool-markup-in-content: with tool_choice none or no tools vLLM keeps the call "
    "block as content; we drop it"
)
SPECIALS = (
    "differences.md special-skip-set: vLLM's derender keeps special tokens once a tool parser is "
    "set; we drop them"
)
LAX = (
    "differences.md lax-unconstrained-output: no structural tag, so under a forced tool_choice "
    "vLLM reads only the constrained JSON (required: the native block dropped, content "
    '""; named: the raw native text as the arguments); we parse the model\'s own block'
)
BRACKET = (
    "differences.md phi4-bracket: vLLM's regex ends the call list at its first `]`, so a list "
    "whose arguments hold an array is no JSON and every call is lost (content null, no call); "
    "we read the list as JSON"
)
GIGA_MARKUP = (
    "differences.md gigachat-call-markup: a call message that opens the output (no answer text and "
    "`<|message_sep|>` before it): vLLM's whole response makes the call and also returns "
    "its markup as content; we make the call only"
)
GIGA_AFTER = (
    "differences.md gigachat-text-after-call: anything after the call's JSON object (text, a "
    "`<|message_sep|>`) makes vLLM's JSON reading fail (no call, the raw markup as "
    "content); we make the call and drop what follows it in the call message"
)
STRIPPED = (
    "differences.md content-strip-with-tools: vLLM's whole response strips the text before and "
    "after the call block and joins the two with a newline; we keep the text as written"
)
APERTUS_WS = STRIPPED
XLAM_PARAMS = (
    "differences.md xlam-parameters: a call object with `parameters` instead of `arguments`: vLLM "
    "skips it (no call, the raw array as content); we read both keys, as vLLM's InternLM2 "
    "and Phi-4-mini parsers do"
)
XLAM_EMPTY = (
    "differences.md content-strip-with-tools: a call block with no text around it: vLLM's whole "
    'response says content `""` (the text around the block, stripped); its stream and we '
    "say null"
)
GET = ("get_weather", {"city": "Tokyo", "days": 3})
NEST = {"s": "x", "i": 1, "n": 2.5, "b": True, "o": {"k": [1, {"z": None}]}, "a": ["p", "q"]}

LONGTAIL_DEVIATIONS: dict[str, dict[str, tuple[str | dict[str, Any], str]]] = {
    "phi4_mini_json": {
        "text before call": ({"content": "Let me check. "}, TEXT_BEFORE),
        "content ws around call": ({"content": "  Checking.  "}, TEXT_BEFORE),
        "nested values": ({"tool_calls": [("set_params", NEST)]}, BRACKET),
        "bracket inside arguments": ({"tool_calls": [("set_params", {"a": [1, 2]})]}, BRACKET),
        "invalid json": ({"tool_calls": [("get_weather", "{}")]}, INVALID),
        "truncated mid-value": (
            {"content": None, "tool_calls": [("get_weather", {"city": "Tok"})]},
            CUT,
        ),
        "truncated after first of two": ({"content": None, "tool_calls": [GET]}, CUT),
        "truncated mid-name": ({"content": None}, CUT_NAME),
        "tool_choice none": ({"content": "Sure. "}, MARKUP),
        "no tools + call": ({"content": "Sure. "}, MARKUP),
        "tool_choice required, native": ({"tool_calls": [GET]}, LAX),
        "tool_choice named, native": ({"tool_calls": [GET]}, LAX),
        "other special tokens": ({"content": "ABC"}, SPECIALS),
    },
    "internlm": {
        "tool_choice none": ({"content": "Sure. "}, MARKUP),
        "no tools + call": ({"content": "Sure. "}, MARKUP),
        "tool_choice required, native": ({"tool_calls": [GET]}, LAX),
        "tool_choice named, native": ({"tool_calls": [GET]}, LAX),
    },
    "jamba": {
        "other key": (
            {"content": None, "tool_calls": [GET]},
            "differences.md jamba-parameters: vLLM reads only `arguments`, and a `parameters` "
            "object fails the whole call list (the raw markup as content); we read both keys, as "
            "its InternLM2 and Phi-4-mini parsers do",
        ),
        "invalid json": ({"content": None, "tool_calls": [("get_weather", "{}")]}, INVALID),
        "truncated mid-value": (
            {"content": None, "tool_calls": [("get_weather", {"city": "Tok"})]},
            CUT,
        ),
        "truncated after first of two": ({"content": None, "tool_calls": [GET]}, CUT),
        "no closing tag": ({"content": None, "tool_calls": [GET]}, CUT),
        "truncated mid-name": ({"content": None}, CUT_NAME),
        "single object, no array": (
            {"content": None},
            "a block that is no JSON array is no call list: vLLM returns its raw markup as "
            "content; we drop it, as markup never becomes content",
        ),
        "tool_choice none": ({"content": "Sure. "}, MARKUP),
        "no tools + call": ({"content": "Sure. "}, MARKUP),
        "tool_choice required, native": ({"tool_calls": [GET]}, LAX),
        "tool_choice named, native": ({"tool_calls": [GET]}, LAX),
        "other special tokens": ({"content": "ABC"}, SPECIALS),
    },
    "gigachat3": {
        **{
            label: ({"content": None}, GIGA_MARKUP)
            for label in (
                "call message",
                "empty arguments",
                "unicode and escapes",
                "nested values",
                "unknown tool",
            )
        },
        "arguments as a string": (
            {"content": None, "tool_calls": [GET]},
            "arguments written as a JSON string holding an object: vLLM makes no call (its "
            "raw markup as content); we pass the object on, as the other JSON call lists do",
        ),
        "no arguments key": (
            {"content": None, "tool_calls": [("get_current_date", {})]},
            "a call object without `arguments`: vLLM makes no call (its raw markup as "
            "content); we make the call with `{}`, as the other JSON call lists do",
        ),
        "invalid json": ({"content": None, "tool_calls": [("get_weather", "{}")]}, INVALID),
        "text after call": ({"content": None, "tool_calls": [GET]}, GIGA_AFTER),
        "call, then message_sep": ({"content": None, "tool_calls": [GET]}, GIGA_AFTER),
        "truncated mid-value": (
            {"content": None, "tool_calls": [("get_weather", {"city": "Tok"})]},
            CUT,
        ),
        "truncated mid-name": ({"content": None}, CUT_NAME),
        "tool_choice none": ({"content": "Sure."}, MARKUP),
        "no tools + call": ({"content": "Sure."}, MARKUP),
        "tool_choice required, native": ({"tool_calls": [GET]}, LAX),
        "tool_choice named, native": ({"tool_calls": [GET]}, LAX),
    },
    "apertus": {
        "text before call": ({"content": "Let me check. "}, APERTUS_WS),
        "text after call": ({"content": " Done."}, APERTUS_WS),
        "text around call": ({"content": "Before.\n\nAfter."}, APERTUS_WS),
        "content ws around call": ({"content": "  Checking.    "}, APERTUS_WS),
        "text after array inside block": (
            {"content": None},
            "text inside the block after its array: vLLM gives it as content; we drop it "
            "with the rest of the block's markup",
        ),
        "invalid json": ({"content": None, "tool_calls": [("get_weather", "{}")]}, INVALID),
        "tool_choice none": ({"content": "Sure. "}, MARKUP),
        "no tools + call": ({"content": "Sure. "}, MARKUP),
        "tool_choice required, native": ({"tool_calls": [GET]}, LAX),
        "tool_choice named, native": ({"tool_calls": [GET]}, LAX),
        "other special tokens": ({"content": "ABC"}, SPECIALS),
    },
    "lfm2": {
        "text before call": ({"content": "Let me check. "}, STRIPPED),
        "text around call": ({"content": "Before.\n\nAfter."}, STRIPPED),
        "content ws around call": ({"content": "  Checking.    "}, STRIPPED),
        "positional argument": (
            {"tool_calls": []},
            "a positional argument (`get_weather('Tokyo')`): vLLM makes the call without "
            "it (`{}`); we read keyword arguments only, so the list is no call list",
        ),
        "not a list": (
            {"content": None},
            "a block that is no Python list: vLLM returns its raw markup as content; we drop "
            "it, as markup never becomes content",
        ),
        "invalid python": (
            {"content": None, "tool_calls": [("get_weather", {"city": "Tokyo"})]},
            CUT,
        ),
        "echo after end": (
            {"content": " get_weather(city='Tokyo')]Done."},
            "differences.md lfm2-echo: text after the block up to an orphan `<|tool_call_end|>` "
            "(the model echoing its call): vLLM drops it; we keep it as content (only the marker "
            "is dropped): it is text the model wrote after the call",
        ),
        "truncated mid-value": (
            {"content": None, "tool_calls": [("get_weather", {"city": "Tok"})]},
            CUT,
        ),
        "truncated after first of two": ({"content": None, "tool_calls": [GET]}, CUT),
        "truncated mid-name": ({"content": None}, CUT_NAME),
        "tool_choice none": ({"content": "Sure. "}, MARKUP),
        "no tools + call": ({"content": "Sure. "}, MARKUP),
        "tool_choice required, native": ({"tool_calls": [GET]}, LAX),
        "tool_choice named, native": ({"tool_calls": [GET]}, LAX),
        "other special tokens": ({"content": "ABC"}, SPECIALS),
    },
    "plamo3": {
        "text after call block": (
            {"content": "Done."},
            "differences.md text-after-call: vLLM's whole response drops the text after the call "
            "block, its stream sends it; we send it both ways",
        ),
        "truncated mid-name": (
            {"tool_calls": []},
            "differences.md cut-name: a call cut inside its name: vLLM returns it with the name as "
            "far as written (`get_wea`); we make no call",
        ),
        "markers as plain tokens": (
            STREAM,
            "differences.md plain-token-markers: `<|plamo:end_think:plamo|>` spelled in ordinary "
            "tokens: vLLM's whole response matches it on text, its stream (by id) does not; "
            "we follow the stream",
        ),
        "call markers as plain tokens": (
            {"tool_calls": [("get_weather", "{}")]},
            "differences.md plain-token-markers: `<|plamo:msg|>` (one special token) spelled in "
            "ordinary tokens does not open the arguments here (vLLM reads it on text); the "
            "call is made with `{}`",
        ),
    },
    "dots": {
        "text before call": ({"content": "Let me check. "}, STRIPPED),
        "text after call": (
            {"content": " Done."},
            "differences.md text-after-call: vLLM's whole response drops the text after the call "
            "block; we keep it",
        ),
        "content ws around call": ({"content": "  Checking.    "}, STRIPPED),
        "null value": (
            {"tool_calls": [("set_params", {"s": "null", "i": None})]},
            "differences.md dots-null: the text `null` as a string parameter's value: vLLM makes "
            "it JSON null whatever the schema says; we keep the string (typed values only)",
        ),
        "unknown tool": (
            {"content": None},
            "a block whose only call names no offered function: vLLM returns the whole "
            "block's markup as content; we drop the call and its markup (differences.md "
            "unknown-tool-index, tool-markup-in-content)",
        ),
        "json fallback": (
            {"tool_calls": []},
            "differences.md dots-json-block: a JSON object instead of invoke elements inside the "
            "block: vLLM reads it as a call; we do not (the block is dropped)",
        ),
        "no closing tag": ({"content": None, "tool_calls": [GET]}, CUT),
        "truncated mid-value": (
            {"content": None, "tool_calls": [("get_weather", {"city": "Tok"})]},
            CUT,
        ),
        "truncated mid-name": ({"content": None}, CUT_NAME),
        "tool_choice none": ({"content": "Sure. "}, MARKUP),
        "no tools + call": ({"content": "Sure. "}, MARKUP),
        "other special tokens": ({"content": "ABC"}, SPECIALS),
    },
    "xlam": {
        "text after call": (
            STREAM,
            "differences.md xlam-text-after-call: text after the call array makes vLLM's whole "
            "response fail its JSON reading (no call, the raw array as content); its stream "
            "makes the call, and so do we (the text after the array is dropped)",
        ),
        "other key": ({"content": None, "tool_calls": [GET]}, XLAM_PARAMS),
        "invalid json": ({"content": None, "tool_calls": [("get_weather", "{}")]}, INVALID),
        "truncated mid-value": (
            {"content": None, "tool_calls": [("get_weather", {"city": "Tok"})]},
            CUT,
        ),
        "truncated after first of two": ({"content": None, "tool_calls": [GET]}, CUT),
        "tool_choice required, native": (
            {"tool_calls": [("get_weather", {})]},
            "differences.md lax-unconstrained-output: the model's own array under `required`: vLLM "
            "reads the constrained JSON's `parameters` key only and makes the call with "
            "arguments `null`; ours are `{}` (they parse as an object)",
        ),
        "tool_choice named, native": (
            {
                "content": '[{"name": "get_weather", "arguments": {"city": "Tokyo", "days": 3}}]',
                "tool_calls": [],
            },
            "differences.md lax-unconstrained-output: the model's own array under a named "
            "tool_choice: vLLM passes it verbatim as the call's arguments; we keep it as "
            "content (no array poses as an arguments object)",
        ),
        "tool_call tags": (STREAM, XLAM_EMPTY),
        "json fence": ({"content": None}, XLAM_EMPTY),
        "TOOL_CALLS prefix": (STREAM, XLAM_EMPTY),
        "text before tool_call tags": ({"content": "Sure. "}, STRIPPED),
        "text before json fence": ({"content": "Here: "}, STRIPPED),
        "tool_call tags, one object": (
            {"content": '{"name": "get_weather", "arguments": {"city": "Tokyo", "days": 3}}'},
            "differences.md xlam-single-object: one object, not an array, in `<tool_call>`: vLLM "
            "makes no call and returns the tags too as content; we return the object without the "
            "tags (markup never reaches content)",
        ),
        "think then call": (
            {"content": "<think>r"},
            "differences.md xlam-think: a call array right after `</think>`: vLLM keeps `</think>` "
            "in the content before the call; we drop it with the call's markup",
        ),
    },
}
