"""Strict tool calling off (`lax`, `llama-lax`) with a forced tool choice: outputs vLLM's
guided decoding would never let through, and its stream of the constrained JSON.

Imports nothing of the project but its other `differences_*` modules: it is read by a
test that runs without vLLM or httpx.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.peer.differences.differences_base import Difference
from tests.peer.differences.differences_llama import PYTHON_TAG


def _lax_unconstrained(case: Any, diff: Any) -> bool:
    """Strict tool calling off, tool_choice "required" / named, and an output that is
    not the JSON those modes constrain generation to (DSML, prose, the other mode's
    JSON) — unreachable under vLLM's guided decoding. vLLM then drops it (required:
    content "", no call) or passes it verbatim as the named call's arguments; we parse
    the model's own format, and keep prose as content."""
    choice = case.request.get("tool_choice")
    forced = "json-named" if isinstance(choice, dict) else "json-required"
    if not (
        case.server in ("lax", "llama-lax")
        and (choice == "required" or isinstance(choice, dict))
        and case.extra.get("shape") not in (None, forced)
    ):
        return False
    field = re.sub(r"^\.choices\.\d+\.(message\.)?", "", diff.path)
    if field in ("content", "finish_reason"):
        # Ours keeps the text, never the markup.
        ours = json.dumps(diff.ours, ensure_ascii=False)
        return "｜DSML｜" not in ours and PYTHON_TAG not in ours
    return field.startswith("tool_calls") or field == "order"


def _lax_required_stream(case: Any, diff: Any) -> bool:
    """Strict tool calling off, tool_choice "required", the constrained JSON array
    streamed in small chunks: vLLM's streaming derender emits no tool call (and finish
    "stop"), while its whole response parses the same text into the call; we stream the
    call."""
    if not (
        case.stream
        and case.server == "lax"
        and case.request.get("tool_choice") == "required"
        and case.extra.get("shape") == "json-required"
    ):
        return False
    tail = diff.path.rsplit(".", 1)[-1]
    if tail == "finish_reason":
        return diff.vllm == ["stop"] and diff.ours == ["tool_calls"]
    if tail == "order":  # the same order, less vLLM's missing calls
        return diff.vllm == [x for x in diff.ours if not str(x).startswith("tool:")]
    return ".tool_calls." in diff.path and diff.vllm == "<absent>"


LAX: list[Difference] = [
    Difference(
        "lax-unconstrained-output",
        "Strict off, forced tool choice, output not the constrained JSON: vLLM drops it",
        _lax_unconstrained,
    ),
    Difference(
        "lax-required-stream",
        "Strict tool calling off, required, small chunks: vLLM streams no call (its bug)",
        _lax_required_stream,
    ),
]
