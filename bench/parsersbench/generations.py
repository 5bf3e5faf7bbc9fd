"""The long generations of part A, one per format row (a long reasoning, or a call
whose string argument runs for `LONG` tokens), in each family's own markup."""

from __future__ import annotations

from typing import Any

import msgspec
from tokenizers import Tokenizer

# -- generations ----------------------------------------------------------------------------

PROSE = (
    "The user asks about the weather in 杭州 next week, so I should look at the forecast "
    "for each day, compare it with the usual temperatures, and mention rain if any. "
)
_ARG = 'Line of a long "document" with <tags>, {braces}, 日本語 and a backslash \\ too.\n'
LONG = 12_000  # tokens of the long part (reasoning or the string argument)


def repeat_to(tok: Tokenizer, unit: str, tokens: int) -> str:
    per = len(tok.encode(unit, add_special_tokens=False).ids)
    return unit * (tokens // per + 1)


def _prose(tok: Tokenizer) -> str:
    return repeat_to(tok, PROSE, LONG)


def _arg(tok: Tokenizer, tokens: int = LONG) -> str:
    return repeat_to(tok, _ARG, tokens)


def _json_arg(tok: Tokenizer, key: str = "s") -> str:
    """`{"s": "…long…"}`: the arguments object of a JSON call, as the model writes it."""
    return msgspec.json.encode({key: _arg(tok)}).decode().replace('":', '": ', 1)


def gen_reasoning(tok: Tokenizer) -> str:
    return _prose(tok) + "</think>The forecast says sun."


def gen_dsml(tok: Tokenizer, arg_tokens: int = LONG) -> str:
    return (
        "Short plan.</think>Let me save it.\n\n<｜DSML｜tool_calls>\n"
        '<｜DSML｜invoke name="save">\n<｜DSML｜parameter name="text" string="true">'
        + _arg(tok, arg_tokens)
        + "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
    )


def gen_dsml_v41(tok: Tokenizer) -> str:
    d = "｜DSML｜ "
    return (
        f'Short plan.</think>Let me save it.\n\n<{d}calls>\n<{d}invoke name="f">\n'
        f'<{d}parameter name="s" string="true">'
        + _arg(tok)
        + f"</{d}parameter>\n</{d}invoke>\n</{d}calls>"
    )


def gen_hermes(tok: Tokenizer) -> str:
    body = msgspec.json.encode({"name": "save", "arguments": {"text": _arg(tok)}})
    return "Short plan.</think>Saving.<tool_call>" + body.decode() + "</tool_call>"


def gen_qwen_hermes(tok: Tokenizer) -> str:
    body = '{"name": "f", "arguments": ' + _json_arg(tok) + "}"
    return "Short plan.</think>\n\n<tool_call>\n" + body + "\n</tool_call>"


def gen_qwen3_coder(tok: Tokenizer) -> str:
    return (
        "Short plan.</think>\n\n<tool_call>\n<function=f>\n<parameter=s>\n"
        + _arg(tok)
        + "\n</parameter>\n</function>\n</tool_call>"
    )


HARMONY_PLAN = "<|channel|>analysis<|message|>Short plan.<|end|>"


def gen_harmony_reasoning(tok: Tokenizer) -> str:
    return (
        "<|channel|>analysis<|message|>"
        + _prose(tok)
        + "<|end|><|start|>assistant<|channel|>final<|message|>The forecast says sun."
    )


def gen_harmony_call(tok: Tokenizer) -> str:
    return (
        HARMONY_PLAN
        + "<|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>"
        + _json_arg(tok)
        + "<|call|>"
    )


def gen_glm_call(tok: Tokenizer) -> str:
    return (
        "Short plan.</think><tool_call>f<arg_key>s</arg_key><arg_value>"
        + _arg(tok)
        + "</arg_value></tool_call>"
    )


def gen_minimax_call(tok: Tokenizer) -> str:
    return (
        'Short plan.</think><minimax:tool_call>\n<invoke name="f">\n<parameter name="s">'
        + _arg(tok)
        + "</parameter>\n</invoke>\n</minimax:tool_call>"
    )


M3 = "]<]minimax[>["  # MiniMax M3's namespace: every tag inside a call block carries it


def gen_m3_reasoning(tok: Tokenizer) -> str:
    return "<mm:think>" + _prose(tok) + "</mm:think>The forecast says sun."


def gen_m3_call(tok: Tokenizer) -> str:
    return (
        f'<mm:think>Short plan.</mm:think>{M3}<tool_call>\n{M3}<invoke name="f">{M3}<s>'
        + _arg(tok)
        + f"{M3}</s>{M3}</invoke>\n{M3}</tool_call>"
    )


def gen_gemma_reasoning(tok: Tokenizer) -> str:
    return "<|channel>thought\n" + _prose(tok) + "<channel|>The forecast says sun."


def gen_gemma_call(tok: Tokenizer) -> str:
    q = '<|"|>'
    return (
        "<|channel>thought\nShort plan.<channel|><|tool_call>call:f{s:"
        + q
        + _arg(tok)
        + q
        + "}<tool_call|>"
    )


def gen_kimi_call(tok: Tokenizer) -> str:
    return (
        "Short plan.</think><|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
        "<|tool_call_argument_begin|>" + _json_arg(tok) + "<|tool_call_end|>"
        "<|tool_calls_section_end|>"
    )


def gen_mistral_call(tok: Tokenizer) -> str:
    return "[THINK]Short plan.[/THINK][TOOL_CALLS]f[ARGS]" + _json_arg(tok)


def gen_llama3_json(tok: Tokenizer) -> str:
    return '{"name": "f", "parameters": ' + _json_arg(tok) + "}"


def gen_pythonic(tok: Tokenizer) -> str:
    # The long value second: a call's header waits for its first value, and a sniffed
    # `[` is given up as content past args.RAW_MAX characters without one.
    return "[f(n=1, s=" + repr(_arg(tok)) + ")]"


def gen_inkling_reasoning(tok: Tokenizer) -> str:
    return (
        "<|content_thinking|>"
        + _prose(tok)
        + "<|end_message|><|message_model|><|content_text|>Sun.<|end_message|>"
    )


def gen_inkling_call(tok: Tokenizer) -> str:
    body = '{"name": "f", "args": ' + _json_arg(tok) + "}"
    return "<|content_invoke_tool_json|>" + body + "<|end_message|>"


def gen_muse_reasoning(tok: Tokenizer) -> str:
    return " to=self<|message|>" + _prose(tok) + "<|eom|><|start|>assistant to=user<|message|>Sun."


def gen_muse_call(tok: Tokenizer) -> str:
    return (
        ' to=save<|message|><atem:function_calls><atem:invoke name="save">'
        '<atem:parameter name="text">'
        + _arg(tok)
        + "</atem:parameter></atem:invoke></atem:function_calls><|eom|>"
    )


def gen_k2_horizon_reasoning(tok: Tokenizer) -> str:
    return _prose(tok) + "</ifm|think>The forecast says sun."


def gen_k2_horizon_call(tok: Tokenizer) -> str:
    return (
        "Short plan.</ifm|think><ifm|tool_calls><ifm|tool_call>save<ifm|arg_key>text"
        "</ifm|arg_key><ifm|arg_value>"
        + _arg(tok)
        + "</ifm|arg_value></ifm|tool_call></ifm|tool_calls>"
    )


def gen_phi4_mini(tok: Tokenizer) -> str:
    return 'functools[{"name": "f", "arguments": ' + _json_arg(tok) + "}]"


def gen_internlm(tok: Tokenizer) -> str:
    return '<|action_start|><|plugin|>\n{"name": "f", "parameters": ' + _json_arg(tok) + "}"


def gen_gigachat3(tok: Tokenizer) -> str:
    return 'function call<|role_sep|>\n{"name": "f", "arguments": ' + _json_arg(tok) + "}"


def gen_apertus(tok: Tokenizer) -> str:
    return '<|tools_prefix|>[{"f": ' + _json_arg(tok) + "}]<|tools_suffix|>"


def gen_lfm2(tok: Tokenizer) -> str:
    return "<|tool_call_start|>[f(n=1, s=" + repr(_arg(tok)) + ")]<|tool_call_end|>"


def gen_plamo3_call(tok: Tokenizer) -> str:
    return (
        "Hm.<|plamo:end_think:plamo|><|plamo:begin_tool_requests:plamo|>"
        "<|plamo:begin_tool_request:plamo|><|plamo:begin_tool_name:plamo|>f"
        "<|plamo:end_tool_name:plamo|><|plamo:begin_tool_arguments:plamo|><|plamo:constrain|>"
        "json<|plamo:msg|>" + _json_arg(tok)
    )


def gen_plamo3_reasoning(tok: Tokenizer) -> str:
    return _prose(tok)


def gen_dots(tok: Tokenizer) -> str:
    return '<dots_function_call>\n<invoke name="f">\n<parameter name="s">' + _arg(tok)


def gen_xlam(tok: Tokenizer) -> str:
    return '[{"name": "f", "arguments": ' + _json_arg(tok) + "}]"


def gen_minicpmv_reasoning(tok: Tokenizer) -> str:
    # MiniCPM-V writes its newlines as `\\n` (escapes.py recovers them).
    return _prose(tok).replace("\n", "\\n") + "</think>The forecast says sun."


def gen_minicpm5(tok: Tokenizer) -> str:
    # The call is read whole at its end: the long part is the answer before it.
    return _prose(tok) + '<function name="f"><param name="s">x</param></function>'


# The response template transformers ships for Qwen3
# (tests/core/parsers/real/test_response_template.py).
QWEN3_TEMPLATE: dict[str, Any] = {
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "thinking": {"open": "<think>", "close": "</think>"},
        "tool_calls": {
            "open_pattern": r"\s*<tool_call>",
            "close": "</tool_call>",
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close_pattern": r"\s*(?:<\|im_end\|>|<\|endoftext\|>)"},
    },
}


def gen_template_answer(tok: Tokenizer) -> str:
    # The answer's trailing whitespace is held each record (`\s*<tool_call>` may follow).
    return (
        "<think>r</think>" + _prose(tok) + '<tool_call>{"name": "f", "arguments": {}}</tool_call>'
    )


def gen_template_reasoning(tok: Tokenizer) -> str:
    return "<think>" + _prose(tok) + "</think>The forecast says sun."


def gen_jamba(tok: Tokenizer) -> str:
    return '<tool_calls>[{"name": "f", "arguments": ' + _json_arg(tok) + "}]</tool_calls>"


def gen_granite_reasoning(tok: Tokenizer) -> str:
    return "Here is my thought process:" + _prose(tok)


def gen_granite_call(tok: Tokenizer) -> str:
    return '<|tool_call|>[{"name": "f", "arguments": ' + _json_arg(tok) + "}]"


def gen_granite_20b_fc(tok: Tokenizer) -> str:
    return '<function_call> {"name": "f", "arguments": ' + _json_arg(tok) + "}"


def gen_olmo3_reasoning(tok: Tokenizer) -> str:
    return _prose(tok)


def gen_olmo3_call(tok: Tokenizer) -> str:
    return "Hm.</think><function_calls>f(n=1, s=" + repr(_arg(tok)) + ")</function_calls>"


def gen_ernie45_call(tok: Tokenizer) -> str:
    return 'Hm.</think><tool_call>{"name": "f", "arguments": ' + _json_arg(tok) + "}"


def gen_hunyuan_reasoning(tok: Tokenizer) -> str:
    return "<think>\n" + _prose(tok)


def gen_hunyuan_call(tok: Tokenizer) -> str:
    return '<tool_calls>[{"name": "f", "arguments": ' + _json_arg(tok) + "}]</tool_calls>"


def gen_hy_call(tok: Tokenizer) -> str:
    return "Hm.</think><tool_calls><tool_call>f<arg_key>s</arg_key><arg_value>" + _arg(tok)


def gen_step3_call(tok: Tokenizer) -> str:
    return (
        "Hm.</think><｜tool_calls_begin｜><｜tool_call_begin｜>function<｜tool_sep｜>"
        '<steptml:invoke name="f"><steptml:parameter name="s">' + _arg(tok)
    )


def gen_cohere_reasoning(tok: Tokenizer) -> str:
    return (
        "<|START_THINKING|>"
        + _prose(tok)
        + "<|END_THINKING|><|START_RESPONSE|>Sun.<|END_RESPONSE|>"
    )


def gen_cohere_call(tok: Tokenizer) -> str:
    return (
        '<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "f", "parameters": '
        + _json_arg(tok)
        + "}\n]<|END_ACTION|>"
    )


def gen_cohere4_reasoning(tok: Tokenizer) -> str:
    # Command A Plus: the prompt opened the thinking block.
    return _prose(tok) + "<|END_THINKING|><|START_TEXT|>Sun.<|END_TEXT|>"
