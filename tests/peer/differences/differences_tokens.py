"""Differences about tokens of any model: which special tokens a decode skips, and the
logprobs (hidden reasoning's, a token inside a character).

Imports nothing of the project but its other `differences_*` modules: it is read by a
test that runs without vLLM or httpx.
"""

from __future__ import annotations

import re
from typing import Any

from tests.peer.differences.differences_base import Difference
from tests.peer.differences.differences_families import LEGACY_FAMILY_SERVERS
from tests.peer.differences.differences_gptoss import GPTOSS_SERVERS
from tests.peer.differences.differences_llama import LLAMA_SPECIAL, llama_tools_chat
from tests.peer.differences.differences_m3 import M3_SERVER


def special_skip_set(case: Any, diff: Any) -> bool:
    """`skip_special_tokens` (and the parser path, which always drops specials):
    vLLM's derender decodes with its slow incremental path, which skips only the
    tokenizer's named specials (BOS, EOS), so other special added tokens
    (`<｜▁pad▁｜>`, placeholders) stay in the text; vLLM's own engine (tokenizers'
    DecodeStream) and we skip every token tokenizer.json marks special."""
    req = case.request
    if not (
        diff.path.rsplit(".", 1)[-1] in ("text", "content")
        and isinstance(diff.vllm, str)
        and isinstance(diff.ours, str)
    ):
        return False
    if case.server in (*LEGACY_FAMILY_SERVERS, M3_SERVER):
        # The same with hermes (Qwen3), minimax_m2_append_think (MiniMax M2) and MiniMax
        # M3's parsers (chat; its completions are the slow path above), whose paths drop
        # no special token either: ours is vLLM's text less exactly the special tokens of
        # the output (`cases_families.mark_specials` lists their texts).
        found = [t for t in case.extra.get("specials", ()) if t in diff.vllm]
        rest = diff.vllm
        for t in found:
            rest = rest.replace(t, "")
        return bool(found) and rest == diff.ours
    if case.server in GPTOSS_SERVERS:
        # gpt-oss completions (a chat answer is read from the ids by the Harmony parser):
        # vLLM drops only the tokenizer's named specials (<|startoftext|>, <|return|>,
        # <|endoftext|>) and keeps the framing markers (<|channel|>, <|message|>, …) and
        # reserved tokens; ours is vLLM's text less exactly the special tokens it kept.
        if case.api != "completion":
            return False
        found = [t for t in case.extra.get("specials", ()) if t in diff.vllm]
        rest = diff.vllm
        for t in found:
            rest = rest.replace(t, "")
        return bool(found) and rest == diff.ours
    if case.server.startswith("llama-"):
        # Llama's legacy llama3_json parser drops nothing: with it vLLM's text keeps every
        # special token (BOS and EOS too). Ours is vLLM's text less exactly those tokens.
        skipping = llama_tools_chat(case) or req.get("skip_special_tokens", True) is not False
        return (
            skipping
            and LLAMA_SPECIAL.search(diff.vllm) is not None
            and LLAMA_SPECIAL.sub("", diff.vllm) == diff.ours
        )
    # With a parser vLLM decodes with specials kept and its parser drops BOS and EOS
    # only; ours drops every special token that is not a marker.
    skipping = case.server != "off" or req.get("skip_special_tokens", True) is not False
    return skipping and len(diff.ours) < len(diff.vllm) and "<｜" in diff.vllm


def hidden_reasoning_logprobs(case: Any, diff: Any) -> bool:
    """`include_reasoning: false` with logprobs: vLLM drops every logprob (and token id)
    of the choice; we drop those of the reasoning tokens only, so the answer's stay."""
    return (
        case.request.get("include_reasoning") is False
        and diff.path.endswith(".logprobs")
        and diff.vllm is None
        and isinstance(diff.ours, list)
    )


_FFFD = "\ufffd"
_FFFD_BYTES = [239, 191, 189]


def logprob_char_inside(case: Any, diff: Any) -> bool:
    """A logprob token that starts with the last bytes of a character the previous token
    began and goes on (byte-level BPE: `Ńå·ŀ` = the end of 杭 + 州): vLLM repairs only a
    U+FFFD at a token's end, so it says `�州`; ours is what the text grew by, `杭州`
    (the first token, holding the character's first bytes, is `""` on both sides)."""
    v, o = diff.vllm, diff.ours
    if re.search(r"\.logprobs\[\d+\](\.top_logprobs\[\d+\])?\.token$", diff.path):
        return _char_inside(v, o)
    if re.search(r"\.logprobs\[\d+\](\.top_logprobs\[\d+\])?\.bytes$", diff.path):
        return (
            isinstance(v, list)
            and isinstance(o, list)
            and v[:3] == _FFFD_BYTES
            and len(o) > len(v) - 3
            and o[len(o) - len(v) + 3 :] == v[3:]
        )
    # Completion logprobs: the token list, and a position's candidates (text → logprob).
    if diff.path.endswith(".logprobs.tokens"):
        return _pairwise(v, o)
    if re.search(r"\.logprobs\.top_logprobs\[\d+\]$", diff.path):
        return (
            isinstance(v, dict)
            and isinstance(o, dict)
            and list(v.values()) == list(o.values())
            and _pairwise(list(v), list(o))
        )
    return False


def _char_inside(v: Any, o: Any) -> bool:
    return (
        isinstance(v, str)
        and isinstance(o, str)
        and v.startswith(_FFFD)
        and _FFFD not in o
        and len(o) > len(v) - 1
        and o.endswith(v[1:])
    )


def _pairwise(v: Any, o: Any) -> bool:
    """Two token-text lists that differ, and only where vLLM says `�…` for our char."""
    if not (isinstance(v, list) and isinstance(o, list) and len(v) == len(o) and v != o):
        return False
    return all(a == b or _char_inside(a, b) for a, b in zip(v, o, strict=True))


SPECIAL_SKIP_SET = Difference(
    "special-skip-set",
    "skip_special_tokens / parser path: vLLM's derender keeps special tokens we drop",
    special_skip_set,
)

HIDDEN_REASONING_LOGPROBS = Difference(
    "hidden-reasoning-logprobs",
    "include_reasoning false: vLLM drops all logprobs; we drop the reasoning tokens' only",
    hidden_reasoning_logprobs,
)

LOGPROB_CHAR_INSIDE = Difference(
    "logprob-char-inside",
    "Logprob token ending a split character and going on: vLLM says `�…`; we give the char",
    logprob_char_inside,
)
