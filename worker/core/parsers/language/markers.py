"""Marker literals that more than one format writes: a tool block's opener that a
reasoning format names as an implicit end of reasoning, the think tags most formats
share, and the pieces Kimi K3's XTML markers are made of.
"""

THINK, END_THINK = "<think>", "</think>"
QWEN_TOOL_CALL = "<tool_call>"  # Qwen3 XML, hermes, GLM
DSML_V4_BLOCK = "<｜DSML｜tool_calls>"
DSML_V4_VARIANTS = ("<｜DSML｜toolcalls>", "<｜DSML｜tool>")  # seen in production (vLLM 0.33)
DSML_V41_BLOCK = "<｜DSML｜ calls>"
KIMI_SECTION = "<|tool_calls_section_begin|>"
MISTRAL_TOOL_CALLS = "[TOOL_CALLS]"
MINIMAX_TOOL_CALL = "<minimax:tool_call>"
# Kimi K3's XTML: every marker is `<|open|>` / `<|close|>` + a name (+ attributes) +
# `<|sep|>` (vLLM 0.33.0 vllm/parser/kimi_k3.py).
XTML_OPEN, XTML_CLOSE, XTML_SEP = "<|open|>", "<|close|>", "<|sep|>"
