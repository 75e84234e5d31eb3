#!/usr/bin/env bash
# Fetch openWakeWord's ONNX models (issue 17) into $MODELS_DIR (default
# models/), where `[wake] engine = "onnx"` finds them with no other setting:
#   melspectrogram.onnx       the shared front-end: 16 kHz audio → 32 mels
#   embedding_model.onnx      the shared speech embedding: 76 mels → 96
#   hey_jarvis_v0.1.onnx      per-word classifiers: 16 embeddings → p
#   alexa_v0.1.onnx           (alexa.onnx in the crate)
#   hey_mycroft_v0.1.onnx
#   oww-hey_jarvis.wav        a real "hey jarvis" recording (tests, bench)
#   oww-negative.wav          a real recording without it (tests)
#   embedding_stream_{a,b,c}.onnx  the embedding in stages that stream
#                             (made by scripts/split-wake-embedding.py)
# Source: the crates.io crate oww-rs 0.3.3 (MIT; the models are
# openWakeWord's published v0.1 release, see models/README.md), or
# $EARSHOT_MODEL_MIRROR/<name>. Every file is checked against the sha256
# pinned below before it is moved into place; verified files are skipped.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/lib.sh
source "$here/lib.sh"

MODELS_DIR=${MODELS_DIR:-"$here/../models"}
mkdir -p "$MODELS_DIR"

CRATE_URL=https://static.crates.io/crates/oww-rs/oww-rs-0.3.3.crate
CRATE_SHA=d2a492188104214331630dee9125e20b13b7d54cc375f28e01163d1490884ac7

# name, sha256, member inside the crate
FILES=(
  "melspectrogram.onnx ba2b0e0f8b7b875369a2c89cb13360ff53bac436f2895cced9f479fa65eb176f models/melspectrogram.onnx"
  "embedding_model.onnx 70d164290c1d095d1d4ee149bc5e00543250a7316b59f31d056cff7bd3075c1f models/embedding_model.onnx"
  "hey_jarvis_v0.1.onnx 94a13cfe60075b132f6a472e7e462e8123ee70861bc3fb58434a73712ee0d2cb speech_models/hey_jarvis_v0.1.onnx"
  "alexa_v0.1.onnx 6ff566a01d12670e8d9e3c59da32651db1575d17272a601b7f8a39283dfbae3e speech_models/alexa.onnx"
  "hey_mycroft_v0.1.onnx c2a311e8fa1338de89c31b3b46dc4dffd4af2f9a8d6ddead48893c2d301b1f18 speech_models/hey_mycroft_v0.1.onnx"
  "oww-hey_jarvis.wav 0e2aff1f7fb944ab1173135ba92a2d9c46aca5a2f420ee7ae24f85357e8be381 hey_jarvis.wav"
  "oww-negative.wav 7c6e13db54ca947ae8cf320ecd4ed297f1c20e5378b2c43fa807bb17ef64ffe1 negative.wav"
)

# The speech embedding cut into three stages that stream (a step costs
# ~35 % of the whole model, with the same output; the script's doc says
# why that is exact). Made from embedding_model.onnx by
# scripts/split-wake-embedding.py, reproducibly: pinned onnx, pinned
# output sha256s. Without them the whole model runs each frame.
STAGES=(
  "embedding_stream_a.onnx 1c1e58e0a7b9795bfe6df6192c1194cac2d957e646ab531d37305e30fc005cee"
  "embedding_stream_b.onnx 8618873d5a25f120cdab89effd5b72534d760a1984cea5e05e4d00b2d252c107"
  "embedding_stream_c.onnx f86a5dae38c1d3ad3af43bda53131ecc6befce87971fe49ee8165e40d63906d5"
)

crate_dir=""
split_dir=""
# (An if per dir, not `[[ … ]] &&`: a false test as the trap's last
# command would become the script's exit status.)
cleanup() {
  if [[ -n "$crate_dir" ]]; then rm -rf "$crate_dir"; fi
  if [[ -n "$split_dir" ]]; then rm -rf "$split_dir"; fi
}
trap cleanup EXIT

# put NAME SHA256 MAKER [ARGS…]: a verified file is kept; else the mirror;
# else `MAKER ARGS… PART` writes the file (or dies saying why), and it is
# moved into place only if its sha256 matches.
put() {
  local name=$1 sha=$2
  shift 2
  local dest="$MODELS_DIR/$name"
  if verified "$dest" "$sha"; then
    log "$name: present and verified"
    return 0
  fi
  rm -f "$dest" "$dest.part"
  if ! from_mirror "$name" "$dest" "$sha"; then
    "$@" "$dest.part"
    _finish "$dest.part" "$dest" "$sha" || die "$name (by $1) did not match its sha256"
  fi
  log "$name: ok ($sha)"
}

# from_crate MEMBER PART: a file of the crate, downloaded and unpacked
# once (in this shell, not a subshell, so crate_dir is kept).
from_crate() {
  if [[ -z "$crate_dir" ]]; then
    crate_dir=$(mktemp -d)
    { from_url "$CRATE_URL" "$crate_dir/oww-rs.crate" "$CRATE_SHA" \
      && tar -xzf "$crate_dir/oww-rs.crate" -C "$crate_dir"; } \
      || die "could not fetch $CRATE_URL (for $1); set EARSHOT_MODEL_MIRROR to a dir holding the models"
  fi
  cp "$crate_dir/oww-rs-0.3.3/$1" "$2"
}

# from_split NAME PART: a stage made by scripts/split-wake-embedding.py
# (all three at once, the first time one is needed).
from_split() {
  if [[ -z "$split_dir" ]]; then
    local python
    python=$(convert_python) \
      || die "could not make $1 (scripts/split-wake-embedding.py needs python3-venv and PyPI's ${CONVERT_PINS[*]})"
    split_dir=$(mktemp -d)
    "$python" "$here/split-wake-embedding.py" "$MODELS_DIR/embedding_model.onnx" "$split_dir" >&2 \
      || die "scripts/split-wake-embedding.py could not cut $MODELS_DIR/embedding_model.onnx"
  fi
  cp "$split_dir/$1" "$2"
}

for entry in "${FILES[@]}"; do
  read -r name sha member <<<"$entry"
  put "$name" "$sha" from_crate "$member"
done
for entry in "${STAGES[@]}"; do
  read -r name sha <<<"$entry"
  put "$name" "$sha" from_split "$name"
done
