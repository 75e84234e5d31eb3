#!/usr/bin/env bash
# Home Assistant's Wyoming client library for tests/wyoming.rs: a
# virtualenv at .venv/wyoming-client with wyoming 1.10.2 (the version Home
# Assistant's wyoming integration uses) from PyPI. Idempotent: when that
# version is already installed it does nothing (a fraction of a second).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
venv=.venv/wyoming-client
want=1.10.2
py="$venv/bin/python"

installed() {
  [[ -x "$py" ]] || return 1
  "$py" - "$want" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
sys.exit(0 if version("wyoming") == sys.argv[1] else 1)
PY
}

if installed; then
  exit 0
fi
echo "earshot: creating $venv (wyoming==$want)" >&2
python3 -m venv "$venv"
"$py" -m pip install --quiet --disable-pip-version-check "wyoming==$want"
installed || { echo "earshot: error: $venv does not have wyoming $want" >&2; exit 1; }
echo "earshot: $venv ready" >&2
