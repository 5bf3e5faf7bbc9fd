"""The recorded families of test_vllm_answers.py (each one's parsers, tokenizer, EOS and
response template) and the deviations from vLLM's whole answers we keep on purpose, with
why: the ten families' here, the others' from *_deviations.py beside this module."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tokenizers import Tokenizer

from tests.core.parsers.recorded.block_deviations import BLOCK_DEVIATIONS, BLOCK_FAMILIES
from tests.core.parsers.recorded.cohere_deviations import COHERE_DEVIATIONS, COHERE_FAMILIES
from tests.core.parsers.recorded.family_deviations import FAMILY_DEVIATIONS
from tests.core.parsers.recorded.longtail_deviations import LONGTAIL_DEVIATIONS, LONGTAIL_FAMILIES
from tests.core.parsers.recorded.minicpm_deviations import MINICPM_DEVIATIONS, MINICPM_FAMILIES
from tests.support.vocab import synthetic_families as synth_families
from tests.support.vocab import synthetic_tokenizers as synth
from tests.support.vocab.offline_tokenizers import offline_tokenizer


@dataclass(frozen=True)
class Family:
    reasoning: str | None
    tools: str
    tokenizer: Callable[[], Tokenizer]
    eos: int
    template: dict[str, Any] | None = None  # the folder's response_template (hf, beam)


FAMILIES: dict[str, Family] = {
    "nemotron_v3": Family(
        "nemotron_v3", "qwen3_coder", lambda: offline_tokenizer("qwen-3"), 151645
    ),
    "granite_thinking_parser": Family(
        "granite_thinking_parser", "qwen3_coder", lambda: offline_tokenizer("qwen-3"), 151645
    ),
    "ling3": Family("ling3", "ling3", lambda: offline_tokenizer("glm-4.7-flash"), 154820),
    "poolside_v1": Family("poolside_v1", "poolside_v1", synth.poolside_v1_tokenizer, 154861),
    "gemma4": Family("gemma4", "gemma4", synth.gemma4_tokenizer, 151673),
    "functiongemma": Family(None, "functiongemma", synth.functiongemma_tokenizer, 151673),
    "minimax_m3": Family(
        "minimax_m3", "minimax_m3", lambda: offline_tokenizer("minimax-m3"), 200020
    ),
    "kimi_k3": Family("kimi_k3", "kimi_k3", synth.kimi_k3_tokenizer, 151672),
    # llama4_pythonic, llama4_json (none / that tool parser; probed 2026-12-01 as above):
    # `llama4_tokenizer()`; Llama 4 turns (`<|header_start|>assistant<|header_end|>\n\n`,
    # tools as JSON in the system turn); LlamaForCausalLM; EOS `<|eot|>`.
    "llama4_pythonic": Family(None, "llama4_pythonic", synth.llama4_tokenizer, 128261),
    "llama4_json": Family(None, "llama4_json", synth.llama4_tokenizer, 128261),
    # Granite 3.x, one folder (granite / granite; none / granite-20b-fc; probed 2026-12-02 by
    # tests/peer/probes/probe_answers.py): `granite_tokenizer()`; Granite 3 role turns;
    # GraniteForCausalLM; EOS `<|end_of_text|>`.
    "granite": Family("granite", "granite", synth_families.granite_tokenizer, 151671),
    "granite_20b_fc": Family(None, "granite-20b-fc", synth_families.granite_tokenizer, 151671),
    # OLMo 3 (olmo3 / olmo3): `olmo3_tokenizer()` (the real Qwen 2.5 vocabulary: OLMo 3's
    # markers are text); ChatML turns; Olmo3ForCausalLM; EOS `<|im_end|>`.
    "olmo3": Family("olmo3", "olmo3", synth_families.olmo3_tokenizer, 151645),
    # Step-3 (step3 / step3): `step3_tokenizer()`; `<|BOT|>` turns, the prompt ending
    # `<think>\n`; Step3TextForCausalLM; EOS `<|EOT|>`.
    "step3": Family("step3", "step3", synth_families.step3_tokenizer, 151670),
    # ERNIE 4.5 (ernie45 / ernie45): `ernie45_tokenizer()`; "User: … Assistant: " turns,
    # the prompt ending `<think>\n`; Ernie4_5_MoeForCausalLM; EOS `<|end_of_sentence|>`.
    "ernie45": Family("ernie45", "ernie45", synth_families.ernie45_tokenizer, 151670),
    # Hunyuan A13B (hunyuan_a13b / hunyuan_a13b): `olmo3_tokenizer()` (the real Qwen 2.5
    # vocabulary: A13B's markers are text); ChatML turns; HunYuanMoEV1ForCausalLM; EOS
    # `<|im_end|>`.
    "hunyuan_a13b": Family("hunyuan_a13b", "hunyuan_a13b", synth_families.olmo3_tokenizer, 151645),
    # HY3 / HY4, one folder (hy_v3 / hy_v3; hy_v4 / hy_v4): `hy_tokenizer()` (no token
    # suffix); ChatML turns; HYV3ForCausalLM; EOS `<|im_end|>`.
    "hy_v3": Family("hy_v3", "hy_v3", synth_families.hy_tokenizer, 151645),
    "hy_v4": Family("hy_v4", "hy_v4", synth_families.hy_tokenizer, 151645),
    # The same cases on a checkpoint whose HY tags carry a suffix (`hy_suffix_tokenizer()`,
    # `token_suffix` in its tokenizer_config.json).
    "hy_v3_suffix": Family("hy_v3", "hy_v3", synth_families.hy_suffix_tokenizer, 151645),
    "hy_v4_suffix": Family("hy_v4", "hy_v4", synth_families.hy_suffix_tokenizer, 151645),
}

# We give vLLM's streamed answer (its whole one differs).
STREAM = "stream"

PLAIN = (
    "markers written as ordinary tokens are text, as vLLM streams them (its whole response "
    "matches them by text)"
)
STRIP = (
    "differences.md content-strip-with-tools: vLLM's whole response strips the content around "
    "calls, its stream keeps it"
)
AFTER = (
    "differences.md text-after-call: vLLM's whole response drops the text after the first call, "
    "its stream keeps it"
)
UNCLOSED = (
    "differences.md unclosed-value: vLLM's whole response drops the cut value, its stream sends "
    "invalid JSON; we close the value where the output stopped"
)
CUT_RAW = (
    "a cut call (no </tool_call>): vLLM's whole response returns it as raw markup content, "
    "its stream sends the call; markup never becomes content (differences.md hermes-cut-call)"
)
MARKUP = (
    "differences.md tool-markup-in-content: with tools off vLLM keeps the call block as content; "
    "we drop it, as vLLM's engine parsers (nemotron_v3, ling3, gemma4) do"
)
CUT = (
    "a call cut short: vLLM returns no call at all; we send it as far as it was written, "
    "its arguments closed (differences.md llama-cut-call, hermes-cut-call, unclosed-value)"
)
LAX = (
    "differences.md lax-unconstrained-output: under a forced tool_choice vLLM's functiongemma "
    'reads only the constrained JSON (required: the native call dropped, content ""; named: '
    "the raw native text as arguments); we parse the model's own call"
)

CUT_NAME = (
    "differences.md cut-name: a call cut inside its name: vLLM returns it with the name as far as "
    "written (`get_wea`); we make no call"
)
HIDDEN_SWAP = (
    "differences.md hidden-swap: include_reasoning false with force_nonempty_content: vLLM swaps "
    "the reasoning into content first; we send no reasoning, as content neither"
)
STRAY_END = (
    "differences.md stray-think-end: vLLM's MiniMax M3 keeps a `</mm:think>` inside content as "
    "text; we drop it"
)
GUESSED_CHANNEL = (
    "differences.md gemma-implied-channel: vLLM takes an answer that starts `thought\\n` (or "
    "closes a channel never opened, whole response only) as reasoning; we keep it content"
)

# family → label → (what we give instead of vLLM's whole answer, why). "What we give" is
# `STREAM` or a dict overriding some of `reasoning`, `content`, `tool_calls` (a list of
# (name, arguments as a JSON value or text)).
DEVIATIONS: dict[str, dict[str, tuple[str | dict[str, Any], str]]] = {
    "nemotron_v3": {
        "vllm engine: literal <tool_call> text in reasoning": (STREAM, PLAIN),
        "vllm engine: discussion then real call": (STREAM, PLAIN),
        "call after reasoning": (STREAM, STRIP),
        "text after call": (STREAM, AFTER),
        "truncated mid-value": ({"tool_calls": [("get_weather", {"city": "Tok"})]}, UNCLOSED),
        "markers as plain tokens (think)": (STREAM, PLAIN),
        "markers as plain tokens (tool_call)": (STREAM, PLAIN),
        "content ws stripped with tools": (STREAM, STRIP + "; " + AFTER),
        "x: newline text newline call": (STREAM, STRIP),
        "truncated mid-call name": ({"tool_calls": []}, CUT_NAME),
        "include_reasoning false + force swap": ({"content": None}, HIDDEN_SWAP),
    },
    "granite_thinking_parser": {},  # nemotron_v3's, filled in below
    "ling3": {
        "call after reasoning": (STREAM, STRIP),
        "text after call": (STREAM, AFTER),
        "truncated mid-value": ({"tool_calls": [("get_weather", {"city": "Bei"})]}, UNCLOSED),
        "markers as plain tokens (think)": (STREAM, PLAIN),
        "markers as plain tokens (tool_call)": (STREAM, PLAIN),
        "content ws with tools": (STREAM, STRIP + "; " + AFTER),
    },
    "poolside_v1": {
        "think: <think> in content": (
            STREAM,
            "vLLM's whole response re-splits at a later <think> (reasoning 'c', 'a' and 'b' "
            "lost); its stream keeps the reasoning 'a' and the content 'b<think>c'",
        ),
        "text after call": (STREAM, AFTER),
        "truncated mid-call name": (STREAM, CUT_RAW),
        "truncated mid-value": (STREAM, CUT_RAW),
        "truncated after </arg_value>": (STREAM, CUT_RAW),
        "truncated mid-key": (
            {"content": None, "tool_calls": [("get_weather", {})]},
            CUT_RAW + "; arguments {} where vLLM streams an empty string",
        ),
        "markers as plain tokens (think)": (STREAM, PLAIN),
        "tool_choice none": ({"content": "Sure."}, MARKUP),
        "no tools + call": ({"content": "Sure."}, MARKUP),
        "content ws with tools": (STREAM, AFTER),
    },
    "gemma4": {
        "vllm: bare thought\\n with thinking off": (
            {"reasoning": None, "content": "thought\nAnswer"},
            GUESSED_CHANNEL,
        ),
        "vllm: <channel|> without opener": (STREAM, GUESSED_CHANNEL),
        "truncated mid-name": ({"tool_calls": []}, CUT_NAME),
        "vllm: text before call": (STREAM, STRIP),
        "text after call": (STREAM, AFTER),
        "markers as plain tokens (channel)": (STREAM, PLAIN),
        "markers as plain tokens (tool_call)": (STREAM, PLAIN),
    },
    "functiongemma": {
        "vllm: text before call": ({"content": "Let me check. "}, STRIP),
        "text after call": ({"content": "A.  after."}, AFTER),
        "content ws with call": ({"content": "  Checking.  "}, STRIP),
        "hyphen name (regex \\w+)": (
            STREAM,
            "vLLM's whole response reads names as \\w+ and returns the call as raw markup "
            "content; its stream makes the call",
        ),
        "unterminated call at EOS": (
            {"tool_calls": [("get_weather", {"city": "Lon"})]},
            UNCLOSED + " (vLLM: whole {}, stream empty arguments)",
        ),
        "truncated mid-value": (
            {"tool_calls": [("get_weather", {"city": "Lon"})]},
            UNCLOSED + " (vLLM: whole {}, stream empty arguments)",
        ),
        "tool_choice none": ({"content": "Sure."}, MARKUP),
        "no tools + call": ({"content": "Sure."}, MARKUP),
        "tool_choice required": (
            {"tool_calls": [("get_weather", {"city": "London", "days": 3})]},
            LAX,
        ),
        "tool_choice named": (
            {"tool_calls": [("get_weather", {"city": "London", "days": 3})]},
            LAX,
        ),
        "other special tokens": (
            {"content": "AB<escape>C"},
            "differences.md special-skip-set: vLLM's derender keeps special tokens once a parser "
            "is set; we drop them (the format's own <escape> stays, as vLLM keeps it)",
        ),
        "other special tokens, no tools": (
            {"content": "AB<escape>C"},
            "differences.md special-skip-set (as 'other special tokens')",
        ),
    },
    "minimax_m3": {
        "think: enable_thinking kwarg ignored?": ({"content": "Let me think.Hello"}, STRAY_END),
        "truncated mid-name": ({"tool_calls": []}, CUT_NAME),
        "vllm: truncated invoke keeps completed params": (
            {"tool_calls": [("create_order", {"user_id": 1, "note": "x"})]},
            UNCLOSED,
        ),
        "truncated mid-value": ({"tool_calls": [("get_weather", {"city": "Tok"})]}, UNCLOSED),
        "tool_choice none": ({"content": "Sure."}, MARKUP),
        "no tools + call": ({"content": "Sure."}, MARKUP),
    },
    "kimi_k3": {
        "text around channels": (
            STREAM,
            "vLLM's whole response keeps only the response channel's body; its stream also "
            "sends the text written before the channel",
        ),
        "truncated mid-call": ({"tool_calls": [("get_weather", {"city": "Tok"})]}, CUT),
        "call outside tools channel": (
            {"tool_calls": [("get_current_date", {})]},
            "differences.md k3-call-outside-tools: vLLM drops a call written outside the tools "
            "channel; we make it",
        ),
        "truncated mid-value": ({"tool_calls": [("get_weather", {"city": "Tok"})]}, CUT),
    },
}
SKIPPED_SPECIALS = (
    "differences.md special-skip-set: vLLM's derender keeps special tokens once a parser is set; "
    "we drop them"
)
PY_TRAIL = (
    "vLLM's whole response returns the output as text when text follows the call list "
    "(ast.parse fails on it); its stream makes the call"
)
AFTER_TEXT = (
    "differences.md llama-call-after-text: vLLM's whole response drops the text before the call; "
    "we keep it as content"
)
STRAY_BRACE = (
    "vLLM's whole response gives up on the call when a later `{` in the text after it is "
    "no call (raw text as content); its stream makes the call"
)
TAG_CONTENT = (
    "differences.md python-tag-in-content: no call returned, vLLM's content keeps "
    "`<|python_tag|>`; ours is the same text without it"
)
PLAIN_LLAMA = (
    "differences.md plain-token-markers: a marker spelled in ordinary tokens is text to us (vLLM "
    "matches it by text)"
)
CALL_AFTER_TEXT = (
    "differences.md llama-call-after-text (pythonic): after text (or a space, a newline) vLLM "
    "keeps the call list as text and makes no call; we keep the text and make the call"
)
PY_LAX = (
    "differences.md lax-unconstrained-output: pythonic has no structural tag, so under a forced "
    'tool_choice vLLM reads only the constrained JSON (required: content "", the list '
    "dropped; named: the raw text as the arguments); we keep a bare list as content (no text "
    "poses as arguments) and make the call the `<|python_start|>` block writes"
)
WEATHER_LA = ("get_weather", {"city": "LA", "metric": "C"})
WEATHER_TOKYO = ("get_weather", {"city": "Tokyo", "days": 3})
DEVIATIONS["llama4_pythonic"] = {
    "vllm: bad sibling call (bytes)": (
        {"content": None, "tool_calls": [WEATHER_LA]},
        "a call whose value is no literal (`b'z'`) is left out and the others made (newer "
        "vLLM does the same); vLLM 0.33 returns the whole list as text",
    ),
    "vllm: non-finite argument": (
        {"tool_calls": [WEATHER_LA]},
        "a call with `1e999` is left out: vLLM sends `Infinity`, which is no JSON",
    ),
    "vllm: mismatched brackets": ({"content": "[foo(x=1])]"}, TAG_CONTENT),
    "text before python_start": (
        {"content": "Sure. ", "tool_calls": [WEATHER_TOKYO]},
        CALL_AFTER_TEXT,
    ),
    "leading space before [": ({"content": None, "tool_calls": [WEATHER_TOKYO]}, CALL_AFTER_TEXT),
    "leading newline before [": (
        {"content": None, "tool_calls": [WEATHER_TOKYO]},
        CALL_AFTER_TEXT,
    ),
    "tool_choice none, python_start": (
        {"content": "Sure. [get_weather(city='Tokyo', days=3)]"},
        TAG_CONTENT,
    ),
    "tool_choice required": ({"content": "[get_weather(city='Tokyo', days=3)]"}, PY_LAX),
    "tool_choice required, python_start": ({"tool_calls": [WEATHER_TOKYO]}, PY_LAX),
    "tool_choice named": (
        {"content": "[get_weather(city='Tokyo', days=3)]", "tool_calls": []},
        PY_LAX,
    ),
    "text after call": (STREAM, PY_TRAIL),
    "text after python_end": (STREAM, PY_TRAIL),
    "truncated mid-value": (
        {"content": None, "tool_calls": [("get_weather", {"city": "Tok"})]},
        CUT,
    ),
    "truncated before ]": (STREAM, CUT),
    "truncated after first of two": (STREAM, CUT),
    "python_start block at EOS without ]": (STREAM, CUT),
    "markers as plain tokens": (
        {
            "content": "<|python_start|>[get_weather(city='Tokyo', days=3)]<|python_end|>",
            "tool_calls": [],
        },
        PLAIN_LLAMA,
    ),
    "other special tokens": ({"content": "ABC"}, SKIPPED_SPECIALS),
    "other special tokens, no tools": ({"content": "ABC"}, SKIPPED_SPECIALS),
}
DEVIATIONS["llama4_json"] = {
    "vllm: invalid json": (
        {"content": None, "tool_calls": [("invalidTool", "{}")]},
        "differences.md invalid-arguments: arguments are closed where they stop being JSON (`{` "
        "was out: `{}`); vLLM's whole response returns the text as content, its stream a call "
        'with arguments "" (not JSON)',
    ),
    "vllm: simple with text around": ({"content": "Here is the result: "}, AFTER_TEXT),
    "vllm: multiple json with surrounding text": (
        {"content": "Here are the results: "},
        AFTER_TEXT,
    ),
    "text before call": ({"content": "Let me check. "}, AFTER_TEXT),
    "tool_choice required, json array": ({"content": "["}, AFTER_TEXT + " (`[` is text)"),
    "vllm: brace in trailing text": (STREAM, STRAY_BRACE),
    "vllm: json fragment in trailing text": (STREAM, STRAY_BRACE),
    "truncated mid-value": (STREAM, CUT),
    "truncated python_tag mid-value": (STREAM, CUT),
    "python_tag without json": ({"content": "just text"}, TAG_CONTENT),
    "tool_choice none, python_tag": (
        {"content": 'Sure. {"name": "get_weather", "parameters": {"city": "Tokyo", "days": 3}}'},
        TAG_CONTENT,
    ),
    "markers as plain tokens": (
        {"content": "<|python_tag|>"},
        PLAIN_LLAMA + "; " + AFTER_TEXT,
    ),
    "other special tokens": ({"content": "ABC"}, SKIPPED_SPECIALS),
}
# Inkling, K2 Horizon, Muse (block_deviations.py).
FAMILIES.update({name: Family(*fam) for name, fam in BLOCK_FAMILIES.items()})
DEVIATIONS.update(BLOCK_DEVIATIONS)
# Granite 3.x, OLMo 3, Step-3, Hunyuan, ERNIE 4.5 (family_deviations.py).
DEVIATIONS.update(FAMILY_DEVIATIONS)
# Cohere Command A (cohere_deviations.py).
FAMILIES.update({name: Family(*fam) for name, fam in COHERE_FAMILIES.items()})
DEVIATIONS.update(COHERE_DEVIATIONS)
# The long tail: Phi-4-mini, InternLM2, Jamba, … (longtail_deviations.py).
FAMILIES.update({name: Family(*fam) for name, fam in LONGTAIL_FAMILIES.items()})
DEVIATIONS.update(LONGTAIL_DEVIATIONS)
# MiniCPM-V, MiniCPM5, the response-template parsers (minicpm_deviations.py).
FAMILIES.update({name: Family(*fam) for name, fam in MINICPM_FAMILIES.items()})
DEVIATIONS.update(MINICPM_DEVIATIONS)
# The same probe inputs, the same vLLM tool parser (qwen3_coder), the same answers.
DEVIATIONS["granite_thinking_parser"] = dict(DEVIATIONS["nemotron_v3"])

# differences.md swap-in-stream: with force_nonempty_content (or thinking off) an answer that wrote
# only reasoning is content in the whole response (as vLLM's); the stream cannot take back
# the reasoning it sent (vLLM's repeats it as content at the end, which means keeping all
# of it): our stream is the answer before the swap.
SWAPPED = frozenset(
    (
        "vllm: force_nonempty <think> only",
        "vllm: streaming promote <think>4",
        "granite: force newline-only no swap",
        "granite: force swap content absent",
        "force: reasoning only, truncated",
        "x: force truncated after </think>\\n",
    )
)
