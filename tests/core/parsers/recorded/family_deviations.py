"""Where our answers differ from vLLM 0.33.0's whole answers for Granite 3.x, OLMo 3,
Step-3, Hunyuan and ERNIE 4.5 (`test_vllm_answers.DEVIATIONS`, same shape: label → (what
we give instead, why); "stream" = vLLM's streamed answer)."""

from __future__ import annotations

from typing import Any

STREAM = "stream"

UNANSWERED = (
    "differences.md granite-unanswered-thought: a thought process with no 'Here is my response:' "
    "after it: vLLM's whole response gives the output verbatim as content, its stream sends "
    "the reasoning; we stream it as reasoning too (the whole answer would need the whole "
    "reasoning held until the output ends)"
)
BEFORE_THOUGHT = (
    "differences.md granite-text-before-thought: vLLM's whole response drops the text before 'Here "
    "is my thought process:', its stream makes all of it content; we keep that text as "
    "content and split the rest"
)
STRIP = (
    "differences.md content-strip-with-tools: vLLM's whole response strips the content around "
    "calls, its stream keeps it"
)
MARKUP = (
    "differences.md tool-markup-in-content: with tools off vLLM keeps the call block as content; "
    "we drop it, as vLLM's engine parsers do"
)
CUT = (
    "differences.md unclosed-value: a call cut short: vLLM's whole response sends the arguments as "
    "far as written (not JSON); we close them where the output stopped"
)
NO_LIST = (
    "differences.md python-tag-in-content: a marker followed by no call list: vLLM's content keeps "
    "the raw text with `<|tool_call|>`; ours is the same text without it"
)

UNCLOSED_THINK = (
    "differences.md olmo3-unclosed-think: an output with no `</think>`: vLLM's whole response "
    "gives it verbatim as content, its stream as reasoning (the template may have opened "
    "`<think>`); we stream it as reasoning too (the whole answer would need all of it held "
    "until the output ends)"
)
AROUND_BLOCK = (
    "differences.md text-after-call: vLLM's whole response drops the text around a "
    "`<function_calls>` block; we keep it as content"
)
CUT_BLOCK = (
    "differences.md unclosed-value: a call block cut short (no `</function_calls>`): vLLM returns "
    "the raw markup as content; we make the calls as far as written, arguments closed"
)

STEP3_CUT = (
    "differences.md unclosed-value: a call block with no `<｜tool_calls_end｜>` (cut, or ended "
    "without it): vLLM returns the raw markup as content; we make the calls as far as "
    "written, values closed"
)

HY_NO_CALL = (
    "a `<tool_calls>` block that holds no call list (not JSON, not a list, an object "
    "without `arguments`): vLLM returns the raw markup as content; we drop the block (its "
    "text is call markup)"
)

SPECIALS = (
    "differences.md special-skip-set: vLLM's derender keeps special tokens (HY's think and "
    "tool-call tokens) as text once a parser is set; we drop them"
)

HY_CUT = (
    "differences.md unclosed-value: a call block with no `</tool_calls>` (cut, or ended without "
    "it): vLLM's HY4 returns the raw markup as content; we make the calls as far as "
    "written, values closed"
)

