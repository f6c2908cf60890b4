#!/usr/bin/env bash
# Runs every cargo-fuzz target for SECONDS each (default 30). cargo-fuzz needs
# nightly features; RUSTC_BOOTSTRAP=1 enables them on the stable toolchain.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-30}"
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
export RUSTC_BOOTSTRAP=1
for target in $(cargo fuzz list); do
  echo "==> fuzz $target for ${secs}s"
  cargo fuzz run "$target" -- -max_total_time="$secs" -max_len=4096 2>&1 | tail -n 3
done
