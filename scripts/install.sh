#!/usr/bin/env bash
# Install (or upgrade) earshot as a system service on Raspberry Pi OS /
# Debian: the `earshot` user (groups audio, gpio, input), directories, the
# binary, the config template, the models and the systemd unit.
#
#   sudo scripts/install.sh [--binary PATH] [--root DIR] [--no-models]
#                           [--no-deps] [--no-start]
#
# Re-running upgrades in place: the binary, unit and models are replaced;
# /etc/earshot/earshot.toml, /etc/earshot/earshot.env and everything under
# /var/lib/earshot (the database) are never overwritten.
#
# --root DIR (or DESTDIR=DIR) installs into a staging root for packaging
# and tests: files and directories only — no user creation, no chown, no
# apt, no systemctl (each skipped step is logged).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

root=${DESTDIR:-}
binary=""
models=1
deps=1
start=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --root) root=${2:?--root needs a directory}; shift 2 ;;
    --root=*) root=${1#--root=}; shift ;;
    --binary) binary=${2:?--binary needs a path}; shift 2 ;;
    --binary=*) binary=${1#--binary=}; shift ;;
    --no-models) models=0; shift ;;
    --no-deps) deps=0; shift ;;
    --no-start) start=0; shift ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done

# Paths on the target system (inside $root when staging).
root=${root%/}
staged=0
[[ -n "$root" ]] && staged=1
bin_dir="$root/usr/local/bin"
conf_dir="$root/etc/earshot"
state_dir="$root/var/lib/earshot"
models_dir="$root/usr/local/share/earshot/models"
doc_dir="$root/usr/local/share/doc/earshot"
unit_dir="$root/etc/systemd/system"
user=earshot

if [[ $staged -eq 0 && $(id -u) -ne 0 ]]; then
  die "run as root (sudo $0), or stage into a directory with --root DIR"
fi

# ---- the binary -------------------------------------------------------------
if [[ -z "$binary" ]]; then
  for candidate in "$repo/target/release/earshot" "$repo/earshot" "${CARGO_TARGET_DIR:-/nonexistent}/release/earshot"; do
    if [[ -x "$candidate" ]]; then binary=$candidate; break; fi
  done
fi
if [[ -z "$binary" ]]; then
  command -v cargo >/dev/null || die "no earshot binary found; build one (cargo build --release, or cross build --release --target aarch64-unknown-linux-gnu) and pass --binary PATH"
  log "building the release binary (a few minutes on a Pi)"
  (cd "$repo" && cargo build --release)
  binary="${CARGO_TARGET_DIR:-$repo/target}/release/earshot"
fi
[[ -x "$binary" ]] || die "$binary is not an executable earshot binary"

# ---- packages, user ---------------------------------------------------------
if [[ $deps -eq 1 && $staged -eq 0 ]] && command -v apt-get >/dev/null; then
  # Runtime only: ALSA, espeak-ng (last-resort voice), curl/python3 for the
  # model fetchers, sqlite3 for recovering a damaged database.
  apt_install libasound2 espeak-ng curl python3 ca-certificates sqlite3
  apt_install poppler-utils   # pdftotext reads PDFs for the knowledge base (issue 19)
else
  log "skipping Debian packages (--no-deps, --root, or no apt-get)"
fi

if [[ $staged -eq 0 ]]; then
  if ! id -u "$user" >/dev/null 2>&1; then
    log "creating the system user $user"
    useradd --system --home-dir /var/lib/earshot --no-create-home \
      --shell /usr/sbin/nologin --user-group "$user"
  fi
  for group in audio gpio input; do
    if getent group "$group" >/dev/null; then
      usermod -a -G "$group" "$user"
    else
      log "group $group does not exist here; skipping it"
    fi
  done
else
  log "staging into $root: not creating the $user user or changing owners"
fi

# ---- directories --------------------------------------------------------------
install -d -m 0755 "$bin_dir" "$models_dir" "$doc_dir" "$unit_dir"
install -d -m 0750 "$conf_dir" "$state_dir"
if [[ $staged -eq 0 ]]; then
  chown root:"$user" "$conf_dir"
  chown "$user":"$user" "$state_dir"
fi

# ---- binary (atomic replace, so a running service keeps its old inode) -------
install -m 0755 "$binary" "$bin_dir/earshot.new"
mv -f "$bin_dir/earshot.new" "$bin_dir/earshot"
log "installed $bin_dir/earshot ($("$bin_dir/earshot" --version 2>/dev/null || echo 'version unknown: cross-built?'))"

# ---- config: never overwrite what the user has --------------------------------
config="$conf_dir/earshot.toml"
if [[ -e "$config" ]]; then
  log "keeping the existing $config"
else
  [[ -f "$repo/earshot.example.toml" ]] || die "earshot.example.toml is missing from $repo"
  # The device's paths replace the developer defaults of the template.
  sed -e 's|^#\{0,1\} \{0,1\}state_dir = .*|state_dir = "/var/lib/earshot"|' \
      -e 's|^#\{0,1\} \{0,1\}models_dir = .*|models_dir = "/usr/local/share/earshot/models"|' \
      "$repo/earshot.example.toml" > "$config.new"
  chmod 0640 "$config.new"
  mv -f "$config.new" "$config"
  log "wrote $config from earshot.example.toml; edit it, then: sudo systemctl restart earshot"
fi
env_file="$conf_dir/earshot.env"
if [[ ! -e "$env_file" ]]; then
  umask 027
  cat > "$env_file" <<'ENV'
# Secrets for the earshot service (read by systemd, never logged).
# GROQ_API_KEY=gsk_...
# TAVILY_API_KEY=
# NOTION_API_KEY=
# NOTION_DATABASE_ID=
ENV
  chmod 0640 "$env_file"
  log "wrote $env_file (put GROQ_API_KEY there)"
fi
if [[ $staged -eq 0 ]]; then
  chown root:"$user" "$config" "$env_file"
fi
install -m 0644 "$repo/earshot.example.toml" "$doc_dir/earshot.example.toml"
[[ -f "$repo/README.md" ]] && install -m 0644 "$repo/README.md" "$doc_dir/README.md"

# ---- models -------------------------------------------------------------------
if [[ $models -eq 1 ]]; then
  if [[ -x "$here/fetch-models.sh" ]]; then
    log "fetching models into $models_dir (verified files are skipped)"
    MODELS_DIR="$models_dir" "$here/fetch-models.sh"
  else
    log "scripts/fetch-models.sh not found; models not installed (earshot doctor will say what is missing)"
  fi
else
  log "skipping models (--no-models)"
fi

# ---- systemd unit ---------------------------------------------------------------
install -m 0644 "$repo/systemd/earshot.service" "$unit_dir/earshot.service.new"
mv -f "$unit_dir/earshot.service.new" "$unit_dir/earshot.service"
if [[ $staged -eq 0 ]] && command -v systemctl >/dev/null && [[ -d /run/systemd/system ]]; then
  systemctl daemon-reload
  systemctl enable earshot.service >/dev/null
  if systemctl is-active --quiet earshot.service; then
    log "restarting the running service with the new version"
    systemctl restart earshot.service
  elif [[ $start -eq 1 ]]; then
    systemctl start earshot.service || log "the service did not start; see: journalctl -u earshot -e"
  fi
else
  log "not calling systemctl (staged install, or systemd is not running)"
fi

log "done. Check the device with: sudo -u $user $bin_dir/earshot doctor"
