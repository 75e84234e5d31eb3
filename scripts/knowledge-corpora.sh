#!/usr/bin/env bash
# Rebuild the knowledge benchmark's three corpora from this machine's
# Debian docs (text none of us wrote), for bench/knowledge/questions-{A,B,C}.jsonl:
#   A (fit):        ls, sed, kill, zstd man pages
#   B (validation): systemd's README.Debian / README.logs, zstd's CONTRIBUTING.md, alsa's asoundrc.txt
#   C (test):       journalctl, tar, grep, cp, chmod man pages; gzip (gropdf) and xz (groff → ps2pdf)
#                   as PDF; dpkg's triggers.txt as an enscript → ghostscript PDF; dpkg's rootless-builds.txt
#   D (test, 5 Dec): markdown / plain-text READMEs with underlined headings: apt, kmod, espeak-ng,
#                   bash's README.Debian, base-files' README.FHS
#   E (validation, 6 Dec): find, du, tail man pages; ssh (gropdf) and sort (groff → ps2pdf) as PDF;
#                   groff's own shipped PDF "Using Automake in the Groff project" (a real PDF, prose)
#   F (test, 6 Dec, stop 52): PDFs Debian ships that none of us made — bzip2's manual (pdfTeX),
#                   fontconfig's user guide (pdfTeX), shared-mime-info's spec (pdfTeX), Valgrind's
#                   manual (Apache FOP, 397 pages); ssh-keygen (groff → ps2pdf); wget, df, make's README
# Needs man-db, groff, enscript, ghostscript (scripts/knowledge-tools.sh).
# Usage: scripts/knowledge-corpora.sh OUT_DIR   → OUT_DIR/{A,B,C,D,E}
set -euo pipefail
out=${1:?out dir}
mkdir -p "$out/A" "$out/B" "$out/C" "$out/D" "$out/E" "$out/F"
page() { MANWIDTH=80 man -P cat "$1" 2>/dev/null | col -bx; }
for m in ls sed kill zstd; do page "$m" > "$out/A/$m.txt"; done
zcat /usr/share/doc/systemd/README.Debian.gz > "$out/B/systemd-README.Debian.txt"
cp /usr/share/doc/systemd/README.logs "$out/B/systemd-README.logs.txt"
zcat /usr/share/doc/zstd/CONTRIBUTING.md.gz > "$out/B/zstd-CONTRIBUTING.md"
cp /usr/share/doc/libasound2/examples/asoundrc.txt "$out/B/asoundrc.txt"
for m in journalctl tar grep cp chmod; do page "$m" > "$out/C/$m.txt"; done
zcat "$(man -w gzip)" | groff -man -Tpdf > "$out/C/gzip.pdf" 2>/dev/null
zcat "$(man -w xz)" | groff -man -Tps 2>/dev/null | ps2pdf - "$out/C/xz.pdf"
enscript -q -B -p - /usr/share/doc/dpkg/spec/triggers.txt | ps2pdf - "$out/C/dpkg-triggers.pdf"
cp /usr/share/doc/dpkg/spec/rootless-builds.txt "$out/C/rootless-builds.txt"
zcat /usr/share/doc/apt/README.md.gz > "$out/D/apt-README.md"
cp /usr/share/doc/kmod/README.md "$out/D/kmod-README.md"
zcat /usr/share/doc/espeak-ng/README.md.gz > "$out/D/espeak-README.md"
zcat /usr/share/doc/bash/README.Debian.gz > "$out/D/bash-README.Debian.txt"
cp /usr/share/doc/base-files/README.FHS "$out/D/FHS.txt"
for m in find du tail; do page "$m" > "$out/E/$m.txt"; done
zcat "$(man -w ssh)" | groff -man -Tpdf > "$out/E/ssh.pdf" 2>/dev/null
zcat "$(man -w sort)" | groff -man -Tps 2>/dev/null | ps2pdf - "$out/E/sort.pdf"
zcat /usr/share/doc/groff-base/pdf/automake.pdf.gz > "$out/E/groff-automake.pdf"
zcat /usr/share/doc/bzip2/manual.pdf.gz > "$out/F/bzip2-manual.pdf"
zcat /usr/share/doc/fontconfig/fontconfig-user.pdf.gz > "$out/F/fontconfig-user.pdf"
cp /usr/share/doc/shared-mime-info/shared-mime-info-spec.pdf "$out/F/"
zcat /usr/share/doc/valgrind/valgrind_manual.pdf.gz > "$out/F/valgrind-manual.pdf"
zcat "$(man -w ssh-keygen)" | groff -man -Tps 2>/dev/null | ps2pdf - "$out/F/ssh-keygen.pdf"
for m in wget df; do page "$m" > "$out/F/$m.txt"; done
zcat /usr/share/doc/make/README.gz > "$out/F/make-README.txt"
ls -l "$out"/*
