#!/usr/bin/env bash
# The whole test suite from a fresh clone: installs packages and models,
# then format check, clippy (warnings are errors) and every test.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
"$here/setup.sh"
[[ -d "$HOME/.cargo/bin" ]] && export PATH="$HOME/.cargo/bin:$PATH"
export EARSHOT_MODELS_DIR=${EARSHOT_MODELS_DIR:-"$PWD/models"}
# Issue 10: real Wyoming peers from PyPI, each in its own virtualenv under
# .venv/ (their `wyoming` pins differ); fast when already installed.
echo "== Wyoming peers (virtualenvs)"
"$here/venv-wyoming-client.sh"
"$here/venv-wyoming-services.sh"
"$here/venv-wyoming-satellite.sh"
# Issue 15: a real CalDAV server (Radicale) for tests/calendar.rs.
"$here/venv-radicale.sh"
# Issue 22: Home Assistant's ESPHome client (aioesphomeapi) for tests/esphome.rs.
"$here/venv-esphome.sh"
# Issue 19: poppler's pdftotext reads PDFs in the knowledge tests.
"$here/knowledge-tools.sh"
# Issue 18: a real IMAP server (Dovecot) for tests/email.rs.
"$here/dovecot.sh"
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --all-targets -- -D warnings
echo "== cargo test"
# lib, binary, integration tests and doc tests (benches are compiled by clippy
# above and run by `cargo bench`); --no-fail-fast so one failing binary does
# not hide the results of the others (the exit status still fails).
cargo test --no-fail-fast -- --test-threads="${EARSHOT_TEST_THREADS:-2}"
# Issue 7: prove the Raspberry Pi (aarch64) build compiles here without
# Docker (Debian cross compilers + an ALSA sysroot). EARSHOT_SKIP_CROSS=1
# skips it for a quick local run.
if [[ "${EARSHOT_SKIP_CROSS:-0}" != 1 ]]; then
  echo "== aarch64 cross build"
  CARGO_TARGET_DIR="$PWD/target-cross" "$here/cross-check.sh"
fi
