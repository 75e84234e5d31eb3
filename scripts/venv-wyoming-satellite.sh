#!/usr/bin/env bash
# The wyoming-satellite peer for tests/satellite.rs: a virtualenv at
# .venv/wyoming-satellite with wyoming-satellite 1.0.0 and the wyoming
# library it pins (1.4.1), from PyPI. Idempotent: when both versions are
# already installed it does nothing (a fraction of a second).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
venv=.venv/wyoming-satellite
want_sat=1.0.0
want_wy=1.4.1
py="$venv/bin/python"

installed() {
  [[ -x "$py" ]] || return 1
  "$py" - "$want_sat" "$want_wy" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
sys.exit(0 if (version("wyoming-satellite"), version("wyoming")) == (sys.argv[1], sys.argv[2]) else 1)
PY
}

if installed; then
  exit 0
fi
echo "earshot: creating $venv (wyoming-satellite==$want_sat, wyoming==$want_wy)" >&2
python3 -m venv "$venv"
"$py" -m pip install --quiet --disable-pip-version-check \
  "wyoming-satellite==$want_sat" "wyoming==$want_wy"
installed || { echo "earshot: error: $venv does not have wyoming-satellite $want_sat with wyoming $want_wy" >&2; exit 1; }
echo "earshot: $venv ready" >&2
