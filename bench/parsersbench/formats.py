"""Part A's table (`FORMATS`: per family its parsers, tokenizer, prompt end and long
generation) and the `Stream` a generation is fed as."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tokenizers import Tokenizer

from parsersbench.family_tokenizers import tokenizer
from parsersbench.generations import (
    QWEN3_TEMPLATE,
    gen_apertus,
    gen_cohere4_reasoning,
    gen_cohere_call,
    gen_cohere_reasoning,
    gen_dots,
    gen_dsml,
    gen_dsml_v41,
    gen_ernie45_call,
    gen_gemma_call,
    gen_gemma_reasoning,
    gen_gigachat3,
    gen_glm_call,
    gen_granite_20b_fc,
    gen_granite_call,
    gen_granite_reasoning,
    gen_harmony_call,
    gen_harmony_reasoning,
    gen_hermes,
    gen_hunyuan_call,
    gen_hunyuan_reasoning,
    gen_hy_call,
    gen_inkling_call,
    gen_inkling_reasoning,
    gen_internlm,
    gen_jamba,
    gen_k2_horizon_call,
    gen_k2_horizon_reasoning,
    gen_kimi_call,
    gen_lfm2,
    gen_llama3_json,
    gen_m3_call,
    gen_m3_reasoning,
    gen_minicpm5,
    gen_minicpmv_reasoning,
    gen_minimax_call,
    gen_mistral_call,
    gen_muse_call,
    gen_muse_reasoning,
    gen_olmo3_call,
    gen_olmo3_reasoning,
    gen_phi4_mini,
    gen_plamo3_call,
    gen_plamo3_reasoning,
    gen_pythonic,
    gen_qwen3_coder,
    gen_qwen_hermes,
    gen_reasoning,
    gen_step3_call,
    gen_template_answer,
    gen_template_reasoning,
    gen_xlam,
)
from worker.core.parsers import (
    ParserSpec,
    ParserState,
    compile_parser,
    open_parser,
)
from worker.core.state import ChoiceState
from worker.core.text.detokenize import Detokenizer
from worker.wire.inbound import ChatRequest

REASONING, ARGS = "reasoning", "call arguments"  # the phase a generation's windows are in
CONTENT = "content"  # (formats whose calls are read whole at their end: the answer's text)


@dataclass(frozen=True)
class Format:
    """One row of part A: a format family's parsers, tokenizer and long generation."""

    family: str
    reasoning: str | None  # reasoning parser
    tools: str | None  # tool parser
    tokenizer: str  # a key of TOKENIZERS
    prompt: str  # the end of the rendered prompt (decides the start state)
    generation: str  # what the long part is
    build: Callable[[Tokenizer], str]
    phase: str  # REASONING or ARGS: what the timed windows must emit
    template: dict[str, Any] | None = None  # the response_template (hf / beam)


_DS, _QWEN = "<｜Assistant｜><think>", "<|im_start|>assistant\n<think>\n"
_LLAMA = "<|start_header_id|>assistant<|end_header_id|>\n\n"
_PLAMO = "<|plamo:msg|>assistant\n<|plamo:begin_think:plamo|>"
_K2H = "<|im_start|>assistant\n<ifm|think>"
_GRANITE = "<|start_of_role|>assistant<|end_of_role|>"
_OLMO3 = "<|im_start|>assistant\n"
_COHERE = "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"
_STEP3 = "<|BOT|>assistant\n<think>\n"
_ERNIE45 = "Assistant: <think>\n"

