#!/usr/bin/env bash
# Remove the earshot service. Keeps your data — /etc/earshot (config,
# secrets) and /var/lib/earshot (the database) — unless --purge is given.
#
#   sudo scripts/uninstall.sh [--purge] [--root DIR]
#
# --root DIR (or DESTDIR=DIR) works on a staged root (see install.sh).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

root=${DESTDIR:-}
purge=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --purge) purge=1; shift ;;
    --root) root=${2:?--root needs a directory}; shift 2 ;;
    --root=*) root=${1#--root=}; shift ;;
    -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
root=${root%/}
staged=0
[[ -n "$root" ]] && staged=1
if [[ $staged -eq 0 && $(id -u) -ne 0 ]]; then
  die "run as root (sudo $0), or work on a staged root with --root DIR"
fi

if [[ $staged -eq 0 ]] && command -v systemctl >/dev/null && [[ -d /run/systemd/system ]]; then
  systemctl disable --now earshot.service 2>/dev/null || true
fi
rm -f "$root/etc/systemd/system/earshot.service"
if [[ $staged -eq 0 ]] && command -v systemctl >/dev/null && [[ -d /run/systemd/system ]]; then
  systemctl daemon-reload
fi
rm -f "$root/usr/local/bin/earshot"
# Models can be fetched again; documentation goes with the program.
rm -rf "$root/usr/local/share/earshot" "$root/usr/local/share/doc/earshot"

if [[ $purge -eq 1 ]]; then
  log "purging config and data: $root/etc/earshot $root/var/lib/earshot"
  rm -rf "$root/etc/earshot" "$root/var/lib/earshot" "$root/var/cache/earshot"
  if [[ $staged -eq 0 ]] && id -u earshot >/dev/null 2>&1; then
    userdel earshot || log "could not remove the earshot user; remove it with: userdel earshot"
  fi
else
  log "kept $root/etc/earshot and $root/var/lib/earshot (your config and database); remove them with --purge"
fi
log "earshot is uninstalled"
