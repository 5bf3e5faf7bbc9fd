"""`derender-worker serve` against vLLM 0.33.0's own derender endpoints (`make parity`).

The DeepSeek V4 cases of the parity suite (`cases.build`, server `on`: both parsers) go,
as the same HTTP request bodies (`drive.run_vllm`), to one vLLM render server and to our
`serve` on real TCP; our answers also go through the Kafka path (`drive.run_ours`). The
normalisation is the replay parity's (`compare.compare`: ids, `created`, chunk
boundaries and null-vs-absent normalised away; `stream_state` is never compared). Ours
must differ from vLLM's only where the Kafka path does — which the parity suite holds to
the documented differences (`differences.py`) — except where `serve` has no `end` record
(`usage-at-end`: vLLM and `serve` send no usage the engine did not send).

Runs only with `-m peer` (it starts a vLLM server): under `make test` it is skipped.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.peer.cases import cases as C
from tests.peer.compare import STATUS_CODE, Diff, compare
from tests.peer.conftest import peer_selected
from tests.peer.drive import Case, OursResult, VllmResult, run_ours, run_vllm
from tests.peer.parity import Prompts
from worker.config import load_registry

pytestmark = pytest.mark.peer

REGISTRY = load_registry()
TOKENIZER = REGISTRY.models["deepseek-v4"].tokenizer
CASES = [c for c in C.build(TOKENIZER) if c.server == "on"]
# Differences of the Kafka path that `serve` does not have: no `end` record, so no usage
# is computed at the end (vLLM sends none either).
# `usage-at-end` needs an `end` record; `stream-opening` shows as separate chunks only on
# Kafka (`serve` joins a stream's opening to its first answer's delta).
KAFKA_ONLY = ("usage", "stream_opening")


@pytest.fixture(scope="module", autouse=True)
def _parity_only(request: pytest.FixtureRequest) -> None:
    if not peer_selected(request.config):
        pytest.skip("starts a vLLM server: `make parity` (pytest -m peer) only")


@pytest.fixture(scope="module")
def vllm_on(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.peer.vllm_server import SPECS, Peer, Running, Server

    if os.environ.get("DERENDER_PEER_SERVERS"):
        ports = dict(p.split("=") for p in os.environ["DERENDER_PEER_SERVERS"].split(","))
        server: Server | Running = Running("on", int(ports["on"]))
    else:
        server = Server(SPECS["on"], Path(tmp_path_factory.mktemp("serve-parity")))
        import time

        try:
            server.wait_ready(time.monotonic() + 600)
        except BaseException:
            server.stop()
            raise
    peer = Peer(server)
    yield peer
    peer.close()
    server.stop()


class _OurPeer:
    """`serve` over HTTP, with the Peer interface `run_vllm` drives."""

    def __init__(self, port: int) -> None:
        import httpx

        from tests.peer.vllm_server import Reply

        self._reply = Reply
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60.0)

    def post(self, path: str, body: dict[str, Any]) -> Any:
        r = self.http.post(path, json=body)
        return self._reply(r.status_code, r.json())


@pytest.fixture(scope="module")
def ours() -> Iterator[_OurPeer]:
    from tests.serve.conftest import LiveServer
    from worker.serve.app import build_app

    live = LiveServer(build_app(REGISTRY))
    peer = _OurPeer(live.port)
    yield peer
    peer.http.close()
    live.stop()


def as_outputs(case: Case, r: VllmResult) -> OursResult:
    """`serve`'s HTTP answers as the output records `compare` reads."""
    out = OursResult()
    out.outputs = [("chunk", c) for c in _openings_once(r.chunks)]
    if r.status != 200:
        err = dict(r.error["error"])
        err["code"] = STATUS_CODE.get(r.status, f"http-{r.status}")
        out.outputs.append(("error", {"error": err}))
    elif r.body is not None:
        out.outputs.append(("response", r.body))
    if case.stream:
        out.outputs.append(("done", "[DONE]"))
    return out


def _openings_once(chunks: list[Any]) -> list[Any]:
    """What docs/integrate/serve.md ("Streaming and `stream_state`") tells a client
    carrying one stream_state per choice (vLLM's way, as `run_vllm` drives it): each
    stream's first answer opens every choice, so it sends a choice's role once. A role
    already sent is taken out of later deltas, and an opening entry that says nothing else
    is left out."""
    seen: set[int] = set()
    out = []
    for chunk in chunks:
        choices = []
        for ch in chunk.get("choices") or []:
            delta = dict(ch.get("delta") or {})
            if delta.get("role") is not None and ch["index"] in seen:
                del delta["role"]
                says = delta.get("content") or len(delta) > 1
                if not says and ch.get("logprobs") is None and ch.get("finish_reason") is None:
                    continue
                ch = dict(ch, delta=delta)
            if delta.get("role") is not None:
                seen.add(ch["index"])
            choices.append(ch)
        if choices or not chunk.get("choices") or chunk.get("usage") is not None:
            out.append(dict(chunk, choices=choices))
    return out


def _paths(diffs: list[Diff]) -> set[str]:
    return {d.path for d in diffs}


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in CASES])
def test_serve_answers_as_the_pipeline_does_against_vllm(
    case: Case, vllm_on: Any, ours: _OurPeer
) -> None:
    prompts = _PROMPTS
    prompts.fill(case, vllm_on)
    v = run_vllm(vllm_on, case)
    assert v.status < 500, v.error
    s = run_vllm(ours, dataclasses.replace(case))  # type: ignore[arg-type]
    assert s.status < 500, s.error
    serve_diffs = compare(case, v, as_outputs(case, s))
    kafka_diffs = compare(case, v, run_ours(REGISTRY, case))
    extra = _paths(serve_diffs) - _paths(kafka_diffs)
    missing = {
        p
        for p in _paths(kafka_diffs) - _paths(serve_diffs)
        if not p.strip(".").startswith(KAFKA_ONLY)
    }
    report = "\n".join(d.show() for d in serve_diffs)
    assert not extra, f"{case.describe()}\nserve differs from vLLM beyond the pipeline:\n{report}"
    assert not missing, (
        f"{case.describe()}\nserve lacks the pipeline's differences {sorted(missing)}:\n{report}"
    )


_PROMPTS = Prompts()
