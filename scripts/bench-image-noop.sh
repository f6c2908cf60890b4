#!/usr/bin/env bash
# `halobox image sync` when every node already holds the image (step 5 of
# scripts/bench-image-sync.sh alone, without its large image): 4 test nodes
# of this machine (scripts/netns/nodes.sh, a podman engine each, a -> b ->
# c -> d), localhost/halobox-distro:1 plus one layer of SIZE_MB random bytes
# (default 512, as the full bench's image; 0: none) pushed to the nodes'
# registry, one sync that moves it, then RUNS more syncs (default 5), each
# timed from node a; each must move no byte. Prints every run's seconds
# (and whether the head ran its export), then the median last, ending
# in `x` (goal < 2). KIND `localhost` loads the same image into node a's
# engine as localhost/bench-image-noop:1 instead (a `halobox build` of the
# head's own, no registry digest) and syncs that.
# Usage (as root): scripts/bench-image-noop.sh [RUNS] [SIZE_MB] [registry|localhost]
#   HALOBOX_BIN=path uses that binary instead of `cargo build --release`.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-5}"
size_mb="${2:-512}"
kind="${3:-registry}"
case "$kind" in registry|localhost) ;; *) echo "error: KIND is registry or localhost, not $kind" >&2; exit 1 ;; esac
[ "$(id -u)" -eq 0 ] || { echo "error: run as root (it creates network namespaces)" >&2; exit 1; }
for t in skopeo bc python3; do
  command -v "$t" >/dev/null || { echo "error: $t is missing: bash scripts/engines/install.sh" >&2; exit 1; }
done
podman image exists localhost/halobox-distro:1 \
  || { echo "error: localhost/halobox-distro:1 is missing: bash scripts/engines/start.sh" >&2; exit 1; }

bin="$(realpath "$(bash scripts/release-bin.sh)")"

tag="bn$$"
n=204
dir="$(mktemp -d)"
trap 'bash scripts/netns/nodes.sh down "$tag" "$dir" >/dev/null 2>&1; rm -rf "$dir"' EXIT
HB_NODE_ENGINE=podman bash scripts/netns/nodes.sh up "$tag" "$n" "$dir" 9000 9000 9000 9000 >/dev/null
sw="hb-$tag-sw"
image="10.77.$n.254:5000/bench/image-noop:1"

on() { # NODE CMD...: CMD inside node NODE
  local x=$1; shift
  nsenter -t "$(cat "$dir/node_$x.pid")" -m -p -n -- env HOME=/root "$@"
}

if [ "$size_mb" -gt 0 ]; then
  head -c "$((size_mb << 20))" /dev/urandom >"$dir/l1.bin"
  "$bin" image add-layer localhost/halobox-distro:1 --engine unix:///run/podman/podman.sock \
    --add "$dir/l1.bin:/bench/l1.bin" --output "$dir/one.tar" >/dev/null
  rm -f "$dir/l1.bin"
else
  skopeo copy -q containers-storage:localhost/halobox-distro:1 "oci-archive:$dir/one.tar"
fi
if [ "$kind" = localhost ]; then
  image="localhost/bench-image-noop:1"
  on a skopeo copy -q "oci-archive:$dir/one.tar" "containers-storage:$image"
else
  ip netns exec "$sw" skopeo copy -q --dest-tls-verify=false "oci-archive:$dir/one.tar" "docker://$image"
fi
rm -f "$dir/one.tar"
{
  echo "halobox = \"$bin\""
  echo "ssh_options = [\"UserKnownHostsFile=$dir/known_hosts\", \"IdentityFile=$dir/client_key\", \"IdentitiesOnly=yes\"]"
  for i in 1 2 3 4; do
    x=$(printf '%b' "\\x$(printf %x $((96 + i)))")
    printf '\n[[node]]\nname = "%s"\nssh = "root@10.77.%s.%s"\nip = "10.77.%s.%s"\nbackend = "podman"\n' "$x" "$n" "$i" "$n" "$i"
  done
} >"$dir/cluster.toml"

sync_once() { # -> seconds; the JSON report in $dir/report.json
  local t0 t1
  t0=$(date +%s.%N)
  on a "$bin" image sync "$image" --json --cluster "$dir/cluster.toml" >"$dir/report.json" 2>"$dir/err.txt" || {
    cat "$dir/report.json" "$dir/err.txt" >&2; echo "error: halobox image sync failed" >&2; exit 1; }
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}

sync_once >/dev/null
times=()
for _ in $(seq "$runs"); do
  t=$(sync_once)
  moved=$(python3 -c "import json; r=json.load(open('$dir/report.json')); print(r['stream'] + sum(n['carried'] for n in r['nodes']))")
  [ "$moved" = 0 ] || { echo "error: a no-op sync moved $moved bytes" >&2; exit 1; }
  exported=$(python3 -c "import json; e=json.load(open('$dir/report.json'))['plan'].get('exported'); print({True: 'yes', False: 'no'}.get(e, 'not reported'))")
  printf 'no-op sync of %s, 4 nodes: %.2f s (the head ran its export: %s)\n' "$kind" "$t" "$exported"
  times+=("$t")
done
echo "binary: $bin; $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}')
printf 'no-op sync seconds, median of %s (goal < 2): %.2fx\n' "$runs" "$median"
