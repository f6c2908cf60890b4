#!/usr/bin/env bash
# Median wall time of `halobox doctor` on this host (target: under 20 ms).
# Usage: scripts/bench-doctor.sh [RUNS] [-- extra doctor args]
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-50}"
shift || true
[ "${1:-}" = "--" ] && shift
cargo build --release --quiet
bin=${CARGO_TARGET_DIR:-target}/release/halobox
"$bin" doctor "$@" >/dev/null || true   # warm the page cache
times=()
for _ in $(seq "$runs"); do
  start=$(date +%s%N)
  "$bin" doctor "$@" >/dev/null || true
  end=$(date +%s%N)
  times+=($(( (end - start) / 1000 )))
done
sorted=$(printf '%s\n' "${times[@]}" | sort -n)
median=$(printf '%s\n' "$sorted" | awk -v n="$runs" 'NR == int((n + 1) / 2) { print }')
min=$(printf '%s\n' "$sorted" | head -n1)
max=$(printf '%s\n' "$sorted" | tail -n1)
printf 'halobox doctor %s: %d runs, median %d.%03d ms (min %d.%03d, max %d.%03d)\n' \
  "$*" "$runs" $((median / 1000)) $((median % 1000)) $((min / 1000)) $((min % 1000)) $((max / 1000)) $((max % 1000))