FORMATS: list[Format] = [
    Format("DeepSeek V4", "deepseek_v4", None, "DeepSeek V4", _DS,
           "reasoning (think tags)", gen_reasoning, REASONING),
    Format("DeepSeek V4", "deepseek_v4", "deepseek_v4", "DeepSeek V4", _DS,
           "DSML string argument", gen_dsml, ARGS),
    Format("DeepSeek V4", "deepseek_v4", "hermes", "DeepSeek V4", _DS,
           "hermes JSON string argument", gen_hermes, ARGS),
    Format("DeepSeek V4.1", "deepseek_v41", "deepseek_v41", "DeepSeek V4", _DS,
           "spaced DSML string argument", gen_dsml_v41, ARGS),
    Format("gpt-oss Harmony", "openai_gptoss", "openai", "o200k_harmony", "",
           "analysis message", gen_harmony_reasoning, REASONING),
    Format("gpt-oss Harmony", "openai_gptoss", "openai", "o200k_harmony", "",
           "`functions.f` JSON arguments", gen_harmony_call, ARGS),
    Format("GLM-4.7", "glm47", "glm47", "GLM-4.7", "<|assistant|><think>",
           "reasoning (think tags)", gen_reasoning, REASONING),
    Format("GLM-4.7", "glm47", "glm47", "GLM-4.7", "<|assistant|><think>",
           "`<arg_value>` string", gen_glm_call, ARGS),
    Format("MiniMax M2", "minimax_m2", "minimax_m2", "MiniMax M2", "]~b]ai\n<think>\n",
           '`<parameter name="s">` string', gen_minimax_call, ARGS),
    Format("MiniMax M3", "minimax_m3", "minimax_m3", "MiniMax M3", "",
           "`<mm:think>` block", gen_m3_reasoning, REASONING),
    Format("MiniMax M3", "minimax_m3", "minimax_m3", "MiniMax M3", "",
           "`<s>` parameter element", gen_m3_call, ARGS),
    Format("Qwen3", "qwen3", "qwen3_coder", "Qwen3", _QWEN,
           "`<parameter=s>` value", gen_qwen3_coder, ARGS),
    Format("Qwen3", "qwen3", "hermes", "Qwen3", _QWEN,
           "hermes JSON string argument", gen_qwen_hermes, ARGS),
    Format("Nemotron 3", "nemotron_v3", "qwen3_coder", "Qwen3", _QWEN,
           "reasoning (think tags)", gen_reasoning, REASONING),
    Format("Granite 4.2", "granite_thinking_parser", "qwen3_coder", "Qwen3", _QWEN,
           "reasoning (think tags)", gen_reasoning, REASONING),
    Format("Gemma 4", "gemma4", "gemma4", "Gemma 4 (synthetic)", "<|turn>model\n",
           "thought channel", gen_gemma_reasoning, REASONING),
    Format("Gemma 4", "gemma4", "gemma4", "Gemma 4 (synthetic)", "<|turn>model\n",
           '`<|"|>` string argument', gen_gemma_call, ARGS),
    Format("Kimi K2", "kimi_k2", "kimi_k2", "marker (Kimi K2)", "<|im_end|>assistant<think>",
           "JSON string argument", gen_kimi_call, ARGS),
    Format("Mistral", "mistral", "mistral", "marker (Mistral)", "",
           "`[ARGS]` JSON string argument", gen_mistral_call, ARGS),
    Format("Llama 3", None, "llama3_json", "Llama 3.2", _LLAMA,
           "llama3_json string argument", gen_llama3_json, ARGS),
    Format("Llama 3", None, "pythonic", "Llama 3.2", _LLAMA,
           "pythonic string argument", gen_pythonic, ARGS),
    Format("Phi-4-mini", None, "phi4_mini_json", "Phi-4-mini (synthetic)", "<|assistant|>",
           "`functools[…]` JSON string argument", gen_phi4_mini, ARGS),
    Format("InternLM2", None, "internlm", "InternLM2 (synthetic)", "<|im_start|>assistant\n",
           "`<|plugin|>` JSON string argument", gen_internlm, ARGS),
    Format("Jamba", None, "jamba", "Jamba (synthetic)", "<|bom|><|assistant|>",
           "`<tool_calls>` JSON string argument", gen_jamba, ARGS),
    Format("GigaChat3", None, "gigachat3", "GigaChat3 (synthetic)", "assistant<|role_sep|>\n",
           "`function call` JSON string argument", gen_gigachat3, ARGS),
    Format("Apertus", None, "apertus", "Apertus (synthetic)", "<|assistant_start|>",
           "`<|tools_prefix|>` keyed JSON string argument", gen_apertus, ARGS),
    Format("LFM2", None, "lfm2", "LFM2 (synthetic)", "<|im_start|>assistant\n",
           "`<|tool_call_start|>` pythonic string argument", gen_lfm2, ARGS),
    Format("PLaMo 3", "plamo3", "plamo3", "PLaMo 3 (synthetic)", _PLAMO,
           "reasoning (think block)", gen_plamo3_reasoning, REASONING),
    Format("PLaMo 3", "plamo3", "plamo3", "PLaMo 3 (synthetic)", _PLAMO,
           "`<|plamo:msg|>` JSON string argument", gen_plamo3_call, ARGS),
    Format("dots.llm1", None, "dots", "dots.llm1 (synthetic)", "<|response|>",
           '`<parameter name="s">` string', gen_dots, ARGS),
    Format("xLAM", None, "xlam", "Qwen3 (xLAM)", "<|im_start|>assistant\n",
           "JSON call array string argument", gen_xlam, ARGS),
    Format("MiniCPM-V", "minicpmv", "qwen3_coder", "Qwen3 (xLAM)", "<|im_start|>assistant\n",
           "reasoning with `\\n` escapes", gen_minicpmv_reasoning, REASONING),
    Format("MiniCPM5", None, "minicpm5", "Qwen3 (xLAM)", "<|im_start|>assistant\n",
           "answer before a `<function>` call", gen_minicpm5, CONTENT),
    Format("response template (hf)", "hf", "hf", "Qwen3 (xLAM)", "<|im_start|>assistant\n",
           "thinking region", gen_template_reasoning, REASONING, QWEN3_TEMPLATE),
    Format("response template (hf)", "hf", "hf", "Qwen3 (xLAM)", "<|im_start|>assistant\n",
           "answer before a call (`\\s*<tool_call>`)", gen_template_answer, CONTENT,
           QWEN3_TEMPLATE),
    Format("response template (beam)", "beam", "beam", "Qwen3 (xLAM)", "<|im_start|>assistant\n",
           "thinking region", gen_template_reasoning, REASONING, QWEN3_TEMPLATE),
    Format("Inkling", "inkling", "inkling", "Inkling (synthetic)", "<|message_model|>",
           "thinking block", gen_inkling_reasoning, REASONING),
    Format("Inkling", "inkling", "inkling", "Inkling (synthetic)", "<|message_model|>",
           "`args` JSON string argument", gen_inkling_call, ARGS),
    Format("K2 Horizon", "k2_horizon", "k2_horizon", "K2 Horizon (synthetic)", _K2H,
           "reasoning (`<ifm|think>`)", gen_k2_horizon_reasoning, REASONING),
    Format("K2 Horizon", "k2_horizon", "k2_horizon", "K2 Horizon (synthetic)", _K2H,
           "`<ifm|arg_value>` string", gen_k2_horizon_call, ARGS),
    Format("Muse", "muse", "muse", "Muse (synthetic)", "<|start|>assistant",
           "`to=self` message", gen_muse_reasoning, REASONING),
    Format("Muse", "muse", "muse", "Muse (synthetic)", "<|start|>assistant",
           "`<atem:parameter>` string", gen_muse_call, ARGS),
    Format("Granite 3.x", "granite", "granite", "Granite 3 (synthetic)", _GRANITE,
           "thought-process phrase", gen_granite_reasoning, REASONING),
    Format("Granite 3.x", "granite", "granite", "Granite 3 (synthetic)", _GRANITE,
           "`<|tool_call|>` JSON string argument", gen_granite_call, ARGS),
    Format("Granite 20B FC", None, "granite-20b-fc", "Granite 3 (synthetic)", _GRANITE,
           "`<function_call>` JSON string argument", gen_granite_20b_fc, ARGS),
    Format("OLMo 3", "olmo3", "olmo3", "Qwen 2.5 (OLMo 3)", _OLMO3,
           "reasoning (text think tags)", gen_olmo3_reasoning, REASONING),
    Format("OLMo 3", "olmo3", "olmo3", "Qwen 2.5 (OLMo 3)", _OLMO3,
           "`<function_calls>` pythonic string argument", gen_olmo3_call, ARGS),
    Format("Step-3", "step3", "step3", "Step-3 (synthetic)", _STEP3,
           "reasoning (up to </think>)", gen_olmo3_reasoning, REASONING),
    Format("Step-3", "step3", "step3", "Step-3 (synthetic)", _STEP3,
           "`<steptml:parameter>` string", gen_step3_call, ARGS),
    Format("ERNIE 4.5", "ernie45", "ernie45", "ERNIE 4.5 (synthetic)", _ERNIE45,
           "reasoning (up to </think>)", gen_olmo3_reasoning, REASONING),
    Format("ERNIE 4.5", "ernie45", "ernie45", "ERNIE 4.5 (synthetic)", _ERNIE45,
           "`<tool_call>` JSON string argument", gen_ernie45_call, ARGS),
    Format("Hunyuan A13B", "hunyuan_a13b", "hunyuan_a13b", "Qwen 2.5 (OLMo 3)", _OLMO3,
           "reasoning (text think tags)", gen_hunyuan_reasoning, REASONING),
    Format("Hunyuan A13B", "hunyuan_a13b", "hunyuan_a13b", "Qwen 2.5 (OLMo 3)", _OLMO3,
           "`<tool_calls>` JSON string argument", gen_hunyuan_call, ARGS),
    Format("HY4", "hy_v4", "hy_v4", "HY (synthetic)", _OLMO3,
           "reasoning (think tokens)", gen_olmo3_reasoning, REASONING),
    Format("HY4", "hy_v4", "hy_v4", "HY (synthetic)", _OLMO3,
           "`<arg_value>` string", gen_hy_call, ARGS),
    Format("Cohere Command A", "cohere_command3", "cohere_command3", "Cohere (synthetic)",
           _COHERE, "reasoning (`<|START_THINKING|>`)", gen_cohere_reasoning, REASONING),
    Format("Cohere Command A", "cohere_command3", "cohere_command3", "Cohere (synthetic)",
           _COHERE, "`<|START_ACTION|>` JSON string argument", gen_cohere_call, ARGS),
    Format("Cohere Command A", "cohere_command4", "cohere_command4", "Cohere (synthetic)",
           _COHERE, "reasoning (opened by the prompt)", gen_cohere4_reasoning, REASONING),
]  # fmt: skip


