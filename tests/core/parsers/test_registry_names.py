"""The registry accepts exactly vLLM 0.33.0's parser names.

A vLLM user moves to the worker by copying `--reasoning-parser` / `--tool-call-parser` into
the model registry, so every name vLLM registers must be accepted, and no name vLLM would
refuse (a name we accept that vLLM does not is a config that works here and nowhere else).

`vllm_registry.json` is recorded from vLLM's own `ReasoningParserManager` /
`ToolParserManager` in the peer venv by `tests/peer/recorded/record_registry.py` (the command is in
the file, under "command").

`NOT_YET` lists the names still missing while they land family by family: remove a
name when its family lands. The test also fails when a NOT_YET name is accepted, so the
list cannot go stale.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worker.core.parsers import REASONING_FORMATS, TOOL_FORMATS

RECORD = json.loads((Path(__file__).parent / "vllm_registry.json").read_text())

ACCEPTED = {"reasoning": set(REASONING_FORMATS), "tool": set(TOOL_FORMATS)}

# (registry, name): registered by vLLM 0.33.0, not accepted yet. One per line, so that
# each family's change removes its own lines.
NOT_YET: set[tuple[str, str]] = set()


def test_record_is_vllm_0_33_0() -> None:
    assert RECORD["vllm"] == "0.33.0"
    assert "record_registry.py" in RECORD["command"]
    # vLLM 0.33.0's registries are this size; a smaller file is a bad recording.
    assert (len(RECORD["reasoning"]), len(RECORD["tool"])) == (42, 58)


@pytest.mark.parametrize("registry", ["reasoning", "tool"])
def test_every_vllm_name_is_accepted(registry: str) -> None:
    missing = {n for n in RECORD[registry] if n not in ACCEPTED[registry]}
    missing -= {n for (r, n) in NOT_YET if r == registry}
    assert not missing, f"vLLM registers {registry} parsers we refuse: {sorted(missing)}"


@pytest.mark.parametrize("registry", ["reasoning", "tool"])
def test_no_name_vllm_refuses(registry: str) -> None:
    extra = ACCEPTED[registry] - set(RECORD[registry])
    assert not extra, f"we accept {registry} parsers vLLM 0.33.0 does not: {sorted(extra)}"


def test_not_yet_is_current() -> None:
    # A name that landed must leave NOT_YET; a name vLLM does not register never belongs.
    landed = {(r, n) for (r, n) in NOT_YET if n in ACCEPTED[r]}
    assert not landed, f"accepted now, remove from NOT_YET: {sorted(landed)}"
    unknown = {(r, n) for (r, n) in NOT_YET if n not in RECORD[r]}
    assert not unknown, f"not registered by vLLM 0.33.0: {sorted(unknown)}"
