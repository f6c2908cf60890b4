#!/usr/bin/env bash
# Times `halobox cluster up` against plain `ray start` head + worker on the
# same test nodes (scripts/netns/nodes.sh: network namespaces with sshd),
# with the same Ray flags, and `cluster up` for 3 nodes against 2 (workers
# start in parallel).
#   --backend host (default): Ray from the venv on the nodes; plain is
#     `ray start` by hand over ssh.
#   --backend podman|docker: every node is a machine with its own engine;
#     `halobox refresh` makes each node's container from the test image
#     (scripts/netns/node-image.sh), Ray runs inside; plain is `ray start`
#     by `podman exec` (`docker exec`) in the same containers.
# Each round stops Ray again; prints the medians and the ratios (targets:
# halobox ≤ 1.2× plain, 3 nodes ≤ 1.15× 2 nodes), beside the same 3 against
# 2 by hand (workers at once): the test nodes share this machine's cores,
# so three starting Rays slow each other down there, not on real nodes;
# the last line is "...: N.NNx" (halobox against plain).
# Usage (as root): scripts/bench-cluster.sh [ROUNDS] [--backend host|podman|docker]
#   ROUNDS default 3; HALOBOX_BIN=path skips the release build.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3 backend=host
while [ $# -gt 0 ]; do
  case "$1" in
  --backend) backend=${2:-}; shift 2 ;;
  --backend=*) backend=${1#--backend=}; shift ;;
  [0-9]*) rounds=$1; shift ;;
  *) echo "usage: $0 [ROUNDS] [--backend host|podman|docker]" >&2; exit 2 ;;
  esac
done
case "$backend" in host | podman | docker) ;; *) echo "--backend must be host, podman or docker" >&2; exit 2 ;; esac
ray=${HALOBOX_TEST_RAY:-/opt/halobox-ray/bin/ray}
[ -x "$ray" ] || bash scripts/ray-venv.sh "$(dirname "$(dirname "$ray")")"
halobox=$(bash scripts/release-bin.sh)

tag="bc$(($$ % 100000))" n=$(($$ % 250 + 1))
dir=$(mktemp -d)
cleanup() { bash scripts/netns/nodes.sh down "$tag" "$dir"; rm -rf "$dir"; }
trap cleanup EXIT
if [ "$backend" = host ]; then
  bash scripts/netns/nodes.sh up "$tag" "$n" "$dir" 9000 9000 9000 >/dev/null
else
  HB_NODE_ENGINE=$backend HB_NODE_REGISTRY_DATA=/var/cache/halobox-engines/node-registry \
    bash scripts/netns/nodes.sh up "$tag" "$n" "$dir" 9000 9000 9000 >/dev/null
fi
a=10.77.$n.1 b=10.77.$n.2
ssh_opts=(-o BatchMode=yes -o "UserKnownHostsFile=$dir/known_hosts" -o "IdentityFile=$dir/client_key" -o IdentitiesOnly=yes)
ray_args="--num-gpus=1 --num-cpus=1 --disable-usage-stats --object-store-memory=80000000"
on() { local x=$1; shift; nsenter -t "$(cat "$dir/node_$x.pid")" -m -p -n -- env HOME=/root "$@"; }
if [ "$backend" != host ]; then
  image=$(HALOBOX_BIN=$halobox bash scripts/netns/node-image.sh "$tag" "$n")
  for x in a b c; do
    on "$x" "$halobox" refresh --backend "$backend" --image "$image" --memlock 8M --name vllm --yes >"$dir/refresh_$x.log" 2>&1 \
      || { cat "$dir/refresh_$x.log"; exit 1; }
  done
