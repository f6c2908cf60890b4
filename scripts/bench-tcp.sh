#!/usr/bin/env bash
# halobox's own TCP bandwidth leg against iperf3, on the same link (veths
# into a bridge, MTU 9000) between two test nodes of this machine
# (scripts/netns/nodes.sh), in one `halobox bench run` (the peer side started over a real sshd). Prints both
# and their ratio; the target is halobox >= 0.95 x iperf3.
# Usage (as root): scripts/bench-tcp.sh [SECONDS] [STREAMS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-10}"
streams="${2:-4}"
[ "$(id -u)" -eq 0 ] || { echo "error: run as root (it creates network namespaces)" >&2; exit 1; }

cargo build --release --quiet
bin="$(pwd)/${CARGO_TARGET_DIR:-target}/release/halobox"
case "${CARGO_TARGET_DIR:-}" in /*) bin="$CARGO_TARGET_DIR/release/halobox" ;; esac

tag="bt$$"
dir="$(mktemp -d)"
trap 'bash scripts/netns/nodes.sh down "$tag" "$dir"; rm -rf "$dir"' EXIT
bash scripts/netns/nodes.sh up "$tag" 200 "$dir" 9000 9000 >/dev/null

ip netns exec "hb-$tag-a" "$bin" bench run \
  --peer root@10.77.200.2 --peer-ip 10.77.200.2 --peer-halobox "$bin" \
  --ssh-option "UserKnownHostsFile=$dir/known_hosts" --ssh-option "IdentityFile=$dir/client_key" \
  --ssh-option IdentitiesOnly=yes \
  --no-rdma --duration "$secs" --streams "$streams" --save "$dir/run" >"$dir/table.txt" || {
  cat "$dir/table.txt"; echo "error: halobox bench run failed" >&2; exit 1; }

echo "veth + bridge (MTU 9000) between two test nodes, $secs s per test, $(nproc) CPUs"
# results.json: each row's "leg" comes before its "bandwidth_gbps".
awk -F'[:,]' '
  /"leg":/ { gsub(/[" ]/, "", $2); leg = $2 }
  /"bandwidth_gbps":/ { gsub(/ /, "", $2); if ($2 != "null") bw[leg] = $2 }
  END {
    printf "%-8s %14s %14s %8s\n", "streams", "halobox Gb/s", "iperf3 Gb/s", "ratio"
    worst = 99
    for (l in bw) if (l ~ /tcp-bw-/) {
      n = l; sub(/.*tcp-bw-/, "", n)
      i = bw["p0-iperf3-" n]
      r = (i > 0) ? bw[l] / i : 0
      if (r < worst) worst = r
      printf "%-8s %14.2f %14.2f %8.3f\n", n, bw[l], i, r
    }
    if (worst >= 0.95) print "target (halobox >= 0.95 x iperf3): met"
    else print "target (halobox >= 0.95 x iperf3): NOT met"
  }' "$dir/run/results.json"
