"""Build the engine's model folder: a tiny random-weight Llama that speaks through the real
DeepSeek V4 tokenizer. Run by tests/e2e/setup_engine.sh with the engine venv's python
(torch, transformers): `make_model.py TOKENIZER_DIR OUT_DIR`.

Every weight comes from one seeded generator, so the folder is the same on every machine and
greedy decoding gives the same tokens. The embeddings are untied: with the input embedding as
the output head, a random model only repeats the prompt's last token.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM

SEED = 1234
VOCAB = 129280  # DeepSeek V4's vocabulary, added tokens included
BOS, EOS = 0, 1

# A DeepSeek-style chat template: the role tokens, tools in a system block, the assistant's
# turn closed by EOS, and `<think>` at the end of the prompt when enable_thinking is set
# (vLLM's deepseek_v3 reasoning parser then starts in reasoning).
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{%- for m in messages -%}"
    "{%- if m['role'] == 'system' -%}{{ m['content'] }}"
    "{%- elif m['role'] == 'user' -%}<｜User｜>{{ m['content'] }}"
    "{%- elif m['role'] == 'assistant' -%}"
    "<｜Assistant｜>{{ m['content'] or '' }}<｜end▁of▁sentence｜>"
    "{%- elif m['role'] == 'tool' -%}"
    "<｜tool▁output▁begin｜>{{ m['content'] }}<｜tool▁output▁end｜>"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if tools is defined and tools -%}"
    "<｜begin▁sys｜>{{ tools | tojson }}<｜end▁sys｜>"
    "{%- endif -%}"
    "{%- if add_generation_prompt -%}<｜Assistant｜>"
    "{%- if enable_thinking is defined and enable_thinking -%}<think>{%- endif -%}"
    "{%- endif -%}"
)


def build(tokenizer_dir: Path, out: Path) -> None:
    torch.manual_seed(SEED)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=4096,
        rms_norm_eps=1e-6,
        rope_theta=10000.0,
        tie_word_embeddings=False,
        bos_token_id=BOS,
        eos_token_id=EOS,
        pad_token_id=EOS,
        torch_dtype="float32",
    )
    model = LlamaForCausalLM(config)
    # Wide embeddings and a narrow head: greedy output wanders over the vocabulary.
    with torch.no_grad():
        model.model.embed_tokens.weight.normal_(0, 1.0)
        model.lm_head.weight.normal_(0, 0.05)
        for layer in model.model.layers:
            attn, mlp = layer.self_attn, layer.mlp
            for lin in (attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj):
                lin.weight.normal_(0, 0.2)
            for lin in (mlp.gate_proj, mlp.up_proj, mlp.down_proj):
                lin.weight.normal_(0, 0.2)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    shutil.copy(tokenizer_dir / "tokenizer.json", out / "tokenizer.json")
    tok_config = json.loads((tokenizer_dir / "tokenizer_config.json").read_text("utf-8"))
    tok_config["chat_template"] = CHAT_TEMPLATE
    (out / "tokenizer_config.json").write_text(
        json.dumps(tok_config, ensure_ascii=False, indent=2), "utf-8"
    )
    generation = {"bos_token_id": BOS, "eos_token_id": EOS, "pad_token_id": EOS, "do_sample": False}
    (out / "generation_config.json").write_text(json.dumps(generation, indent=2), "utf-8")
    print(f"[make_model] saved {out}: {', '.join(sorted(p.name for p in out.iterdir()))}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: make_model.py TOKENIZER_DIR OUT_DIR")
    build(Path(sys.argv[1]), Path(sys.argv[2]))