fi
config() { # COUNT
  cat <<TOML
ray = "$ray"
halobox = "$halobox"
ray_args = ["--object-store-memory=80000000"]
ray_head_args = ["--include-dashboard=false"]
ssh_options = ["UserKnownHostsFile=$dir/known_hosts", "IdentityFile=$dir/client_key", "IdentitiesOnly=yes"]
TOML
  for i in $(seq "$1"); do
    printf '[[node]]\nname = "%s"\nssh = "root@10.77.%s.%s"\nip = "10.77.%s.%s"\nbackend = "%s"\ncpus = 1\n' \
      "$(echo abc | cut -c"$i")" "$n" "$i" "$n" "$i" "$backend"
  done
}
config 2 >"$dir/cluster2.toml"
config 3 >"$dir/cluster3.toml"
now() { date +%s.%N; }
# plain X ARGS: `ray start ARGS` on node X, as a user would without halobox.
plain() {
  local x=$1; shift
  if [ "$backend" = host ]; then
    on a ssh "${ssh_opts[@]}" "root@10.77.$n.$(($(printf %d "'$x") - 96))" "RAY_USAGE_STATS_ENABLED=0 $ray $*"
  else
    local sock flag=--url
    [ "$backend" = docker ] && flag=-H
    sock=unix:///proc/$(cat "$dir/node_$x.pid")/root/run/$([ "$backend" = docker ] && echo docker.sock || echo podman/podman.sock)
    "$backend" "$flag" "$sock" exec vllm env RAY_USAGE_STATS_ENABLED=0 "$ray" "$@"
  fi
}
up() { # COUNT: seconds of `halobox cluster up`, then down
  local t0 t1
  t0=$(now)
  on a "$halobox" cluster up --cluster "$dir/cluster$1.toml" >"$dir/up.log" 2>&1 || { cat "$dir/up.log" >&2; exit 1; }
  t1=$(now)
  on a "$halobox" cluster down --cluster "$dir/cluster$1.toml" >/dev/null
  awk "BEGIN {print $t1 - $t0}"
}

c=10.77.$n.3
halobox_t=() plain_t=() three_t=() plain3_t=()
for r in $(seq "$rounds"); do
  halobox_t+=("$(up 2)")
  t0=$(now)
  # shellcheck disable=SC2086
  plain a start --head --port=6379 --node-ip-address="$a" $ray_args --include-dashboard=false >"$dir/plain.log" 2>&1
  # shellcheck disable=SC2086
  plain b start --address="$a:6379" --node-ip-address="$b" $ray_args >>"$dir/plain.log" 2>&1
  t1=$(now)
  for x in a b; do plain "$x" stop >/dev/null 2>&1 || true; done
  plain_t+=("$(awk "BEGIN {print $t1 - $t0}")")
  three_t+=("$(up 3)")
  # The same by hand for 3 nodes, the two workers at once: what this
  # machine's cores allow three nodes starting on them.
  t0=$(now)
  # shellcheck disable=SC2086
  plain a start --head --port=6379 --node-ip-address="$a" $ray_args --include-dashboard=false >"$dir/plain.log" 2>&1
  # shellcheck disable=SC2086
  plain b start --address="$a:6379" --node-ip-address="$b" $ray_args >>"$dir/plain.log" 2>&1 &
  # shellcheck disable=SC2086
  plain c start --address="$a:6379" --node-ip-address="$c" $ray_args >>"$dir/plain.log" 2>&1 &
  wait
  t1=$(now)
  for x in a b c; do plain "$x" stop >/dev/null 2>&1 || true; done
  plain3_t+=("$(awk "BEGIN {print $t1 - $t0}")")
  echo "round $r: halobox cluster up ${halobox_t[-1]} s (3 nodes: ${three_t[-1]} s), plain ray start ${plain_t[-1]} s (3 nodes: ${plain3_t[-1]} s)"
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
h=$(median "${halobox_t[@]}") p=$(median "${plain_t[@]}") t=$(median "${three_t[@]}") p3=$(median "${plain3_t[@]}")
where=$([ "$backend" = host ] && echo "over ssh" || echo "by $backend exec in the same containers")
printf 'median over %d round(s), backend %s: plain ray start (workers at once) for 3 nodes %.2f s against 2 nodes %.2f s: %.2fx (these nodes share the machine'"'"'s %d cores)\n' \
  "$rounds" "$backend" "$p3" "$p" "$(awk "BEGIN {print $p3 / $p}")" "$(nproc)"
printf 'median over %d round(s), backend %s: halobox cluster up for 3 nodes %.2f s against 2 nodes %.2f s: %.2fx\n' \
  "$rounds" "$backend" "$t" "$h" "$(awk "BEGIN {print $t / $h}")"
printf 'median over %d round(s), backend %s: halobox cluster up %.2f s (preflight, head, worker, wait for 2 nodes in Ray), plain ray start head + worker %s %.2f s: %.2fx\n' \
  "$rounds" "$backend" "$h" "$where" "$p" "$(awk "BEGIN {print $h / $p}")"
