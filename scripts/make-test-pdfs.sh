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
# Optional: LibreOffice Writer, pdfTeX and Chromium, each only when installed
# (Debian: libreoffice-writer-nogui, texlive-latex-base + lmodern, chromium).
# CI does not run this; the PDFs are committed fixtures.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# LibreOffice Writer from base-passwd's DocBook HTML (h1/h2 → Heading styles).
if command -v soffice >/dev/null; then
  cp /usr/share/doc/base-passwd/users-and-groups.html "$tmp/"
  soffice -env:UserInstallation="file://$tmp/lo-profile" --headless \
    --infilter="HTML (StarWriter)" --convert-to pdf:writer_pdf_Export \
    --outdir "$tmp" "$tmp/users-and-groups.html" >/dev/null 2>&1
  mv "$tmp/users-and-groups.pdf" "$out/libreoffice-users-and-groups.pdf"
fi
# pdfTeX: xargs(1) as rendered by man (no hyphenation, no justification),
# its NAME/OPTIONS/… lines as \section, option tags bold, indented blocks quoted.
if command -v pdflatex >/dev/null; then
  MANWIDTH=80 man --nh --nj -P cat xargs 2>/dev/null | col -bx > "$tmp/xargs.txt"
  python3 - "$tmp/xargs.txt" > "$tmp/xargs.tex" <<'EOF'
import re, sys
lines = open(sys.argv[1], encoding='utf-8').read().splitlines()[1:-1]  # running header/footer
special = {'\\': r'\textbackslash{}', '{': r'\{', '}': r'\}', '$': r'\$', '&': r'\&',
           '#': r'\#', '%': r'\%', '_': r'\_', '^': r'\^{}', '~': r'\textasciitilde{}',
           '-': '{-}', '`': r'\textasciigrave{}', "'": r'\textquotesingle{}',
           '"': r'\textquotedbl{}', '<': r'\textless{}', '>': r'\textgreater{}', '|': r'\textbar{}'}
def tex(s):
    return ''.join(special.get(c, c) for c in re.sub(r'\s+', ' ', s.strip()))
def join(ls):  # man broke "system-defined" after its hyphen: no space there
    return re.sub(r'(?<=[a-z]-) (?=[a-z])', '', ' '.join(l.strip() for l in ls))
def indent(l):
    return len(l) - len(l.lstrip())
print(r'''\documentclass[11pt,a4paper]{article}
\usepackage[T1]{fontenc}\usepackage[utf8]{inputenc}\usepackage{lmodern,textcomp}
\usepackage[margin=25mm]{geometry}\sloppy
\title{XARGS(1)}\author{GNU findutils}\date{}
\begin{document}\maketitle''')
blocks, cur = [], []
for l in lines + ['']:
    if l.strip():
        cur.append(l)
    elif cur:
        blocks.append(cur); cur = []
for b in blocks:
    if indent(b[0]) == 0:  # a section heading, maybe with its first paragraph after it
        print(r'\section{%s}' % tex(b[0].title())); b = b[1:]
        if not b: continue
    if len(b) > 1 and indent(b[0]) < indent(b[1]):  # an option tag and its text
        print(r'\paragraph{%s}' % tex(b[0])); b = b[1:]
    body = tex(join(b))
    print((r'\begin{quote}%s\end{quote}' if indent(b[0]) >= 14 else '%s\n') % body)
print(r'\end{document}')
EOF
  (cd "$tmp" && SOURCE_DATE_EPOCH=0 FORCE_SOURCE_DATE=1 \
    pdflatex -interaction=nonstopmode -halt-on-error xargs.tex >/dev/null)
  mv "$tmp/xargs.pdf" "$out/pdftex-xargs.pdf"
fi
# Chromium's print-to-PDF as a user gets it: with its date/title header and
# URL/page-number footer on every page.
if command -v chromium >/dev/null; then
  chromium --headless --no-sandbox --disable-gpu --user-data-dir="$tmp/chromium" \
    --print-to-pdf="$out/chromium-enscript-faq.pdf" \
    file:///usr/share/doc/enscript/FAQ.html >/dev/null 2>&1
fi
