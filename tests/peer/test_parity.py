"""Our derender against vLLM 0.33.0's, case by case (`make parity`).

Every case is sent to the matching vLLM render server and, as ChunkRecords, through our
pipeline; the normalised answers must be equal, or differ only in documented ways
(`differences/`). A case that differs otherwise fails with the field paths and both
values. The random cases of the hypothesis tests are built in hypothesis_cases.py and
hypothesis_gptoss_m3.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, seed, settings

from tests.peer.cases import cases as C
from tests.peer.cases.families import cases_families as F
from tests.peer.cases.gptoss import cases_gptoss as G
from tests.peer.cases.llama import cases_llama as L
from tests.peer.cases.minimax_m3 import cases_minimax_m3 as M
from tests.peer.drive import Case
from tests.peer.hypothesis_cases import (
    FAMILY_SETTINGS,
    GPTOSS,
    LLAMA,
    M3,
    SEED_FAMILIES,
    SEED_GPTOSS,
    SEED_M3,
    SEED_SHARED,
    SETTINGS,
    TOKENIZER,
    conversations,
    family_conversations,
    llama_conversations,
    llama_plain,
    plain_outputs,
)
from tests.peer.hypothesis_gptoss_m3 import GPTOSS_SETTINGS, gptoss_conversations, m3_conversations
from tests.peer.parity import FAILED, Outcome, Prompts, Tally, run_case

pytestmark = pytest.mark.peer


CASES = C.build(TOKENIZER) + L.build(LLAMA) + F.build_all() + G.build(GPTOSS) + M.build(M3)


def _check(case: Case, peers: Any, registries: Any, prompts: Prompts, tally: Tally) -> Outcome:
    return run_case(case, peers[case.server], registries[case.server], prompts, tally)


@pytest.mark.parametrize(
    "case", [pytest.param(c, id=c.name, marks=pytest.mark.servers(c.server)) for c in CASES]
)
def test_case(case: Case, peers: Any, registries: Any, prompts: Prompts, tally: Tally) -> None:
    outcome = _check(case, peers, registries, prompts, tally)
    if outcome.status == FAILED:
        pytest.fail(outcome.report(), pytrace=False)


def _run_examples(
    strategy: Any,
    label: str,
    peers: Any,
    registries: Any,
    prompts: Prompts,
    tally: Tally,
    examples: settings = SETTINGS,
    pinned_seed: int = SEED_SHARED,
) -> None:
    """Each example of `strategy` is one case, `{label}-1`, `{label}-2`, …; those that
    differ are reported together at the end."""
    failures: list[Outcome] = []
    count = [0]

    @seed(pinned_seed)
    @examples
    @given(strategy)
    def one(case: Case) -> None:
        count[0] += 1
        case.name = f"{label}-{count[0]}"
        outcome = _check(case, peers, registries, prompts, tally)
        if outcome.status == FAILED:
            failures.append(outcome)

    one()
    _report_examples(failures, count[0])


def _report_examples(failures: list[Outcome], count: int) -> None:
    if failures:
        shown = "\n\n".join(f"--- {o.case.name}\n{o.report()}" for o in failures[:8])
        more = (
            f"\n\n(+{len(failures) - 8} more in .parity/failures.txt)" if len(failures) > 8 else ""
        )
        pytest.fail(f"{len(failures)} of {count} examples differ:\n\n{shown}{more}", pytrace=False)


@pytest.mark.servers("on")
def test_hypothesis_conversations(
    peers: Any, registries: Any, prompts: Prompts, tally: Tally
) -> None:
    _run_examples(conversations(), "hypothesis-conversation", peers, registries, prompts, tally)


@pytest.mark.servers("off")
def test_hypothesis_plain(peers: Any, registries: Any, prompts: Prompts, tally: Tally) -> None:
    _run_examples(plain_outputs(), "hypothesis-plain", peers, registries, prompts, tally)


@pytest.mark.servers(*L.TOOL_SERVERS)
def test_hypothesis_llama_conversations(
    peers: Any, registries: Any, prompts: Prompts, tally: Tally
) -> None:
    _run_examples(llama_conversations(), "hypothesis-llama", peers, registries, prompts, tally)


@pytest.mark.servers("llama-off")
def test_hypothesis_llama_plain(
    peers: Any, registries: Any, prompts: Prompts, tally: Tally
) -> None:
    _run_examples(llama_plain(), "hypothesis-llama-plain", peers, registries, prompts, tally)


@pytest.mark.parametrize(
    "fam",
    [
        pytest.param(fam, id=fam.prefix, marks=pytest.mark.servers(*(s.name for s in fam.servers)))
        for fam in F.FAMILIES
    ],
)
def test_hypothesis_families(
    fam: F.Family, peers: Any, registries: Any, prompts: Prompts, tally: Tally
) -> None:
    _run_examples(
        family_conversations(fam),
        f"hypothesis-{fam.prefix}",
        peers,
        registries,
        prompts,
        tally,
        examples=FAMILY_SETTINGS,
        pinned_seed=SEED_FAMILIES,
    )


@pytest.mark.servers(*G.SERVERS)
def test_hypothesis_gptoss(peers: Any, registries: Any, prompts: Prompts, tally: Tally) -> None:
    _run_examples(
        gptoss_conversations(),
        "hypothesis-gptoss",
        peers,
        registries,
        prompts,
        tally,
        examples=GPTOSS_SETTINGS,
        pinned_seed=SEED_GPTOSS,
    )


@pytest.mark.servers(M.SERVER)
def test_hypothesis_minimax_m3(peers: Any, registries: Any, prompts: Prompts, tally: Tally) -> None:
    _run_examples(
        m3_conversations(),
        "hypothesis-minimax_m3",
        peers,
        registries,
        prompts,
        tally,
        examples=SETTINGS,
        pinned_seed=SEED_M3,
    )
