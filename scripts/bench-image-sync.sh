#!/usr/bin/env bash
# `halobox image sync` on test nodes of this machine (scripts/netns/nodes.sh
# with a podman engine per node: veths into a bridge, MTU 9000, each node its
# own sshd, /root and image store; the nodes' registry on the bridge at
# 10.77.N.254:5000). The image: localhost/halobox-distro:1 plus two layers of
# SIZE_MB/2 random bytes each (`halobox image add-layer --output`, pushed to
# the nodes' registry with skopeo; never loaded into this machine's store,
# which the nodes see as an additional store). Then:
#   1. links held at LINK_RATE (default 1gbit, tc tbf on each node's bridge
#      port): a sync to 1 node (a -> b), then to 3 nodes (a -> b -> c -> d),
#      each node emptied first, timed;
#   2. iperf3 a -> b on the same held link, against the chain's own
#      throughput into b (its bytes over its stream's seconds);
#   3. links unthrottled: the chain's throughput into b against `halobox
#      model sync`'s of the same bytes (the image's blobs laid out as a
#      model in node a's Hugging Face cache), both by their own counters;
#   4. the old way: b, c and d each pulling from the registry at once
#      (`podman pull`), through one shared uplink held at LINK_RATE / 3 (tc
#      tbf on the bridge itself: what the registry sends), against the image
#      sync under the same uplink (the head pulls once, the chain moves it);
#   5. a second sync when every node holds it (a no-op), timed.
# Prints the figures, then the ratios last, one per line, ending in `x`:
# 3-node/1-node time (goal <= 1.2; whole runs, then the streams alone), chain/iperf3 throughput at the held rate
# (goal >= 0.9), chain/model-sync throughput unthrottled (goal >= 0.9), old
# way/image sync time (goal > 1), and the no-op's seconds (goal < 2).
#
# NODE_CPUS=CORES holds each node to that many cores (a cpu cgroup per node
# with a CFS quota, holding the node's sshd and engine and so every command
# run on it), so a node has the same CPU in the 1-node run as in the 3-node
# one, as separate machines do; without it (the default, NODE_CPUS=0) the
# nodes share every core, and the 3-node run's imports take CPU the 1-node
# run's import had to itself. On this 2-core machine NODE_CPUS=0.5 (the
# cores over the 4 nodes) is too little to relay 1 Gbit/s, so the
# throughput ratios then measure the hold, not the chain.
#
# The test nodes share this machine's CPUs: unthrottled, every node's
# sha256 and writes run on the same 2 cores, so both transfers are bound by
# hashing. sha2 uses SHA-NI where the CPU has it (`grep -o sha_ni
# /proc/cpuinfo`), about 1.5-2 GB/s a core; a receiver hashes each blob in
# its own thread while the stream goes on. A 16-core node hashes one stream
# on one core: about 12-16 Gb/s per stream with SHA-NI, so a 25 Gb/s link is
# filled at roughly half to two thirds by one stream and a 100 Gb/s link at
# about an eighth to a sixth; more is only reached by hashing several blobs
# at once (not done yet).
# Usage (as root): scripts/bench-image-sync.sh [SIZE_MB]
#   LINK_RATE=RATE (tc's units: 1gbit, 400mbit); NODE_CPUS=CORES (e.g. 0.5;
#   default 0: no hold); HALOBOX_BIN=path uses that binary instead of `cargo build
#   --release`.
set -euo pipefail
cd "$(dirname "$0")/.."
size_mb="${1:-512}"
rate=${LINK_RATE:-1gbit}
case "$rate" in
  *gbit) mbit=$(( ${rate%gbit} * 1000 )) ;;
  *mbit) mbit=${rate%mbit} ;;
  *) echo "error: LINK_RATE must be in gbit or mbit (e.g. 1gbit, 400mbit)" >&2; exit 2 ;;
esac
share="$(( mbit / 3 ))mbit"
cpus=${NODE_CPUS:-0}
quota=$(printf %.0f "$(echo "$cpus * 100000" | bc -l)")
[ -d /sys/fs/cgroup/cpu ] || [ "$quota" -eq 0 ] \
  || { echo "error: no cgroup v1 cpu controller at /sys/fs/cgroup/cpu to hold the nodes to NODE_CPUS=$cpus: run with NODE_CPUS=0" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "error: run as root (it creates network namespaces)" >&2; exit 1; }
for t in skopeo iperf3 tc bc; do
  command -v "$t" >/dev/null || { echo "error: $t is missing: bash scripts/engines/install.sh" >&2; exit 1; }
done
podman image exists localhost/halobox-distro:1 \
  || { echo "error: localhost/halobox-distro:1 is missing: bash scripts/engines/start.sh" >&2; exit 1; }

bin="$(realpath "$(bash scripts/release-bin.sh)")"

