"""The o200k_harmony tokenizer.json rebuilt from quicktok-v1
(tests/support/vocab/tiktoken_convert.py) is gpt-oss's tokenizer: every id decodes to its rank's
bytes, ordinary text encodes as openai_harmony's encoding does, and the harmony framing tokens are
single special ids."""

from __future__ import annotations

import hashlib
import json
import random

import pytest
from tokenizers import Tokenizer

from tests.support.vocab import tiktoken_convert as tc

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return tc.gpt_oss_tokenizer()


@pytest.fixture(scope="module")
def enc():  # type: ignore[no-untyped-def]
    return tc.harmony_encoding()


@pytest.fixture(scope="module")
def ranks() -> list[bytes]:
    return tc.o200k_ranks()


def test_tiktoken_file_is_openais(ranks: list[bytes]) -> None:
    path = tc.o200k_base_tiktoken() / "o200k_base.tiktoken"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == tc.O200K_BASE_SHA256
    assert len(ranks) == tc.N_RANKS


def test_layout(tok: Tokenizer) -> None:
    assert tok.get_vocab_size() == tc.N_IDS == 201_088
    doc = json.loads(tc.gpt_oss_tokenizer_json().read_text(encoding="utf-8"))
    assert len(doc["model"]["merges"]) == 446_189
    assert doc["model"]["ignore_merges"] is True
    specials = {t["id"]: t for t in doc["added_tokens"]}
    assert sorted(specials) == list(range(199_998, 201_088))
    assert all(t["special"] for t in specials.values())


def test_every_id_decodes_to_its_bytes(tok: Tokenizer, ranks: list[bytes]) -> None:
    u2b = {c: b for b, c in tc._byte_to_unicode().items()}
    for i, raw in enumerate(ranks):
        token = tok.id_to_token(i)
        assert token is not None and bytes(u2b[c] for c in token) == raw, i
    decoded = tok.decode_batch([[i] for i in range(len(ranks))], skip_special_tokens=False)
    for i, (text, raw) in enumerate(zip(decoded, ranks, strict=True)):
        assert text == raw.decode("utf-8", errors="replace"), i
    # Multi-token sequences join bytes before UTF-8 decoding (split characters survive).
    rng = random.Random(7)
    seqs = [[rng.randrange(len(ranks)) for _ in range(rng.randint(2, 12))] for _ in range(2000)]
    for seq, text in zip(seqs, tok.decode_batch(seqs), strict=True):
        assert text == b"".join(ranks[i] for i in seq).decode("utf-8", errors="replace")


