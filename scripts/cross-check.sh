#!/usr/bin/env bash
# Prove that earshot builds for the Raspberry Pi (aarch64) on this machine,
# without Docker: Debian's cross gcc/g++, the target's ALSA in a private
# sysroot (apt download + dpkg -x; the system's dpkg architectures are not
# touched), and cargo with the target's linker and pkg-config settings.
# The same build `cross build --target aarch64-unknown-linux-gnu` does in
# its container (see cross.toml).
#
#   scripts/cross-check.sh [--release] [--target TRIPLE]
#
# Exits non-zero when anything fails, and when the result is not an ELF
# for the target machine. If qemu-user is installed, it also runs
# `earshot --version` under emulation.
#
# Environment: CARGO_TARGET_DIR (default: target-cross/ in the repo),
# CROSS_SYSROOT (default: $CARGO_TARGET_DIR/sysroot-<arch>).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"

target=aarch64-unknown-linux-gnu
profile_flag=()
profile=debug
while [[ $# -gt 0 ]]; do
  case "$1" in
    --release) profile_flag=(--release); profile=release; shift ;;
    --target) target=${2:?--target needs a triple}; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done

case "$target" in
  aarch64-unknown-linux-gnu)
    deb_arch=arm64; gnu=aarch64-linux-gnu; elf_machine=AArch64; qemu=qemu-aarch64; features=() ;;
  armv7-unknown-linux-gnueabihf)
    # No ONNX Runtime exists for armv7: build without the `onnx` feature.
    deb_arch=armhf; gnu=arm-linux-gnueabihf; elf_machine=ARM; qemu=qemu-arm
    features=(--no-default-features --features whisper) ;;
  *) die "unsupported target $target (aarch64-unknown-linux-gnu or armv7-unknown-linux-gnueabihf)" ;;
esac

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-"$repo/target-cross"}
sysroot=${CROSS_SYSROOT:-"$CARGO_TARGET_DIR/sysroot-$deb_arch"}

# ---- 1. Rust target and cross compilers ---------------------------------------
if command -v rustup >/dev/null; then
  if ! rustup target list --installed | grep -qx "$target"; then
    log "adding the Rust target $target"
    rustup target add "$target"
  fi
else
  log "rustup not found; assuming the $target standard library is installed"
fi
apt_install "gcc-$gnu" "g++-$gnu" pkg-config

# ---- 2. the target's ALSA in a sysroot ------------------------------------------
if [[ ! -f "$sysroot/usr/include/alsa/asoundlib.h" || ! -e "$sysroot/usr/lib/$gnu/libasound.so" ]]; then
  log "fetching ALSA for $deb_arch into $sysroot"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$sysroot"
  apt_opts=(-oAPT::Architecture="$deb_arch" -oAPT::Architectures="$deb_arch"
            -oDir::State::Lists="$work/lists" -oDir::Cache="$work/cache"
            -oDebug::NoLocking=1)
  apt-get "${apt_opts[@]}" update -qq >&2
  (cd "$work" && apt-get "${apt_opts[@]}" download libasound2 libasound2-dev >&2)
  for deb in "$work"/*.deb; do
    dpkg -x "$deb" "$sysroot"
  done
  [[ -f "$sysroot/usr/include/alsa/asoundlib.h" ]] || die "the ALSA headers did not land in $sysroot"
fi

# ---- 3. build ---------------------------------------------------------------------
triple_env=${target//-/_}
TRIPLE_ENV=$(echo "$triple_env" | tr '[:lower:]' '[:upper:]')
export "CARGO_TARGET_${TRIPLE_ENV}_LINKER=$gnu-gcc"
export "CC_${triple_env}=$gnu-gcc" "CXX_${triple_env}=$gnu-g++" "AR_${triple_env}=$gnu-ar"
export PKG_CONFIG_ALLOW_CROSS=1
export PKG_CONFIG_SYSROOT_DIR="$sysroot"
export PKG_CONFIG_LIBDIR="$sysroot/usr/lib/$gnu/pkgconfig"
# The linker must find libasound.so in the sysroot too.
export "CARGO_TARGET_${TRIPLE_ENV}_RUSTFLAGS=-C link-arg=-L$sysroot/usr/lib/$gnu -C link-arg=-Wl,-rpath-link,$sysroot/usr/lib/$gnu"

log "building earshot for $target ($profile) into $CARGO_TARGET_DIR"
start=$(date +%s)
(cd "$repo" && cargo build "${profile_flag[@]}" "${features[@]}" --target "$target" --bin earshot)
log "build took $(( $(date +%s) - start )) s"

# ---- 4. check the result -----------------------------------------------------------
bin="$CARGO_TARGET_DIR/$target/$profile/earshot"
[[ -f "$bin" ]] || die "no binary at $bin"
machine=$(LC_ALL=C readelf -h "$bin" | awk -F: '/Machine:/ {gsub(/^ +/, "", $2); print $2}')
[[ "$machine" == "$elf_machine" ]] || die "$bin is for '$machine', not $elf_machine"
log "OK: $bin is an ELF for $machine ($(du -h "$bin" | cut -f1))"

if command -v "$qemu" >/dev/null; then
  version=$("$qemu" -L "/usr/$gnu" -E "LD_LIBRARY_PATH=$sysroot/usr/lib/$gnu" "$bin" --version) \
    || die "$bin did not run under $qemu"
  log "OK under $qemu: $version"
else
  log "$qemu not installed; skipped running the binary (apt-get install qemu-user to add it)"
fi
