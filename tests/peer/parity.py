"""Run one case on both sides, compare, classify, and keep the session's tally."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.peer.compare import Diff, compare, compare_to_whole
from tests.peer.differences.differences import DIFFERENCES, PROPOSED, explain
from tests.peer.drive import Case, run_ours, run_vllm, served_model
from worker.core.model import Registry

if TYPE_CHECKING:
    from tests.peer.vllm_server import Peer

EQUAL, DOCUMENTED, FAILED = "equal", "documented", "failed"


@dataclass
class Outcome:
    case: Case
    status: str
    diffs: list[Diff]
    explained_by: list[str]
    unexplained: list[Diff]
    calls: int
    # Proposed (not accepted) differences that would explain some of `unexplained`,
    # and what even those leave unexplained.
    proposed: list[str] = field(default_factory=list)
    unexplained_by_any: list[Diff] = field(default_factory=list)
    decode: Callable[[list[int]], str] | None = None

    def report(self) -> str:
        lines = [self.case.describe(self.decode), ""]
        if self.explained_by:
            lines.append(f"documented differences also present: {', '.join(self.explained_by)}")
        lines.append(
            f"{len(self.unexplained)} difference(s) not documented (field path, vLLM, ours):"
        )
        lines += [d.show() for d in self.unexplained]
        if self.proposed:
            rest = len(self.unexplained_by_any)
            lines.append(
                f"proposed differences that would explain {len(self.unexplained) - rest} of "
                f"them: {', '.join(self.proposed)} (differences.PROPOSED)"
            )
        return "\n".join(lines)


@dataclass
class Recorded:
    """One recorded case run live (test_recorded.py): whether vLLM still answers it as
    recorded, and ours against that live answer (EQUAL; DOCUMENTED: a DEVIATIONS entry
    says what we answer instead; FAILED)."""

    family: str
    label: str
    live_equals_recorded: bool
    status: str
    calls: int
    report: str = ""


@dataclass
class Tally:
    outcomes: list[Outcome] = field(default_factory=list)
    recorded: list[Recorded] = field(default_factory=list)
    vllm_calls: int = 0
    log_dir: str | None = None

    def add(self, o: Outcome) -> None:
        self.outcomes.append(o)
        self.vllm_calls += o.calls

    def add_recorded(self, r: Recorded) -> None:
        self.recorded.append(r)

    def recorded_summary(self) -> dict[str, Any]:
        """Per family and over all: cases, vLLM calls, live == recorded, and ours equal /
        documented / failed."""

        def counts(rows: list[Recorded]) -> dict[str, int]:
            status = Counter(r.status for r in rows)
            return {
                "cases": len(rows),
                "vllm_http_calls": sum(r.calls for r in rows),
                "live_equals_recorded": sum(r.live_equals_recorded for r in rows),
                "equal": status[EQUAL],
                "documented": status[DOCUMENTED],
                "failed": status[FAILED],
            }

        families = dict.fromkeys(r.family for r in self.recorded)
        return {
            **counts(self.recorded),
            "families": {f: counts([r for r in self.recorded if r.family == f]) for f in families},
            "drifted_cases": [
                f"{r.family}:{r.label}" for r in self.recorded if not r.live_equals_recorded
            ],
            "failed_cases": [f"{r.family}:{r.label}" for r in self.recorded if r.status == FAILED],
        }

    def summary(self) -> dict[str, Any]:
        status = Counter(o.status for o in self.outcomes)
        per_id = Counter(i for o in self.outcomes for i in o.explained_by)
        proposed = Counter(i for o in self.outcomes for i in o.proposed)
        fail = [o for o in self.outcomes if o.status == FAILED]
        return {
            "requests": len(self.outcomes),
            "vllm_http_calls": self.vllm_calls,
            "equal": status[EQUAL],
            "documented": status[DOCUMENTED],
            "failed": status[FAILED],
            "differences": {d.id: per_id[d.id] for d in DIFFERENCES},
            "failed_explained_by_proposed": {d.id: proposed[d.id] for d in PROPOSED},
            "failed_unexplained_even_by_proposed": sum(1 for o in fail if o.unexplained_by_any),
            "failed_cases": [o.case.name for o in fail],
            **({"recorded": self.recorded_summary()} if self.recorded else {}),
        }

    def line(self) -> str:
        s = self.summary()
        lines = []
        if self.outcomes:
            ids = ", ".join(f"{k} {v}" for k, v in s["differences"].items())
            lines.append(
                f"parity vs vLLM 0.33.0: {s['requests']} requests ({s['vllm_http_calls']} vLLM "
                f"calls): {s['equal']} equal, {s['documented']} documented, {s['failed']} "
                f"failed; differences: {ids}"
            )
        if s["failed"]:
            prop = ", ".join(f"{k} {v}" for k, v in s["failed_explained_by_proposed"].items() if v)
            alone = s["failed_unexplained_even_by_proposed"]
            lines.append(
                f"  of the failed: {alone} not explained by any proposal; "
                f"proposals touching failures: {prop or 'none'}"
            )
        if self.recorded:
            r = s["recorded"]
            lines.append(
                f"recorded answers live on vLLM 0.33.0: {r['cases']} cases in "
                f"{len(r['families'])} families ({r['vllm_http_calls']} vLLM calls), "
                f"{r['live_equals_recorded']} answered as "
                f"recorded; ours {r['equal']} equal, {r['documented']} documented, "
                f"{r['failed']} failed"
            )
        return "\n".join(lines)

    def write(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "summary.json").write_text(json.dumps(self.summary(), indent=2) + "\n")
        with open(folder / "cases.jsonl", "w", encoding="utf-8") as f:
            for o in self.outcomes:
                row = {
                    "case": o.case.name,
                    "server": o.case.server,
                    "api": o.case.api,
                    "stream": o.case.stream,
                    "status": o.status,
                    "explained_by": o.explained_by,
                    "proposed": o.proposed,
                    "diffs": [
                        {
                            "path": d.path,
                            "vllm": d.vllm,
                            "ours": d.ours,
                            "documented": d not in o.unexplained,
                        }
                        for d in o.diffs
                    ],
                }
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        failed = [f"=== {o.case.name}\n{o.report()}" for o in self.outcomes if o.status == FAILED]
        failed += [
            f"=== recorded {r.family}:{r.label}\n{r.report}" for r in self.recorded if r.report
        ]
        (folder / "failures.txt").write_text("\n\n".join(failed) + "\n", encoding="utf-8")


class Prompts:
    """Prompt ids from vLLM's own render, once per distinct prompt."""

    def __init__(self) -> None:
        self.cache: dict[str, list[list[int]]] = {}

    def fill(self, case: Case, peer: Peer) -> None:
        if case.prompts is not None:
            return
        req = case.request
        model = served_model(case.server)
        if case.api == "chat":
            render = {"model": model, "messages": req["messages"]}
            for k in ("tools", "chat_template_kwargs"):
                if k in req:
                    render[k] = req[k]
            key = "chat:" + json.dumps(render, sort_keys=True)
            if key not in self.cache:
                self.cache[key] = [peer.render_chat(render)]
        else:
            render = {"model": model, "prompt": req["prompt"]}
            key = "completion:" + json.dumps(render, sort_keys=True)
            if key not in self.cache:
                self.cache[key] = peer.render_completion(render)
        case.prompts = self.cache[key]
        assert len(case.prompts) == len(case.outputs), (case.name, len(case.prompts))


