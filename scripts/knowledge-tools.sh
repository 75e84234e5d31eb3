#!/usr/bin/env bash
# The programs the knowledge base runs (issue 19): poppler's pdftotext reads
# PDFs. `--dev` adds what scripts/make-test-pdfs.sh needs to make test PDFs
# (ghostscript, enscript, groff, qpdf). Idempotent.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
packages=(poppler-utils)
[[ "${1:-}" == "--dev" ]] && packages+=(ghostscript enscript groff qpdf)
if command -v apt-get >/dev/null; then
  apt_install "${packages[@]}"
else
  log "not a Debian system: install the equivalents of: ${packages[*]}"
fi
