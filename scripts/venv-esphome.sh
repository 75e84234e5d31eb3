#!/usr/bin/env bash
# Home Assistant's ESPHome client library for tests/esphome.rs: a
# virtualenv at .venv/esphome with aioesphomeapi 46.0.0 (the client Home
# Assistant's ESPHome integration uses; it ships the generated api_pb2.py
# the simulated device is built on) from PyPI. Idempotent: when that
# version is already installed it does nothing (a fraction of a second).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
venv=.venv/esphome
want=46.0.0
py="$venv/bin/python"

installed() {
  [[ -x "$py" ]] || return 1
  "$py" - "$want" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
sys.exit(0 if version("aioesphomeapi") == sys.argv[1] else 1)
PY
}

if installed; then
  exit 0
fi
echo "earshot: creating $venv (aioesphomeapi==$want)" >&2
python3 -m venv "$venv"
"$py" -m pip install --quiet --disable-pip-version-check "aioesphomeapi==$want"
installed || { echo "earshot: error: $venv does not have aioesphomeapi $want" >&2; exit 1; }
echo "earshot: $venv ready" >&2
