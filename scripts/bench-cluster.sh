#!/usr/bin/env bash
# Times `halobox cluster up` for two nodes (network namespaces with sshd, Ray
# from the venv through the `host` backend) against plain `ray start` head +
# worker by hand over ssh on the same namespaces, with the same Ray flags.
# Each round stops Ray again; prints the median of each and the ratio
# (target: halobox ≤ 1.2× plain).
# Usage (as root): scripts/bench-cluster.sh [ROUNDS]    (default 3; HALOBOX_BIN=path skips the release build)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
ray=${HALOBOX_TEST_RAY:-/opt/halobox-ray/bin/ray}
[ -x "$ray" ] || bash scripts/ray-venv.sh "$(dirname "$(dirname "$ray")")"
if [ -z "${HALOBOX_BIN:-}" ]; then
  cargo build --release --quiet
  target=${CARGO_TARGET_DIR:-target}
  case "$target" in /*) ;; *) target=$PWD/$target ;; esac
  HALOBOX_BIN=$target/release/halobox
fi
halobox=$HALOBOX_BIN

tag="bc$(($$ % 100000))" n=$(($$ % 250 + 1))
dir=$(mktemp -d)
cleanup() { bash scripts/netns/nodes.sh down "$tag" "$dir"; rm -rf "$dir"; }
trap cleanup EXIT
bash scripts/netns/nodes.sh up "$tag" "$n" "$dir" 9000 9000 >/dev/null
a=10.77.$n.1 b=10.77.$n.2
ssh_opts=(-o BatchMode=yes -o "UserKnownHostsFile=$dir/known_hosts" -o "IdentityFile=$dir/client_key" -o IdentitiesOnly=yes)
ray_args="--num-gpus=1 --num-cpus=1 --disable-usage-stats --object-store-memory=80000000"
cat >"$dir/cluster.toml" <<TOML
ray = "$ray"
halobox = "$halobox"
ray_args = ["--object-store-memory=80000000"]
ray_head_args = ["--include-dashboard=false"]
ssh_options = ["UserKnownHostsFile=$dir/known_hosts", "IdentityFile=$dir/client_key", "IdentitiesOnly=yes"]
[[node]]
name = "a"
ssh = "root@$a"
ip = "$a"
backend = "host"
cpus = 1
[[node]]
name = "b"
ssh = "root@$b"
ip = "$b"
backend = "host"
cpus = 1
TOML
in_a() { ip netns exec "hb-$tag-a" "$@"; }
now() { date +%s.%N; }
stop_all() { for h in $a $b; do in_a ssh "${ssh_opts[@]}" "root@$h" "$ray stop" >/dev/null 2>&1 || true; done; }

halobox_t=() plain_t=()
for r in $(seq "$rounds"); do
  t0=$(now)
  in_a "$halobox" cluster up --cluster "$dir/cluster.toml" >"$dir/up.log" 2>&1 || { cat "$dir/up.log"; exit 1; }
  t1=$(now)
  in_a "$halobox" cluster down --cluster "$dir/cluster.toml" >/dev/null
  halobox_t+=("$(awk "BEGIN {print $t1 - $t0}")")

  t0=$(now)
  in_a ssh "${ssh_opts[@]}" "root@$a" "RAY_USAGE_STATS_ENABLED=0 $ray start --head --port=6379 --node-ip-address=$a $ray_args --include-dashboard=false" >"$dir/plain.log" 2>&1
  in_a ssh "${ssh_opts[@]}" "root@$b" "RAY_USAGE_STATS_ENABLED=0 $ray start --address=$a:6379 --node-ip-address=$b $ray_args" >>"$dir/plain.log" 2>&1
  t1=$(now)
  stop_all
  plain_t+=("$(awk "BEGIN {print $t1 - $t0}")")
  echo "round $r: halobox cluster up ${halobox_t[-1]} s, plain ray start ${plain_t[-1]} s"
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
h=$(median "${halobox_t[@]}") p=$(median "${plain_t[@]}")
printf 'median over %d round(s): halobox cluster up %.2f s (preflight, head, worker, wait for 2 nodes in Ray), plain ray start head + worker %.2f s: %.2fx\n' \
  "$rounds" "$h" "$p" "$(awk "BEGIN {print $h / $p}")"
