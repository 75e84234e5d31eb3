#!/usr/bin/env bash
# Build whisper.cpp's CLI against the *same* whisper.cpp that earshot links
# (the copy vendored by whisper-rs-sys, 1.8.3), for issue 6.7's "no overhead
# of ours" comparison: `earshot bench stt --whisper-cli PATH` then compares
# our engine with the CLI at identical library code and settings.
#
# scripts/build-whisper-cli.sh builds the newer CLI (1.9.1, from npm
# nodejs-whisper) — a different engine version, which decodes differently
# and runs at another speed. whisper-rs-sys ships only the library, so this
# script compiles that CLI's front end (examples/cli + common) against the
# vendored 1.8.3 library: the decoding is all in the library.
# Output: tools/whisper-cli-same-version/whisper-cli
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

OUT=tools/whisper-cli-same-version
BIN="$OUT/whisper-cli"
if [[ -x "$BIN" ]]; then log "$BIN already built"; echo "$BIN"; exit 0; fi
command -v cmake >/dev/null || die "cmake is needed (apt-get install cmake g++)"
scripts/build-whisper-cli.sh >/dev/null   # the CLI front-end sources
EXAMPLES=tools/whisper.cpp/examples
SRC=$(cargo metadata --format-version 1 2>/dev/null | python3 -c '
import json, os, sys
for p in json.load(sys.stdin)["packages"]:
    if p["name"] == "whisper-rs-sys":
        print(os.path.join(os.path.dirname(p["manifest_path"]), "whisper.cpp"))
        break
')
[[ -n "$SRC" && -f "$SRC/CMakeLists.txt" ]] || die "whisper-rs-sys's whisper.cpp not found; run 'cargo fetch' first"
version=$(grep -o 'whisper.cpp" VERSION [0-9.]*' "$SRC/CMakeLists.txt" | awk '{print $3}')
log "building whisper-cli against whisper-rs-sys's whisper.cpp $version ($SRC)"
rm -rf "$OUT"
mkdir -p "$OUT"
cp -r "$SRC" "$OUT/whisper.cpp"
cmake -S "$OUT/whisper.cpp" -B "$OUT/build" -DCMAKE_BUILD_TYPE=Release \
  -DWHISPER_BUILD_TESTS=OFF -DWHISPER_BUILD_EXAMPLES=OFF -DBUILD_SHARED_LIBS=OFF >/dev/null
cmake --build "$OUT/build" -j"$(nproc)" >/dev/null
lib="$OUT/build"
# common-ggml.cpp (model quantisation helpers) names ggml types 1.8.3 lacks
# and the CLI doesn't use: left out.
g++ -O3 -std=c++17 -march=native -fopenmp \
  -I "$OUT/whisper.cpp/include" -I "$OUT/whisper.cpp/ggml/include" -I "$EXAMPLES" \
  -o "$BIN.part" "$EXAMPLES/cli/cli.cpp" "$EXAMPLES/common.cpp" \
  "$EXAMPLES/common-whisper.cpp" "$EXAMPLES/grammar-parser.cpp" \
  "$lib/src/libwhisper.a" "$lib/ggml/src/libggml.a" "$lib/ggml/src/libggml-cpu.a" \
  "$lib/ggml/src/libggml-base.a" -lpthread -ldl -lm
mv "$BIN.part" "$BIN"
log "built $BIN (whisper.cpp $version)"
echo "$BIN"
