#!/usr/bin/env bash
# Fetch ONNX Runtime 1.31.1 (libonnxruntime.so.1.31.1) into $MODELS_DIR
# (default models/) for the machine's architecture ($EARSHOT_ARCH overrides
# `uname -m`, e.g. to prepare a Raspberry Pi's files on a PC). earshot loads
# it at run time (ort `load-dynamic`), so no build step downloads anything.
# Sources: $EARSHOT_MODEL_MIRROR/libonnxruntime.so.1.31.1[.<arch>], else the
# PyPI wheel onnxruntime==1.31.1 (the library inside it; no Python needed at
# run time). sha256 pinned per architecture; idempotent; a failed download
# never leaves a file that looks valid. armv7 has no ONNX Runtime build on
# PyPI: the script says so and exits 0 (earshot then runs without the
# on-device classifier and `earshot doctor` explains why).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/lib.sh
source "$here/lib.sh"

MODELS_DIR=${MODELS_DIR:-"$here/../models"}
mkdir -p "$MODELS_DIR"
VERSION=1.31.1
NAME=libonnxruntime.so.$VERSION
MEMBER=onnxruntime/capi/$NAME
arch=${EARSHOT_ARCH:-$(uname -m)}

case "$arch" in
  x86_64|amd64)
    platform=manylinux_2_28_x86_64
    sha=fc44112fbe06d7d689c57e11d3862031f64711007e4ee020f8eed5185fd2c1d3 ;;
  aarch64|arm64)
    platform=manylinux_2_28_aarch64
    sha=8aa3b76b28c778a2b1dd660d34161adb1d508c9ccd04ff9dc80e26eca5df8467 ;;
  armv7l|armv7|armhf|arm)
    log "warning: ONNX Runtime has no armv7 build on PyPI; skipping it."
    log "warning: earshot works without it (the router asks the LLM; intent-tree classify nodes take their fallback)."
    exit 0 ;;
  *)
    log "warning: no ONNX Runtime wheel known for architecture '$arch'; skipping it."
    exit 0 ;;
esac

dest="$MODELS_DIR/$NAME"
if verified "$dest" "$sha"; then
  log "$NAME ($arch): present and verified"
  exit 0
fi
rm -f "$dest" "$dest.part"

# The wheel for $platform (not necessarily this machine's), one member out.
from_platform_wheel() {
  local tmp wheel
  command -v python3 >/dev/null || return 1
  tmp=$(mktemp -d)
  log "fetching $NAME from PyPI onnxruntime==$VERSION ($platform)"
  if ! python3 -m pip download --no-deps --only-binary=:all: --progress-bar on \
      --python-version 3.11 --platform "$platform" --dest "$tmp" "onnxruntime==$VERSION" >&2; then
    rm -rf "$tmp"; return 1
  fi
  wheel=$(find "$tmp" -maxdepth 1 -name '*.whl' | head -n1)
  [[ -n "$wheel" ]] || { rm -rf "$tmp"; return 1; }
  if ! python3 - "$wheel" "$MEMBER" "$dest.part" <<'PY'
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
  then rm -rf "$tmp" "$dest.part"; return 1; fi
  rm -rf "$tmp"
  _finish "$dest.part" "$dest" "$sha"
}

from_mirror "$NAME.$arch" "$dest" "$sha" \
  || from_mirror "$NAME" "$dest" "$sha" \
  || from_platform_wheel \
  || die "could not fetch $NAME for $arch from the mirror or PyPI (onnxruntime==$VERSION)"
log "$NAME ($arch): ok ($sha)"
