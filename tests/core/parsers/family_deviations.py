"""Where our answers differ from vLLM 0.33.0's whole answers for Granite 3.x, OLMo 3,
Step-3, Hunyuan and ERNIE 4.5 (`test_vllm_answers.DEVIATIONS`, same shape: label → (what
we give instead, why); "stream" = vLLM's streamed answer)."""

from __future__ import annotations

from typing import Any

STREAM = "stream"

UNANSWERED = (
    "README granite-unanswered-thought: a thought process with no 'Here is my response:' "
    "after it: vLLM's whole response gives the output verbatim as content, its stream sends "
    "the reasoning; we stream it as reasoning too (the whole answer would need the whole "
    "reasoning held until the output ends)"
)
BEFORE_THOUGHT = (
    "README granite-text-before-thought: vLLM's whole response drops the text before 'Here "
    "is my thought process:', its stream makes all of it content; we keep that text as "
    "content and split the rest"
)
STRIP = (
    "README content-strip-with-tools: vLLM's whole response strips the content around calls, "
    "its stream keeps it"
)
MARKUP = (
    "README tool-markup-in-content: with tools off vLLM keeps the call block as content; we "
    "drop it, as vLLM's engine parsers do"
)
CUT = (
    "README unclosed-value: a call cut short: vLLM's whole response sends the arguments as "
    "far as written (not JSON); we close them where the output stopped"
)
NO_LIST = (
    "README python-tag-in-content: a marker followed by no call list: vLLM's content keeps "
    "the raw text with `<|tool_call|>`; ours is the same text without it"
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
