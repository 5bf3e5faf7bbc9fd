"""The reasoning formats (vLLM 0.33.0 vllm/reasoning/ and the configs in vllm/parser/).

Each names its think markers and how the start state is chosen: the prompt's last think
marker, the request's chat_template_kwargs, or the format's default. Most are vLLM's
think-tag parsers with other markers or switches; gpt-oss reads Harmony messages
instead (frames.py).
"""

from __future__ import annotations

from dataclasses import replace

from worker.core.parsers.families.frames import HARMONY
from worker.core.parsers.language.grammar import SWAP_ABSENT, SWAP_BLANK, ReasoningFormat
from worker.core.parsers.language.markers import (
    DSML_V4_BLOCK,
    DSML_V4_VARIANTS,
    DSML_V41_BLOCK,
    END_THINK,
    KIMI_SECTION,
    MINIMAX_TOOL_CALL,
    MISTRAL_TOOL_CALLS,
    QWEN_TOOL_CALL,
    THINK,
    XTML_CLOSE,
    XTML_OPEN,
    XTML_SEP,
)

REASONING_FORMATS: dict[str, ReasoningFormat] = {
    # deepseek_r1_reasoning_parser.py: no <think> in the output means the template put it in
    # the prompt. vLLM 0.33 still runs both with its older think-tag class.
    "deepseek_r1": ReasoningFormat(
        "deepseek_r1",
        THINK,
        END_THINK,
        thinking_default=True,
        strip_trailing=False,
        empty_as_text=True,
        once=True,
    ),
    # deepseek_v3_reasoning_parser.py: V3.1/V3.2 think only when asked to (`thinking` /
    # `enable_thinking`).
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
    # deepseek_v3_reasoning_parser.py: deepseek_v3 thinking unless the kwargs switch it off.
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
    # vllm/parser/qwen3.py: Qwen3.5 may open a tool call without closing </think>.
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
    # vllm/parser/deepseek_v4.py: thinking on by default; a DSML block inside reasoning ends it.
    "deepseek_v4": ReasoningFormat(
        "deepseek_v4",
        THINK,
        END_THINK,
        thinking_default=True,
        implicit_end=(DSML_V4_BLOCK, *DSML_V4_VARIANTS),
        effort_none=True,
    ),
    # vllm/parser/deepseek_v41.py: V4 with spaced DSML.
    "deepseek_v41": ReasoningFormat(
        "deepseek_v41",
        THINK,
        END_THINK,
        thinking_default=True,
        implicit_end=(DSML_V41_BLOCK,),
        effort_none=True,
    ),
    # vllm/parser/kimi_k2.py
    "kimi_k2": ReasoningFormat(
        "kimi_k2",
        THINK,
        END_THINK,
        thinking_default=True,
        implicit_end=(KIMI_SECTION,),
        off_is_plain=True,  # vLLM's config drops its think rules when thinking is off
    ),
    # vllm/parser/mistral.py: a trace must start with [THINK]; the prompt does not decide
    # (old system prompts carry pre-filled [THINK]…[/THINK]).
    "mistral": ReasoningFormat(
        "mistral",
        "[THINK]",
        "[/THINK]",
        thinking_default=False,
        from_prompt=False,
        from_kwargs=False,
        implicit_end=(MISTRAL_TOOL_CALLS,),
    ),
    # vllm/parser/glm47_moe.py: GLM-4.5 … 5.x; thinking on unless `thinking` /
    # `enable_thinking` is false, and then the think tags are text.
    "glm45": ReasoningFormat(
        "glm45",
        THINK,
        END_THINK,
        thinking_default=True,
        implicit_end=(QWEN_TOOL_CALL,),
        off_is_plain=True,
    ),
}
# minimax_m2_reasoning_parser.py: the template opens <think>; the prompt decides,
# chat_template_kwargs do not.
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
# vllm/parser/harmony.py: gpt-oss. vLLM parses Harmony whenever the model is gpt-oss; the
# names say which parts are kept (no reasoning parser: analysis is dropped; no tool parser:
# calls are). Nothing is stripped: a message's text is sent as written.
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
# vllm/parser/nemotron_v3.py: Nemotron 3 (served with the qwen3_coder tools): thinking from
# `enable_thinking`, which switched off leaves the think rules on (a stray </think> is
# dropped); reasoning's trailing whitespace stripped; an answer that wrote only reasoning
# can ask for it as content.
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
# vllm/parser/gemma4.py: Gemma 4. Reasoning is a channel, opened anywhere, its first line
# the channel name; the prompt says whether the output starts inside one (thinking is the
# prompt's business, not the parser's).
REASONING_FORMATS["gemma4"] = ReasoningFormat(
    "gemma4",
    "<|channel>",
    "<channel|>",
    thinking_default=False,
    from_kwargs=False,
    implicit_end=("<|tool_call>",),
    prefix="thought\n",
)
# vllm/parser/minimax_m3.py: MiniMax M3. `thinking_mode: "enabled"` means the template
# opened the block; otherwise reasoning is whatever the model puts in one. Whitespace is
# kept.
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
# kimi_k3_reasoning_parser.py: Kimi K3's XTML (markers.XTML_*); vLLM matches them all on
# text. Thinking is on unless switched off.
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
# vllm/parser/ling3.py: Ling 3 runs GLM's parser; poolside Laguna's reasoning is deepseek_v3's.
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