FAMILY_DEVIATIONS: dict[str, dict[str, tuple[str | dict[str, Any], str]]] = {
    "granite": {
        "reasoning only": (STREAM, UNANSWERED),
        "truncated in reasoning": (STREAM, UNANSWERED),
        "cut inside response phrase": (
            {"reasoning": " a Here is my res", "content": None},
            UNANSWERED + " (the cut phrase is reasoning text: the output ended before it "
            "became a marker)",
        ),
        "text before thought": ({"content": "Ok.  b"}, BEFORE_THOUGHT),
        "leading space": ({"content": "  b"}, BEFORE_THOUGHT),
        "text before call": ({"content": "Let me check. "}, STRIP),
        "tool_choice none": ({"content": "Sure. "}, MARKUP),
        "no tools + call": ({"content": "Sure. "}, MARKUP),
        "truncated mid-value": ({"tool_calls": [("get_weather", {"city": "Par"})]}, CUT),
        "invalid json": ({"content": "[{invalid json}]"}, NO_LIST),
        "object not list": (
            {"content": '{"name": "get_weather", "arguments": {"city": "Paris"}}'},
            NO_LIST,
        ),
    },
    "olmo3": {
        "no tags": (STREAM, UNCLOSED_THINK),
        "reasoning without end": (STREAM, UNCLOSED_THINK),
        "truncated in reasoning": (STREAM, UNCLOSED_THINK),
        "cut in end tag": (
            {"reasoning": "R</thi", "content": None},
            UNCLOSED_THINK + " (the cut tag is reasoning text: the output ended before it "
            "became a marker)",
        ),
        "text before think": (
            {"reasoning": "AR"},
            "a `<think>` inside the reasoning is dropped (the output started in it): vLLM's "
            "whole response keeps it in the reasoning text",
        ),
        "text before block": ({"content": "Checking.\n"}, AROUND_BLOCK),
        "text after block": ({"content": " Done."}, AROUND_BLOCK),
        "bare call line": (
            {"content": "get_weather(city='Paris')", "tool_calls": []},
            "differences.md olmo3-bare-call: vLLM's whole response runs an output with no "
            "`<function_calls>` block as call lines when it parses as such; we need the block "
            "(vLLM's stream does too): prose that looks like a call is not run",
        ),
        "tool_choice none": ({"content": "Sure. "}, MARKUP),
        "no tools + call": ({"content": None}, MARKUP),
        "truncated mid-value": (
            {"content": None, "tool_calls": [("get_weather", {"city": "Par"})]},
            CUT_BLOCK,
        ),
        "block without closer": (
            {"content": None, "tool_calls": [("get_weather", {"city": "Paris"})]},
            CUT_BLOCK,
        ),
        "not a call": (
            {"content": None},
            "a `<function_calls>` block that holds no call: vLLM returns the output as "
            "content; we drop the block (its text is call markup, as for a call dropped)",
        ),
        "call inside reasoning": (
            {
                "reasoning": "R",
                "content": "</think>C",
                "tool_calls": [("get_weather", {"city": "Paris"})],
            },
            "differences.md olmo3-block-in-reasoning: a `<function_calls>` block before any "
            "`</think>` ends the reasoning and is a call (an OLMo 3 call without thinking; "
            "vLLM's whole response makes it one only when no `</think>` follows, which a "
            "stream cannot know); vLLM keeps this one in the reasoning",
        ),
    },
    "step3": {
        "text before block": ({"content": "Checking. "}, STRIP),
        "text after block": ({"content": " Done."}, STRIP),
        "block without end": (
            {"content": None, "tool_calls": [("get_weather", {"city": "Paris"})]},
            STEP3_CUT,
        ),
        "cut in value": (
            {"content": None, "tool_calls": [("get_weather", {"city": "Par"})]},
            STEP3_CUT,
        ),
        "not a function": (
            {"content": None, "tool_calls": [("get_weather", {"city": "P"})]},
            "differences.md step3-call-type: a call whose type (before `<｜tool_sep｜>`) is not "
            "`function`: vLLM returns the whole output as content; we make the call (Step-3 "
            "has no other type a client could run)",
        ),
        "tool_choice none": ({"content": "Sure. "}, MARKUP),
        "no tools + call": ({"content": None}, MARKUP),
        "call in reasoning": (
            {
                "reasoning": 'Rfunction<steptml:invoke name="get_weather"><steptml:parameter '
                'name="city">Paris</steptml:parameter></steptml:invoke>'
            },
            "differences.md special-skip-set: vLLM keeps the block's special tokens in the "
            "reasoning text; we drop special tokens",
        ),
    },
    "ernie45": {
        "response without end": (
            {"content": "\ndef"},
            "differences.md ernie-response-wrapper: a `<response>` with no `</response>` after it: "
            "vLLM keeps the tag as text; we drop it, as every `<response>` (the stream "
            "cannot wait for the end to decide)",
        ),
        "text around response": (
            {"content": "AB"},
            "differences.md ernie-response-wrapper: text before `<response>`: vLLM's whole "
            "response keeps only what the wrapper holds; we keep that text too (and drop what "
            "follows `</response>`, as vLLM)",
        ),
        "text before call": ({"content": "Checking.\n\n"}, STRIP),
        "invalid json": (
            {"content": None},
            "a `<tool_call>` that holds no call object: vLLM returns the whole output as "
            "content; we drop the block (its text is call markup)",
        ),
        "call without end": (
            {"tool_calls": [("get_weather", {"city": "Paris"})]},
            "differences.md unclosed-value: a call with no `</tool_call>` (cut, or ended without "
            "it): vLLM makes no call and drops the text; we make the call as far as written",
        ),
        "cut in value": (
            {"tool_calls": [("get_weather", {"city": "Pa"})]},
            "differences.md unclosed-value: vLLM makes no call and drops the text; we make the "
            "call, its arguments closed where the output stopped",
        ),
        "tool_choice none": ({"content": "Sure. "}, MARKUP),
        "no tools + call": ({"content": None}, MARKUP),
    },
    "hunyuan_a13b": {
        "think without answer": (
            {"reasoning": "R still", "content": None},
            "differences.md hunyuan-unanswered-think: a `<think>` block with no answer after it: "
            "vLLM's whole response gives the output verbatim as content; we send the "
            "reasoning (the whole answer would need the whole reasoning held until the "
            "output ends)",
        ),
        "invalid json": ({"content": None}, HY_NO_CALL),
        "not a list": ({"content": None}, HY_NO_CALL),
        "missing arguments": ({"content": None}, HY_NO_CALL),
        "cut in call": (
            {"content": None, "tool_calls": [("get_weather", {"city": "Pa"})]},
            "differences.md unclosed-value: a call block cut short: vLLM returns the raw markup as "
            "content; we make the call as far as written, its arguments closed",
        ),
        "tool_choice none": ({"content": "Sure. "}, MARKUP),
        "no tools + call": ({"content": None}, MARKUP),
    },
    "hy_v3": {
        "default effort": ({"content": "RC"}, SPECIALS),
        "effort no_think": ({"content": "RC"}, SPECIALS),
        "two ends": ({"content": "CD"}, SPECIALS),
        "cut in value": (
            {"tool_calls": [("get_weather", {"city": "Par"})]},
            "differences.md unclosed-value: a call cut inside a value: vLLM drops the parameter "
            "(`{}`); we close the value where the output stopped",
        ),
        "tool_choice none": ({"content": "Sure. "}, MARKUP),
        "no tools + call": ({"content": None}, MARKUP),
        "call in reasoning": (
            {"reasoning": "R<tool_call>get_weathercityParis</tool_call>"},
            SPECIALS,
        ),
    },
    "hy_v4": {
        "effort no_think": ({"content": "RC"}, SPECIALS),
        "two ends": ({"content": "CD"}, SPECIALS),
        "block without end": (
            {"content": None, "tool_calls": [("get_weather", {"city": "Paris"})]},
            HY_CUT,
        ),
        "cut in value": (
            {"content": None, "tool_calls": [("get_weather", {"city": "Par"})]},
            HY_CUT,
        ),
        "tool_choice none": ({"content": "Sure. "}, MARKUP),
        "no tools + call": ({"content": None}, MARKUP),
        "call in reasoning": (
            {"reasoning": "R<tool_call>get_weathercityParis</tool_call>"},
            SPECIALS,
        ),
    },
    "granite_20b_fc": {
        "invalid json": (
            STREAM,
            "the text after `<function_call>` is no JSON object: vLLM's whole response returns "
            "the output as content, its stream sends nothing; we send nothing either (the "
            "marker opened a call block, whose text is markup)",
        ),
        "missing arguments": (
            {"content": None, "tool_calls": [("get_current_date", {})]},
            "a call object without `arguments`: vLLM's whole response returns the output as "
            'content, its stream makes the call with arguments ""; we make it with {}',
        ),
        "truncated mid-value": (STREAM, CUT),
        "tool_choice none": ({"content": "Sure. "}, MARKUP),
        "no tools + call": ({"content": None}, MARKUP),
    },
}
# The same cases with suffixed HY tags: the same differences (here `<tool_call:…>` is a
# special token too, so none of the block's tags stays in the reasoning).
for _hy in ("hy_v3", "hy_v4"):
    FAMILY_DEVIATIONS[f"{_hy}_suffix"] = {
        **FAMILY_DEVIATIONS[_hy],
        "call in reasoning": ({"reasoning": "Rget_weathercityParis"}, SPECIALS),
    }
