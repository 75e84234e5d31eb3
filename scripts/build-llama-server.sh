#!/usr/bin/env bash
# Issue 20: build llama.cpp's `llama-server` into $MODELS_DIR/llama-server
# from the llama.cpp tree vendored in the PyPI sdist llama-cpp-python
# (version and sha256 pinned). Only the server target, statically linked,
# offline: the web UI is neither built nor downloaded (LLAMA_BUILD_UI=OFF,
# LLAMA_USE_PREBUILT_UI=OFF), no OpenSSL, no tests, examples or the unified
# app. Idempotent: $MODELS_DIR/llama-server.stamp names the sdist it was
# built from; a matching stamp and a binary that runs `--version` skip the
# build. $EARSHOT_MODEL_MIRROR/llama-server with a matching stamp is copied
# instead of building. The build directory is temporary and removed afterwards.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/lib.sh
source "$here/lib.sh"

MODELS_DIR=${MODELS_DIR:-"$here/../models"}
mkdir -p "$MODELS_DIR"
VERSION=0.3.36
SDIST=llama_cpp_python-$VERSION.tar.gz
SDIST_SHA=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
bin="$MODELS_DIR/llama-server"
stamp="$MODELS_DIR/llama-server.stamp"
# The build is native (-march=native) but never uses AMX: ggml's AMX kernels
# run `ldtilecfg`, which dies with SIGSEGV where the kernel or hypervisor
# does not grant the tile state (seen on a KVM Sapphire Rapids guest). GCC
# keeps an explicit -mno-amx-* even when -march=native comes later. The
# recipe name is in the stamp so servers built before this are rebuilt.
RECIPE=no-amx
want="llama-cpp-python $VERSION $SDIST_SHA $RECIPE ${EARSHOT_LLAMA_CMAKE_FLAGS:-}"

if [[ -x "$bin" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]] \
   && "$bin" --version >/dev/null 2>&1; then
  log "llama-server: present (built from llama-cpp-python $VERSION)"
  exit 0
fi

# A mirror (or another models dir, as the install test uses) holding a
# server built from the same sdist with the same flags: copy it.
mirror=${EARSHOT_MODEL_MIRROR:-}
if [[ -n "$mirror" && -x "$mirror/llama-server" && -f "$mirror/llama-server.stamp" \
      && "$(cat "$mirror/llama-server.stamp")" == "$want" ]] \
   && "$mirror/llama-server" --version >/dev/null 2>&1; then
  cp "$mirror/llama-server" "$bin.part" && mv -f "$bin.part" "$bin"
  printf '%s' "$want" >"$stamp"
  log "llama-server: copied from mirror $mirror"
  exit 0
fi

command -v cmake >/dev/null && command -v g++ >/dev/null \
  || apt_install cmake g++ make

work=$(mktemp -d "${TMPDIR:-/tmp}/earshot-llama.XXXXXX")
trap 'rm -rf "$work"' EXIT
if [[ -n "${EARSHOT_MODEL_MIRROR:-}" && -f "$EARSHOT_MODEL_MIRROR/$SDIST" ]]; then
  cp "$EARSHOT_MODEL_MIRROR/$SDIST" "$work/"
else
  log "fetching the llama-cpp-python $VERSION sdist from PyPI (llama.cpp sources)"
  python3 -m pip download --quiet --no-deps --no-binary llama-cpp-python \
    --dest "$work" "llama-cpp-python==$VERSION" >&2 \
    || die "could not download llama-cpp-python==$VERSION from PyPI"
fi
[[ "$(sha256_of "$work/$SDIST")" == "$SDIST_SHA" ]] \
  || die "sha256 mismatch for $SDIST (want $SDIST_SHA)"
tar -xzf "$work/$SDIST" -C "$work"
src="$work/llama_cpp_python-$VERSION/vendor/llama.cpp"
[[ -d "$src/tools/server" ]] || die "$SDIST has no vendor/llama.cpp/tools/server"

no_amx=()
if [[ "$(uname -m)" == x86_64 ]] \
   && echo | g++ -mno-amx-tile -mno-amx-int8 -mno-amx-bf16 -x c++ -E - >/dev/null 2>&1; then
  flags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  no_amx=("-DCMAKE_C_FLAGS=$flags" "-DCMAKE_CXX_FLAGS=$flags")
fi

jobs=${EARSHOT_LLAMA_JOBS:-$(nproc)}
started=$(date +%s)
log "building llama-server ($jobs jobs; takes a few minutes)"
# shellcheck disable=SC2086
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_NUMBER=0 "${no_amx[@]}" ${EARSHOT_LLAMA_CMAKE_FLAGS:-} >"$work/cmake.log" 2>&1 \
  || { tail -n 30 "$work/cmake.log" >&2; die "cmake configure of llama.cpp failed"; }
cmake --build "$work/build" --target llama-server -j "$jobs" >"$work/build.log" 2>&1 \
  || { tail -n 30 "$work/build.log" >&2; die "building llama-server failed"; }
cp "$work/build/bin/llama-server" "$bin.part"
strip "$bin.part" 2>/dev/null || true
mv -f "$bin.part" "$bin"
printf '%s' "$want" >"$stamp"
log "llama-server: built in $(( $(date +%s) - started )) s -> $bin"