tag="bi$$"
n=203
dir="$(mktemp -d)"
# The nodes' cpu cgroups (none when NODE_CPUS=0).
cg() { echo "/sys/fs/cgroup/cpu/hb-$tag-$1"; }
uncap() {
  local x
  for x in a b c d; do
    [ -d "$(cg "$x")" ] || continue
    for _ in 1 2 3 4 5; do rmdir "$(cg "$x")" 2>/dev/null && break; sleep 1; done
  done
}
trap 'bash scripts/netns/nodes.sh down "$tag" "$dir" >/dev/null 2>&1; uncap; rm -rf "$dir"' EXIT
HB_NODE_ENGINE=podman bash scripts/netns/nodes.sh up "$tag" "$n" "$dir" 9000 9000 9000 9000 >/dev/null
sw="hb-$tag-sw"
registry="10.77.$n.254:5000"
image="$registry/bench/image-sync:1"
if [ "$quota" -gt 0 ]; then
  for x in a b c d; do
    mkdir "$(cg "$x")"
    echo "$quota" >"$(cg "$x")/cpu.cfs_quota_us"
    for p in $(ip netns pids "hb-$tag-$x"); do
      echo "$p" >"$(cg "$x")/cgroup.procs" 2>/dev/null || true
    done
  done
fi

# on NODE CMD...: CMD inside node NODE (its mount, PID and network
# namespaces, and its cpu cgroup).
on() {
  local x=$1; shift
  local enter=(nsenter -t "$(cat "$dir/node_$x.pid")" -m -p -n -- env HOME=/root "$@")
  if [ "$quota" -gt 0 ]; then
    # shellcheck disable=SC2016
    bash -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' on "$(cg "$x")" "${enter[@]}"
  else
    "${enter[@]}"
  fi
}

# The image: two random layers on the distro image, pushed to the registry.
head -c "$((size_mb << 19))" /dev/urandom >"$dir/l1.bin"
head -c "$((size_mb << 19))" /dev/urandom >"$dir/l2.bin"
"$bin" image add-layer localhost/halobox-distro:1 --engine unix:///run/podman/podman.sock \
  --add "$dir/l1.bin:/bench/l1.bin" --output "$dir/one.tar" >/dev/null
"$bin" image add-layer "$dir/one.tar" --add "$dir/l2.bin:/bench/l2.bin" --output "$dir/two.tar" >/dev/null
ip netns exec "$sw" skopeo copy -q --dest-tls-verify=false "oci-archive:$dir/two.tar" "docker://$image"
rm -f "$dir/l1.bin" "$dir/l2.bin" "$dir/one.tar" "$dir/two.tar"

cluster() { # FILE NODES...
  local f=$1; shift
  {
    echo "halobox = \"$bin\""
    echo "ssh_options = [\"UserKnownHostsFile=$dir/known_hosts\", \"IdentityFile=$dir/client_key\", \"IdentitiesOnly=yes\"]"
    local i
    for i in "$@"; do
      local x; x=$(printf '%b' "\\x$(printf %x $((96 + i)))")
      printf '\n[[node]]\nname = "%s"\nssh = "root@10.77.%s.%s"\nip = "10.77.%s.%s"\nbackend = "podman"\n' "$x" "$n" "$i" "$n" "$i"
    done
  } >"$f"
}
cluster "$dir/one.toml" 1 2
cluster "$dir/three.toml" 1 2 3 4

hold() { # RATE|none: every node's link
  local x
  for x in a b c d; do
    if [ "$1" = none ]; then
      ip netns exec "$sw" tc qdisc del dev "p-$x" root 2>/dev/null || true
    else
      ip netns exec "$sw" tc qdisc replace dev "p-$x" root tbf rate "$1" burst 256kb latency 400ms
    fi
  done
}
uplink() { # RATE|none: what the registry sends (the bridge's own egress)
  if [ "$1" = none ]; then
    ip netns exec "$sw" tc qdisc del dev br0 root 2>/dev/null || true
  else
    ip netns exec "$sw" tc qdisc replace dev br0 root tbf rate "$1" burst 256kb latency 400ms
  fi
}
empty() { # NODE...: no image, no store
  local x
  for x in "$@"; do
    on "$x" podman rmi -f "$image" >/dev/null 2>&1 || true
    on "$x" rm -rf /root/.local/share/halobox/images
  done
}
secs() { date +%s.%N; }
sync_on() { # FILE -> seconds; the JSON report in $dir/report.json
  local t0 t1
  t0=$(secs)
  on a "$bin" image sync "$image" --json --cluster "$1" >"$dir/report.json" 2>"$dir/err.txt" || {
    cat "$dir/report.json" "$dir/err.txt" >&2; echo "error: halobox image sync failed" >&2; exit 1; }
  t1=$(secs)
  echo "$t1 - $t0" | bc -l
}
# field EXPR: a value of the last report (python3 reads the JSON).
field() { python3 -c "import json,sys; r=json.load(open('$dir/report.json')); print($1)"; }
b_rate() { field "[n for n in r['nodes'] if n['label']=='node b'][0]['carried'] / max([n for n in r['nodes'] if n['label']=='node b'][0]['seconds'], 1e-9)"; }

