#!/usr/bin/env bash
# `halobox model sync` on test nodes of this machine (scripts/netns/nodes.sh:
# veths into a bridge, MTU 9000, each node its own sshd and /root, so its
# own Hugging Face cache): SIZE_MB of random safetensors shards (4 shards)
# laid out in node a's cache as the hub lays it out, then
#   1. a sync to 1 node (a -> b), timed;
#   2. a sync to 3 nodes (a -> b -> c -> d, b emptied first), timed;
#   3. the same bytes by plain `ssh b 'cat > file' < file` on the same link;
#   4. a second sync to the 3 nodes when nothing changed, timed.
# Prints the times, then the ratios last: 3-node/1-node (goal <= 1.2),
# ssh cat / 1-node sync throughput ratio (goal >= 1.0), no-op seconds (goal < 2).
# Usage (as root): scripts/bench-model-sync.sh [SIZE_MB]
# LINK_RATE=RATE (tc's units: 400mbit, 1gbit) limits what flows into each
# node (tc tbf on its bridge port). Unlimited, the veths are as fast as this
# machine's CPUs, and every node's hashing and writing share those: a
# 3-node chain does three times the work on the same cores. Real nodes each
# have their own CPUs and the link is the limit, which a rate emulates.
# HALOBOX_BIN=path uses that binary instead of `cargo build --release`.
set -euo pipefail
cd "$(dirname "$0")/.."
size_mb="${1:-1024}"
[ "$(id -u)" -eq 0 ] || { echo "error: run as root (it creates network namespaces)" >&2; exit 1; }

if [ -n "${HALOBOX_BIN:-}" ]; then
  bin="$(realpath "$HALOBOX_BIN")"
else
  cargo build --release --quiet
  bin="$(pwd)/${CARGO_TARGET_DIR:-target}/release/halobox"
  case "${CARGO_TARGET_DIR:-}" in /*) bin="$CARGO_TARGET_DIR/release/halobox" ;; esac
fi

tag="bm$$"
n=201
dir="$(mktemp -d)"
trap 'bash scripts/netns/nodes.sh down "$tag" "$dir" >/dev/null 2>&1; rm -rf "$dir"' EXIT
bash scripts/netns/nodes.sh up "$tag" "$n" "$dir" 9000 9000 9000 9000 >/dev/null

rate=${LINK_RATE:-}
if [ -n "$rate" ]; then
  for x in a b c d; do
    ip netns exec "hb-$tag-sw" tc qdisc replace dev "p-$x" root tbf rate "$rate" burst 256kb latency 400ms
  done
fi

model=bench/weights
commit=2222222222333333333344444444445555555555
hub_of() { echo "$dir/node_$1/root/.cache/huggingface/hub"; }
repo="$(hub_of a)/models--bench--weights"
mkdir -p "$repo/blobs" "$repo/snapshots/$commit" "$repo/refs"
printf %s "$commit" >"$repo/refs/main"
echo '{"architectures":["LlamaForCausalLM"]}' >"$repo/blobs/0123456789abcdef0123456789abcdef01234567"
ln -s ../../blobs/0123456789abcdef0123456789abcdef01234567 "$repo/snapshots/$commit/config.json"
shard_mb=$((size_mb / 4))
for i in 1 2 3 4; do
  head -c "$((shard_mb << 20))" /dev/urandom >"$repo/blobs/tmp"
  sha=$(sha256sum "$repo/blobs/tmp" | cut -d' ' -f1)
  mv "$repo/blobs/tmp" "$repo/blobs/$sha"
  ln -s "../../blobs/$sha" "$repo/snapshots/$commit/model-0000$i-of-00004.safetensors"
done

cluster() { # FILE NODES...
  local f=$1; shift
  {
    echo "halobox = \"$bin\""
    echo "ssh_options = [\"UserKnownHostsFile=$dir/known_hosts\", \"IdentityFile=$dir/client_key\", \"IdentitiesOnly=yes\"]"
    local i
    for i in "$@"; do
      local x; x=$(printf '%b' "\\x$(printf %x $((96 + i)))")
      printf '\n[[node]]\nname = "%s"\nssh = "root@10.77.%s.%s"\nip = "10.77.%s.%s"\nbackend = "host"\n' "$x" "$n" "$i" "$n" "$i"
    done
  } >"$f"
}
cluster "$dir/one.toml" 1 2
cluster "$dir/three.toml" 1 2 3 4

secs() { date +%s.%N; }
sync_on() { # FILE -> seconds
  local t0 t1
  t0=$(secs)
  ip netns exec "hb-$tag-a" "$bin" model sync "$model" --cluster "$1" >"$dir/out.txt" 2>"$dir/err.txt" || {
    cat "$dir/out.txt" "$dir/err.txt" >&2; echo "error: halobox model sync failed" >&2; exit 1; }
  t1=$(secs)
  echo "$t1 - $t0" | bc -l
}
wipe() { rm -rf "$(hub_of "$1")" "$dir/node_$1/root/.cache/huggingface/halobox-verified"; }

t1=$(sync_on "$dir/one.toml")
echo "1-node sync (a -> b), ${size_mb} MiB: $(printf %.2f "$t1") s"
tail -n +1 "$dir/out.txt" | grep -A3 '^NODE' || true
wipe b
t3=$(sync_on "$dir/three.toml")
echo "3-node sync (a -> b -> c -> d), ${size_mb} MiB: $(printf %.2f "$t3") s"
grep -A4 '^NODE' "$dir/out.txt" || true

t0=$(secs)
for f in "$repo"/snapshots/"$commit"/*.safetensors; do
  ip netns exec "hb-$tag-a" ssh -o StrictHostKeyChecking=yes -o BatchMode=yes \
    -o "UserKnownHostsFile=$dir/known_hosts" -o "IdentityFile=$dir/client_key" -o IdentitiesOnly=yes \
    "root@10.77.$n.2" 'cat > /root/cat-copy' <"$f"
done
tc=$(echo "$(secs) - $t0" | bc -l)
echo "plain ssh 'cat > file' a -> b of the same shards: $(printf %.2f "$tc") s"

t0n=$(sync_on "$dir/three.toml")
grep -q 'moved 0 B' "$dir/out.txt" || { cat "$dir/out.txt"; echo "error: the second sync moved bytes" >&2; exit 1; }
echo "second sync to 3 nodes, nothing changed: $(printf %.2f "$t0n") s"

echo "binary: $bin; $(nproc) CPUs; links: ${rate:-unlimited (veth: the CPUs are the limit)}"
printf 'ratio 3-node / 1-node sync time:          %.2f (goal <= 1.2)\n' "$(echo "$t3 / $t1" | bc -l)"
printf 'ratio 1-node sync / ssh cat throughput:   %.2f (goal >= 1.0)\n' "$(echo "$tc / $t1" | bc -l)"
printf 'no-op sync seconds:                       %.2f (goal < 2)\n' "$t0n"
