"""Record vLLM's registered reasoning and tool parser names into
`tests/core/parsers/vllm_registry.json` (checked by tests/core/parsers/test_registry_names.py).

Run with the peer venv's python (tests/peer/setup_peer.sh makes it), from the repository:

    ~/.cache/derender-peer/venv/bin/python tests/peer/recorded/record_registry.py

It asks vLLM's own managers (`ReasoningParserManager.list_registered()`,
`ToolParserManager.list_registered()`: eagerly and lazily registered names), so the file is what
`--reasoning-parser` / `--tool-call-parser` accept in that vLLM, not a list copied by hand.
Only the standard library and vLLM are imported: it runs in the peer venv, not the project's.
"""

from __future__ import annotations

import importlib.metadata
import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "core" / "parsers" / "vllm_registry.json"


def main() -> int:
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager

    record = {
        "vllm": importlib.metadata.version("vllm"),
        "command": "~/.cache/derender-peer/venv/bin/python tests/peer/recorded/record_registry.py",
        # Eagerly and lazily registered names alike (what the CLI flags accept).
        "reasoning": ReasoningParserManager.list_registered(),
        "tool": ToolParserManager.list_registered(),
    }
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    print(
        f"{OUT}: vllm {record['vllm']}, {len(record['reasoning'])} reasoning, "
        f"{len(record['tool'])} tool parser names"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
