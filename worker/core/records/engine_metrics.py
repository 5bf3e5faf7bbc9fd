"""A generate output's `metrics`, in the full shape vLLM 0.33 answers with.

vLLM's derender reads `metrics` into its pydantic `PerRequestMetrics`
(vllm/entrypoints/generate/base/protocol.py, 0.33.0) and writes the model back, so a
client gets every field, `null` when the engine did not say it, whatever the engine sent:

    time_to_first_token_ms, generation_time_ms, queue_time_ms, mean_itl_ms,
    tokens_per_second: float | None = None
    speculative_decoding: SpeculativeDecodingMetrics | None = None

    SpeculativeDecodingMetrics:
      mean_acceptance_length, draft_acceptance_rate: float   (required)
      acceptance_histogram: list[int]                        (required)
      num_spec_steps, num_accepted_draft_tokens, num_draft_tokens,
      num_spec_tokens: int                                   (required)
      per_step_accepted, per_step_drafted: list[int] | None = None

Both models take unknown keys (`extra="allow"`) and write them after their own fields, in
the order they came. Values are converted as pydantic's lax mode converts them (an int or
a numeric string becomes a float, `true` 1.0; an integral float or numeric string an int);
anything else, or a required field missing, is the request's error (vLLM: 400).
"""

from __future__ import annotations

import math
from typing import Any

from worker.core.errors import DerenderError

TIMINGS = (
    "time_to_first_token_ms",
    "generation_time_ms",
    "queue_time_ms",
    "mean_itl_ms",
    "tokens_per_second",
)
SPECULATIVE = "speculative_decoding"
SPEC_FLOATS = ("mean_acceptance_length", "draft_acceptance_rate")
SPEC_INTS = ("num_spec_steps", "num_accepted_draft_tokens", "num_draft_tokens", "num_spec_tokens")
SPEC_HISTOGRAM = "acceptance_histogram"
SPEC_PER_STEP = ("per_step_accepted", "per_step_drafted")


class _Invalid(Exception):
    pass


def full_metrics(metrics: dict[str, Any] | None, param: str) -> dict[str, Any] | None:
    """`metrics` as vLLM 0.33 writes it back; None stays None. `param` names the field
    in an error (`generate_response.metrics`)."""
    if metrics is None:
        return None
    out: dict[str, Any] = {}
    path = param
    try:
        for key in TIMINGS:
            path = f"{param}.{key}"
            out[key] = _optional(metrics.get(key), _float)
        path = f"{param}.{SPECULATIVE}"
        out[SPECULATIVE] = _optional(metrics.get(SPECULATIVE), _speculative)
    except _Invalid as exc:
        where = f"{path}.{exc}" if str(exc) else path
        raise DerenderError(
            f"{where}: not of vLLM's PerRequestMetrics shape", param=param
        ) from None
    out.update((k, v) for k, v in metrics.items() if k not in out)
    return out


def _optional(value: Any, convert: Any) -> Any:
    return None if value is None else convert(value)


def _speculative(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Invalid("")
    out: dict[str, Any] = {}
    for keys, convert in ((SPEC_FLOATS, _float), ((SPEC_HISTOGRAM,), _ints), (SPEC_INTS, _int)):
        for key in keys:
            if value.get(key) is None:  # required
                raise _Invalid(key)
            out[key] = _field(key, value[key], convert)
    for key in SPEC_PER_STEP:
        out[key] = _field(key, value.get(key), lambda v: _optional(v, _ints))
    out.update((k, v) for k, v in value.items() if k not in out)
    return out


def _field(key: str, value: Any, convert: Any) -> Any:
    try:
        return convert(value)
    except _Invalid:
        raise _Invalid(key) from None


def _float(value: Any) -> float:
    if isinstance(value, bool | int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise _Invalid("") from None
    else:
        raise _Invalid("")
    if not math.isfinite(number):  # JSON has no such number to write back
        raise _Invalid("")
    return number


def _int(value: Any) -> int:
    number = _float(value) if not isinstance(value, int) else value
    if isinstance(number, float):
        if not number.is_integer():
            raise _Invalid("")
        return int(number)
    return int(number)


def _ints(value: Any) -> list[int]:
    if not isinstance(value, list):
        raise _Invalid("")
    return [_int(v) for v in value]
