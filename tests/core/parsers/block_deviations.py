"""The typed-block families' entries of test_vllm_answers.py: Inkling (row 21).

Answers probed 2026-12-02 from vLLM 0.33.0's render server (`--reasoning-parser inkling
--tool-call-parser inkling`) on the `inkling` folder of `tests/peer/recorded_blocks.py`:
`inkling_tokenizer()` (Qwen3 vocabulary + Inkling's block tokens); Inkling blocks, the
prompt ending `<|message_model|>` (`chat_template_kwargs.prefill` opens a thinking or text
block too); Qwen3ForCausalLM; EOS `<|endoftext|>`.
"""

from __future__ import annotations

from typing import Any

from tests.synthetic_inkling import inkling_tokenizer

# family → (reasoning parser, tool parser, tokenizer, EOS id), as test_vllm_answers.Family.
BLOCK_FAMILIES: dict[str, tuple[Any, ...]] = {
    "inkling": ("inkling", "inkling", inkling_tokenizer, 151643),
}

STREAM = "stream"  # test_vllm_answers.STREAM: we give vLLM's streamed answer
PREFILL = (
    "README inkling-prefill: vLLM's whole response ignores the block the prompt opened "
    "(its stream reads it, as its parser's prompt scan says); we read it in both"
)
OPEN_THINKING = (
    "README inkling-open-thinking: vLLM shows the markers after an unclosed thinking block "
    "as reasoning text; we read them as the header / block they open"
)
BLOCK_DEVIATIONS: dict[str, dict[str, tuple[str | dict[str, Any], str]]] = {
    "inkling": {
        "prefill thinking": (STREAM, PREFILL),
        "prefill thinking, call": (STREAM, PREFILL),
        "truncated mid-args": (
            {"tool_calls": [("get_weather", {"city": "Tok"})]},
            "README unclosed-value: vLLM sends the cut arguments as written (no JSON); we "
            "close them where the output stopped",
        ),
        "model marker inside thinking": ({"reasoning": "r", "content": "a"}, OPEN_THINKING),
        "text marker inside thinking": ({"reasoning": "r", "content": "a"}, OPEN_THINKING),
    },
}
