#!/usr/bin/env bash
# Make PDFs from several producers out of text none of us wrote (Debian's
# docs and man pages), for the knowledge base's PDF tests and benchmarks.
# Needs poppler-utils ghostscript enscript groff qpdf (scripts/knowledge-tools.sh)
# and, for the reportlab/fpdf2 ones, a venv with those (optional).
# Usage: scripts/make-test-pdfs.sh OUT_DIR [PYTHON_WITH_REPORTLAB]
set -euo pipefail
out=${1:?out dir}; py=${2:-}
mkdir -p "$out"
# ghostscript via enscript (with and without enscript's page header)
enscript -q -p - /usr/share/doc/dpkg/spec/rootless-builds.txt | ps2pdf - "$out/enscript-rootless-builds.pdf"
enscript -q -B -p - /usr/share/doc/dpkg/spec/triggers.txt | ps2pdf - "$out/enscript-triggers.pdf"
# groff's own PDF writer (gropdf) and groff → PostScript → ghostscript
zcat /usr/share/man/man1/gzip.1.gz | groff -man -Tpdf > "$out/gropdf-gzip.pdf" 2>/dev/null
zcat /usr/share/man/man1/journalctl.1.gz | groff -man -Tps 2>/dev/null | ps2pdf - "$out/groff-ps2pdf-journalctl.pdf"
if [ -n "$py" ]; then
  "$py" "$(dirname "$0")/make-test-pdfs.py" "$out"
fi
