#!/usr/bin/env bash
# A real IMAP server for tests/email.rs (issue 18): Debian's dovecot-imapd.
# The test starts it itself in a temporary folder (its own config, a
# passwd-file user, a seeded Maildir, a self-signed certificate made with
# the openssl program) as an unprivileged process; the system service is
# never started or needed. Idempotent.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
packages=(dovecot-imapd openssl)
if command -v dovecot >/dev/null && command -v openssl >/dev/null; then
  exit 0
fi
if command -v apt-get >/dev/null; then
  apt_install "${packages[@]}"
else
  log "not a Debian system: install the equivalents of: ${packages[*]}"
fi
