#!/usr/bin/env bash
# A real CalDAV server for tests/calendar.rs: Radicale from PyPI in a
# virtualenv at .venv-radicale (the test starts it itself on a random port
# with a temporary storage folder). Idempotent: when that version is
# already installed it does nothing (a fraction of a second).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
venv=.venv-radicale
want=3.9.0
py="$venv/bin/python"

installed() {
  [[ -x "$py" ]] || return 1
  "$py" - "$want" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
sys.exit(0 if version("radicale") == sys.argv[1] else 1)
PY
}

if installed; then
  exit 0
fi
echo "earshot: creating $venv (radicale==$want)" >&2
python3 -m venv "$venv"
"$py" -m pip install --quiet --disable-pip-version-check "radicale==$want"
installed || { echo "earshot: error: $venv does not have radicale $want" >&2; exit 1; }
echo "earshot: $venv ready" >&2
