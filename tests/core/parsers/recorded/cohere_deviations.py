"""Cohere Command A in test_vllm_answers.py: the two recorded families and the places
where our answer differs from vLLM 0.33.0's whole answer, each with its reason
(docs/reference/differences.md names them).

cohere_command3, cohere_command4 (that reasoning and tool parser; recorded 2026-12-02 by
`tests/peer/probes/probe_cohere.py`): `synthetic_cohere.cohere_tokenizer()`; Command A's turns
(tests/peer/templates/cohere.jinja); Cohere2ForCausalLM; EOS `<|END_OF_TURN_TOKEN|>`.
"""

from __future__ import annotations

from typing import Any

from tests.support.vocab.synthetic_cohere import cohere_tokenizer

EOS = 151673  # <|END_OF_TURN_TOKEN|>

COHERE_FAMILIES: dict[str, tuple[Any, ...]] = {
    "cohere_command3": ("cohere_command3", "cohere_command3", cohere_tokenizer, EOS),
    "cohere_command4": ("cohere_command4", "cohere_command4", cohere_tokenizer, EOS),
}

EMPTY_ARGS = (
    'differences.md cohere-empty-arguments: melody sends no argument text for `"parameters": {}` '
    '(or none written), so vLLM\'s arguments are "" (no JSON); ours are {}'
)
CUT_ARGS = (
    'differences.md unclosed-value: vLLM sends the cut arguments as written (`{"city": "Tok`, no '
    "JSON); we close them where the output stopped"
)
SPECIALS = (
    "differences.md special-skip-set: vLLM's derender keeps special tokens once a parser is set; "
    "we drop them"
)
WEATHER = ("get_weather", {"city": "Paris", "days": 3})
_COMMON: dict[str, tuple[str | dict[str, Any], str]] = {
    "two calls": ({"tool_calls": [WEATHER, ("get_current_date", {})]}, EMPTY_ARGS),
    "empty parameters": ({"tool_calls": [("get_current_date", {})]}, EMPTY_ARGS),
    "truncated after name": ({"tool_calls": [("get_weather", {})]}, EMPTY_ARGS),
    "truncated mid-value": ({"tool_calls": [("get_weather", {"city": "Tok"})]}, CUT_ARGS),
    "other special tokens": ({"content": "AB"}, SPECIALS),
}
COHERE_DEVIATIONS: dict[str, dict[str, tuple[str | dict[str, Any], str]]] = {
    "cohere_command3": {
        **_COMMON,
        # cmd3 has no <|START_TEXT|> marker: special tokens, dropped as any other.
        "text markers are no markers": ({"content": "Hello."}, SPECIALS),
    },
    "cohere_command4": dict(_COMMON),
}
