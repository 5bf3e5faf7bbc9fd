"""`derender-worker replay` of the input topic: the outputs a run must equal, and the
digest of the code that both ran."""

from __future__ import annotations

import contextlib
import json
import subprocess
from pathlib import Path

import msgspec

from tests.autoscale.checks.topics import InputRecord
from tests.autoscale.config import ROOT, VENV_BIN
from worker.constants import H_PART, H_REQUEST_ID, H_SEQ


class ReplayLine(msgspec.Struct):
    key: str | None
    headers: dict[str, str]
    value: msgspec.Raw  # the output's JSON, or a JSON string ("[DONE]", a dead letter)


def replay_expected(records: list[InputRecord], folder: Path) -> dict[tuple[str, str, str], bytes]:
    """`derender-worker replay` of the input records: {(request_id, seq, part): bytes}, in
    a dict ordered as replay published them."""
    src = folder / "replay.in.jsonl"
    dst = folder / "replay.out.jsonl"
    with open(src, "wb") as f:
        for r in records:
            env = {"key": r.key, "value": r.value.decode(), "timestamp": r.timestamp}
            f.write(json.dumps(env, ensure_ascii=False).encode() + b"\n")
    subprocess.run(
        [str(VENV_BIN / "derender-worker"), "replay", str(src), "-o", str(dst), "--quiet"],
        check=True,
        cwd=ROOT,
    )
    decoder = msgspec.json.Decoder(ReplayLine)
    out: dict[tuple[str, str, str], bytes] = {}
    with open(dst, "rb") as f:
        for line in f:
            rl = decoder.decode(line)
            raw = bytes(rl.value)
            value = msgspec.json.decode(raw).encode() if raw.startswith(b'"') else raw
            key = (rl.headers[H_REQUEST_ID], rl.headers[H_SEQ], rl.headers[H_PART])
            out[key] = value
    return out


def code_hash() -> str:
    """A digest of worker/'s sources: the run's workers and its replay must run the same
    code (a shared working tree can change under a run)."""
    import hashlib

    h = hashlib.sha256()
    for path in sorted((ROOT / "worker").rglob("*.py")):
        h.update(str(path.relative_to(ROOT)).encode())
        with contextlib.suppress(OSError):
            h.update(path.read_bytes())
    return h.hexdigest()[:12]