def run_case(case: Case, peer: Peer, registry: Registry, prompts: Prompts, tally: Tally) -> Outcome:
    prompts.fill(case, peer)
    v = run_vllm(peer, case)
    if v.status >= 500:
        raise RuntimeError(
            f"vLLM server {case.server!r} failed (HTTP {v.status}) on {case.name}: {v.error}\n"
            f"{peer.server.log_tail()}"
        )
    o = run_ours(registry, case)
    diffs = compare(case, v, o)
    if case.stream and case.request.get("stop") and v.status == 400 and not o.of_kind("error"):
        # vLLM refuses to stream with `stop`: our cut must equal its whole response's.
        whole = run_vllm(peer, dataclasses.replace(case, stream=False))
        v.calls += whole.calls
        if whole.body is not None:
            diffs += compare_to_whole(case, whole.body, o)
    ids, unexplained = explain(case, diffs)
    proposed, rest = explain(case, unexplained, PROPOSED)
    status = EQUAL if not diffs else DOCUMENTED if not unexplained else FAILED
    tok = registry.models[registry.default].tokenizer
    outcome = Outcome(case, status, diffs, ids, unexplained, v.calls, proposed, rest)
    outcome.decode = lambda ids: tok.decode(ids, skip_special_tokens=False)
    tally.add(outcome)
    return outcome
