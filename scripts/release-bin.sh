#!/usr/bin/env bash
# Prints the halobox binary a benchmark times: HALOBOX_BIN when set (it must
# be executable), else this checkout's release build, built first.
#   halobox=$(bash scripts/release-bin.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${HALOBOX_BIN:-}" ]; then
  [ -x "$HALOBOX_BIN" ] || {
    echo "error: HALOBOX_BIN=$HALOBOX_BIN is not an executable halobox: unset it to build one" >&2
    exit 1
  }
  echo "$HALOBOX_BIN"
  exit 0
fi
cargo build --release --quiet >&2
target=${CARGO_TARGET_DIR:-target}
case "$target" in /*) ;; *) target=$PWD/$target ;; esac
echo "$target/release/halobox"