def tools_request() -> ChatRequest:
    def tool(name: str, **props: str) -> dict[str, object]:
        properties = {k: {"type": v} for k, v in props.items()}
        return {
            "type": "function",
            "function": {"name": name, "parameters": {"type": "object", "properties": properties}},
        }

    return ChatRequest(tools=[tool("save", text="string"), tool("f", s="string", n="integer")])


@dataclass
class Stream:
    """A generation as the parser sees it: per-token texts (special tokens kept)."""

    spec: ParserSpec
    request: ChatRequest
    prompt: list[int]
    ids: list[int]
    texts: list[str]

    def open(self) -> ParserState:
        return open_parser(self.spec, self.request, self.prompt, "req-bench", 0)


def make_stream(tok: Tokenizer, spec: ParserSpec, text: str, prompt: str = _DS) -> Stream:
    ids = list(tok.encode(text, add_special_tokens=False).ids)
    detok = Detokenizer(tok, skip_special_tokens=False)
    slot = ChoiceState(index=0)
    texts = [detok.step(slot, [i]) for i in ids]
    texts[-1] += detok.flush(slot)
    prompt_ids = list(tok.encode(prompt, add_special_tokens=False).ids)
    return Stream(spec, tools_request(), prompt_ids, ids, texts)


def format_stream(f: Format) -> Stream:
    tok = tokenizer(f.tokenizer)
    spec = compile_parser(f.reasoning, f.tools, tok, response_template=f.template)
    return make_stream(tok, spec, f.build(tok), f.prompt)
