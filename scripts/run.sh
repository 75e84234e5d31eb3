#!/usr/bin/env bash
# Install, build and start the voice assistant with the embedded defaults:
# SQLite in the state dir, local models, no API key needed. Extra arguments
# go to `earshot run` (e.g. --input FILE.wav). Set GROQ_API_KEY or
# LLM_BASE_URL for answers beyond what the device knows by itself.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
"$here/setup.sh"
[[ -d "$HOME/.cargo/bin" ]] && export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release
export EARSHOT_MODELS_DIR=${EARSHOT_MODELS_DIR:-"$PWD/models"}
exec ./target/release/earshot run "$@"