def _strings() -> list[str]:
    fixed = [
        "Hello, world! How's it going? I'm fine, you're great; they'll've DON'T WE'LL",
        "The quick brown fox jumps over the lazy dog. ÀÉÎÕÜ àéîõü ß Straße",
        "def f(x):\n    return x**2  # square\n\n\nclass A:\n\tpass\r\n",
        'const a = {"location": "Tokyo", "unit": "celsius"};\nconsole.log(a?.b ?? 42);',
        "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC LIMIT 10;",
        '{"name": "get_weather", "arguments": {"city": "東京", "days": [1, 2, 3]}}',
        "日本語のテキストです。東京は晴れ。中文文本，你好世界！한국어 텍스트입니다.",
        "😀 👍🏽 👨‍👩‍👧‍👦 🇯🇵 🇺🇸 1️⃣ #️⃣ 🏳️‍🌈 ❤️‍🔥",
        "   leading spaces\n\n\n   \t\t  trailing   \r\n\r\n  ",
        "1234567890 3.14159265358979 1,000,000 0x1F 1e-10 -42 +7 ١٢٣ ४५६",
        "مرحبا بالعالم שלום עולם नमस्ते दुनिया สวัสดีชาวโลก Привет, мир! Γειά σου",
        "e\u0301 a\u0308 n\u0303 ﬁ ﬀ Å Å",
        "====\n----\n    \n____ ーーー </</</ ...... !!!??? ***",
        "a" * 300,
        " " * 50 + "x",
        "\n" * 20,
        "CamelCaseIdentifier snake_case_name kebab-case-name SCREAMING_CASE",
        "https://example.com/path?q=1&r=2#frag user@example.org",
        '<div class="a">text</div><br/> <|not a special|> <|start',
        "tab\tseparated\tvalues\n1\t2\t3",
        "",
        "x",
        "'s 's 'S 'LL 'll'd'm",
    ]
    rng = random.Random(1)
    alphabet = (
        list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        + list(" \t\n\r  .,;:!?'\"()[]{}<>/\\|-_=+*&^%$#@~`")
        + list("日本語中文한국어テキストàéüßñçøЖжΩωعربيहिंदीไทย")
        + ["😀", "👍🏽", "👨‍👩‍👧", "🇯🇵", "\u0301", "\u200d", "\ufeff", "\u00a0"]
    )
    words = " ".join(fixed).split()
    out = list(fixed)
    for _ in range(150):
        out.append("".join(rng.choice(alphabet) for _ in range(rng.randint(1, 60))))
    for _ in range(100):
        sep = rng.choice([" ", "  ", "\n", " \n", "\t", ""])
        out.append(sep.join(rng.choice(words) for _ in range(rng.randint(1, 25))))
    for _ in range(50):
        cps = [rng.randint(0x20, 0x10FFFF) for _ in range(rng.randint(1, 20))]
        out.append("".join(chr(c) for c in cps if not 0xD800 <= c <= 0xDFFF))
    return out


STRINGS = _strings()


def test_encodes_like_openai_harmony(tok: Tokenizer, enc) -> None:  # type: ignore[no-untyped-def]
    assert len(STRINGS) >= 300
    ours = tok.encode_batch(STRINGS, add_special_tokens=False)
    for text, got in zip(STRINGS, ours, strict=True):
        want = enc.encode(text, allowed_special=set(), disallowed_special=())
        assert got.ids == want, text


@pytest.mark.parametrize(("name", "token_id"), sorted(tc.HARMONY_SPECIALS.items()))
def test_framing_tokens_are_single_special_ids(
    tok: Tokenizer,
    enc,  # type: ignore[no-untyped-def]
    name: str,
    token_id: int,
) -> None:
    assert tok.token_to_id(name) == token_id
    assert tok.id_to_token(token_id) == name
    assert tok.encode(f"ab{name}cd", add_special_tokens=False).ids[1:-1] == [token_id]
    assert tok.decode([token_id], skip_special_tokens=True) == ""
    assert tok.decode([token_id], skip_special_tokens=False) == name
    assert enc.is_special_token(token_id)
    if name == "<|endofprompt|>":
        # openai_harmony names 200018 <|reserved_200018|> and has no <|endofprompt|>.
        assert enc.encode("<|reserved_200018|>", allowed_special="all") == [token_id]
    else:
        assert enc.encode(name, allowed_special="all") == [token_id]


def test_harmony_message_encodes_like_openai_harmony(tok: Tokenizer, enc) -> None:  # type: ignore[no-untyped-def]
    text = (
        "<|channel|>analysis<|message|>User asks about the weather.<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
        '<|message|>{"location":"Tokyo"}<|call|>'
    )
    ids = tok.encode(text, add_special_tokens=False).ids
    assert ids == enc.encode(text, allowed_special="all")
    assert tok.decode(ids, skip_special_tokens=False) == text


def test_reserved_ids_match_openai_harmony(tok: Tokenizer, enc) -> None:  # type: ignore[no-untyped-def]
    for token_id in (200000, 200001, 200004, 200013, 200017, 200019, 201087):
        name = f"<|reserved_{token_id}|>"
        assert tok.token_to_id(name) == token_id
        assert enc.encode(name, allowed_special="all") == [token_id]
        assert enc.decode([token_id]) == name