# 1. held links: 1 node, then 3.
hold "$rate"
empty a b c d
t1=$(sync_on "$dir/one.toml")
size=$(field "r['plan']['size']")
chain_held=$(b_rate)
s1=$(field "max(n['seconds'] for n in r['nodes'])")
echo "image: $image, $size bytes compressed"
echo "1-node sync (a -> b) at $rate: $(printf %.2f "$t1") s; into b $(printf %.1f "$(echo "$chain_held * 8 / 1000000" | bc -l)") Mbit/s"
empty a b
t3=$(sync_on "$dir/three.toml")
s3=$(field "max(n['seconds'] for n in r['nodes'])")
echo "3-node sync (a -> b -> c -> d) at $rate: $(printf %.2f "$t3") s (its stream $(printf %.2f "$s3") s, the 1-node one's $(printf %.2f "$s1") s; the rest is the head's pull and the nodes' imports, which share this machine's cores)"

# 2. iperf3 on the same held link.
on b iperf3 -s -1 -B "10.77.$n.2" >/dev/null 2>&1 &
sleep 1
iperf_bps=$(on a iperf3 -c "10.77.$n.2" -t 5 -J | python3 -c "import json,sys; print(json.load(sys.stdin)['end']['sum_received']['bits_per_second'])")
wait || true
echo "iperf3 a -> b at $rate: $(printf %.1f "$(echo "$iperf_bps / 1000000" | bc -l)") Mbit/s"

# 3. unthrottled: the chain against model sync of the same bytes.
hold none
empty b
sync_on "$dir/one.toml" >/dev/null
chain_free=$(b_rate)
commit=6666666666777777777788888888889999999999
hub_a="$dir/node_a/root/.cache/huggingface/hub/models--bench--image"
store_a="$dir/node_a/root/.local/share/halobox/images/models--halobox--image-blobs/blobs"
mkdir -p "$hub_a/blobs" "$hub_a/snapshots/$commit" "$hub_a/refs"
printf %s "$commit" >"$hub_a/refs/main"
for f in "$store_a"/*; do
  b=$(basename "$f")
  case "$b" in *.*) continue ;; esac
  cp "$f" "$hub_a/blobs/$b"
  ln -s "../../blobs/$b" "$hub_a/snapshots/$commit/$b.bin"
done
on a "$bin" model sync bench/image --cluster "$dir/one.toml" >"$dir/model.txt" 2>&1 || {
  cat "$dir/model.txt" >&2; echo "error: halobox model sync failed" >&2; exit 1; }
# model sync's own rate into b: its table's RATE (bytes over its stream's
# seconds, as the image sync's figure), e.g. `node b  512.0 MiB  301.2 MiB/s  yes`.
model_free=$(python3 - "$dir/model.txt" <<'PY'
import re, sys
units = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
for line in open(sys.argv[1]):
    m = re.match(r"^node b\s+\S+ \S+\s+([0-9.]+) (\w+)/s", line)
    if m:
        print(float(m.group(1)) * units[m.group(2)])
        break
else:
    sys.exit("no rate for node b in model sync's table")
PY
)
echo "unthrottled into b: image sync chain $(printf %.1f "$(echo "$chain_free / 1048576" | bc -l)") MiB/s, model sync $(printf %.1f "$(echo "$model_free / 1048576" | bc -l)") MiB/s"

# 4. the old way through one shared uplink, against the image sync through it.
hold "$rate"
uplink "$share"
empty a b c d
t0=$(secs)
for x in b c d; do
  on "$x" podman pull -q "$image" >/dev/null &
done
wait
told=$(echo "$(secs) - $t0" | bc -l)
empty a b c d
tnew=$(sync_on "$dir/three.toml")
uplink none
echo "uplink $share shared: every node pulling $(printf %.2f "$told") s; image sync $(printf %.2f "$tnew") s"

# 5. the no-op.
tnoop=$(sync_on "$dir/three.toml")
[ "$(field "r['stream']")" = 0 ] || { echo "error: the second sync moved bytes" >&2; exit 1; }
echo "second sync, every node holds it: $(printf %.2f "$tnoop") s"

echo "binary: $bin; $(nproc) CPUs; $([ "$quota" -gt 0 ] && printf 'each node held to %.2f cores' "$cpus" || echo 'the nodes share every core'); sha_ni: $(grep -q sha_ni /proc/cpuinfo && echo yes || echo no)"
printf '3-node / 1-node sync time at %s: %.2fx\n' "$rate" "$(echo "$t3 / $t1" | bc -l)"
printf '3-node / 1-node stream time at %s: %.2fx\n' "$rate" "$(echo "$s3 / $s1" | bc -l)"
printf 'chain / iperf3 throughput at %s: %.2fx\n' "$rate" "$(echo "$chain_held * 8 / $iperf_bps" | bc -l)"
printf 'chain / model sync throughput unthrottled: %.2fx\n' "$(echo "$chain_free / $model_free" | bc -l)"
printf 'old way (every node pulls) / image sync time, shared uplink %s: %.2fx\n' "$share" "$(echo "$told / $tnew" | bc -l)"
printf 'no-op sync seconds (goal < 2): %.2fx\n' "$tnoop"
