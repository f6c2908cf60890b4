#!/usr/bin/env bash
# halobox refresh against the community refresh script's approach, doing the
# same work on the same image: an image already pulled from the loopback
# registry, a toolbox container replaced. Runs alternate; medians printed.
# The community approach is the sequence of CLI calls refresh_toolbox.sh
# makes: toolbox list + rm, pull, image inspect x3, tag, toolbox create,
# images listing. halobox also starts the new container to check it runs
# (the community script never does); that check's own cost is printed apart.
# Needs the test engines: bash scripts/engines/start.sh (as root).
# Usage: scripts/bench-refresh.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-5}"
image=127.0.0.1:5000/halobox/test:1
sock=unix:///run/podman/podman.sock
[ -S /run/podman/podman.sock ] || { echo "error: no podman API socket: run scripts/engines/start.sh" >&2; exit 1; }
cargo build --release --quiet
bin=${CARGO_TARGET_DIR:-$PWD/target}/release/halobox
podman pull -q --tls-verify=false "$image" >/dev/null

community() {
  toolbox list >/dev/null 2>&1
  toolbox rm -f bench-community >/dev/null 2>&1 || true
  podman pull -q "$image" >/dev/null
  for _ in 1 2 3; do podman image inspect "$image" --format '{{.Id}}' >/dev/null; done
  podman tag "$image" 127.0.0.1:5000/halobox/test:bench-community
  toolbox -y create --image "$image" bench-community >/dev/null 2>&1
  podman images --format '{{.Repository}}:{{.Tag}} {{.ID}}' >/dev/null
}

halobox_refresh() {
  "$bin" refresh --engine "$sock" --backend toolbox --name bench-halobox \
    --image "$image" --memlock 8M --yes --json 2>/dev/null
}

now_us() { echo $(( $(date +%s%N) / 1000 )); }
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

community; halobox_refresh >/dev/null   # warm both paths once
c_times=() h_times=() s_times=()
for _ in $(seq "$runs"); do
  t0=$(now_us); community; t1=$(now_us)
  c_times+=($(( t1 - t0 )))
  t0=$(now_us); out=$(halobox_refresh); t1=$(now_us)
  h_times+=($(( t1 - t0 )))
  s_times+=("$(printf '%s' "$out" | jq '[.timings[] | select(.step == "start_check") | .ms] | add * 1000 | floor')")
done
c=$(printf '%s\n' "${c_times[@]}" | median)
h=$(printf '%s\n' "${h_times[@]}" | median)
s=$(printf '%s\n' "${s_times[@]}" | median)
toolbox rm -f bench-community >/dev/null 2>&1 || true
podman rm -f bench-halobox >/dev/null 2>&1 || true
podman rmi 127.0.0.1:5000/halobox/test:bench-community >/dev/null 2>&1 || true
awk -v c="$c" -v h="$h" -v s="$s" -v n="$runs" 'BEGIN {
  printf "community approach (CLI calls):   median %8.1f ms over %d runs\n", c / 1000, n
  printf "halobox refresh (toolbox):        median %8.1f ms over %d runs\n", h / 1000, n
  printf "  of which the start check:       median %8.1f ms\n", s / 1000
  printf "halobox without the start check:         %8.1f ms\n", (h - s) / 1000
  printf "ratio halobox / community: %.3f (without the start check: %.3f; target <= 0.25)\n", h / c, (h - s) / c
}'
