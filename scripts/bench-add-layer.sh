#!/usr/bin/env bash
# add-layer throughput on one large file, against this machine's
# `sha256sum` + `gzip -1` pipeline doing the same work on the same file
# (hash the raw bytes, compress, hash the compressed bytes).
#
#   bash scripts/bench-add-layer.sh [SIZE_MIB] [BASE]
#
# SIZE_MIB defaults to 1024. BASE is an image archive or an engine reference
# (default: localhost/halobox-test:1 from scripts/engines/start.sh). The file
# is half random bytes, half a repeated text block, so gzip has real work.
set -euo pipefail
cd "$(dirname "$0")/.."

size_mib=${1:-1024}
base=${2:-localhost/halobox-test:1}
work=$(mktemp -d /var/tmp/halobox-bench-XXXXXX)
trap 'rm -rf "$work"' EXIT

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
cargo build --release --locked -q
halobox=$CARGO_TARGET_DIR/release/halobox

file=$work/payload.bin
half=$((size_mib / 2))
{
  head -c "$((half * 1048576))" /dev/urandom
  (set +o pipefail; yes "halobox add-layer benchmark: librccl.so.1 for gfx1151" | head -c "$(((size_mib - half) * 1048576))")
} > "$file"
bytes=$(stat -c %s "$file")
cat "$file" > /dev/null # warm the page cache for both runs

now() { date +%s.%N; }
mbps() { awk -v b="$bytes" -v s="$1" 'BEGIN { printf "%.0f", b / 1e6 / s }'; }

t0=$(now)
tee >(sha256sum > "$work/raw.sha") < "$file" | gzip -1 | sha256sum > "$work/gz.sha"
wait
t1=$(now)
base_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')

t0=$(now)
"$halobox" image add-layer "$base" --add "$file:/opt/bench/payload.bin:0644" \
  --output "$work/image.tar" --tag localhost/halobox-bench:1 >/dev/null
t1=$(now)
ours_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')

printf 'file: %d MiB (%d bytes)\n' "$size_mib" "$bytes"
printf 'sha256sum + gzip -1 + sha256sum: %6.2f s  %5s MB/s\n' "$base_s" "$(mbps "$base_s")"
printf 'halobox image add-layer:         %6.2f s  %5s MB/s (includes reading the base and writing the archive)\n' "$ours_s" "$(mbps "$ours_s")"
awk -v a="$base_s" -v b="$ours_s" 'BEGIN { printf "ratio (pipeline time / add-layer time): %.2fx (target >= 0.70x)\n", a / b }'
