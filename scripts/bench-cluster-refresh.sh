#!/usr/bin/env bash
# Times `halobox cluster refresh` of 3 nodes against one node's own
# `halobox refresh` of the same image, on test nodes that behave like
# machines (scripts/netns/nodes.sh with a podman engine per node and real
# sshd; images from scripts/netns/fleet-image.sh in the nodes' registry).
# Rounds alternate between the two images, so every run really replaces
# the container (pull, pin, create, start check, swap, prune). Then runs
# scripts/bench-cluster-doctor.sh (`cluster doctor` of 3 nodes against one
# `ssh node halobox doctor --json`). Prints the medians; its last two lines
# are the ratios, each ending "N.NNx": cluster refresh (target <= 1.3x),
# then cluster doctor (target <= 1.5x).
# Usage (as root, under the live-test lock):
#   scripts/bench-cluster-refresh.sh [ROUNDS [DOCTOR_RUNS]]
#   ROUNDS default 3, DOCTOR_RUNS default 9; HALOBOX_BIN=path skips the
#   release build (for both).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/.."
rounds=${1:-3}
doctor_runs=${2:-9}
halobox=$(bash scripts/release-bin.sh)

tag="br$(($$ % 100000))" n=$(($$ % 250 + 1))
dir=$(mktemp -d)
cleanup() { bash scripts/netns/nodes.sh down "$tag" "$dir" >/dev/null 2>&1; rm -rf "$dir"; }
trap cleanup EXIT
HB_NODE_ENGINE=podman HB_NODE_REGISTRY_DATA=/var/cache/halobox-engines/node-registry \
  bash scripts/netns/nodes.sh up "$tag" "$n" "$dir" 9000 9000 9000 >/dev/null
# on X CMD...: CMD on node X, as a login there would run it.
on() {
  local pid
  pid=$(cat "$dir/node_$1.pid")
  shift
  env -u SSH_AUTH_SOCK -u CONTAINER_HOST -u DOCKER_HOST -u XDG_RUNTIME_DIR HOME=/root \
    nsenter -t "$pid" -m -p -n -- "$@"
}
for x in a b c; do on "$x" mkdir -p -m 700 /run/user/0; done
mapfile -t images < <(HALOBOX_BIN=$halobox bash scripts/netns/fleet-image.sh "$tag" "$n")
{
  echo "halobox = \"$halobox\""
  echo "ssh_options = [\"UserKnownHostsFile=$dir/known_hosts\", \"IdentityFile=$dir/client_key\", \"IdentitiesOnly=yes\"]"
  i=0
  for x in a b c; do
    i=$((i + 1))
    printf '\n[[node]]\nname = "%s"\nssh = "root@10.77.%s.%s"\nip = "10.77.%s.%s"\nbackend = "podman"\n' \
      "$x" "$n" "$i" "$n" "$i"
  done
} >"$dir/cluster.toml"

single() {
  on a "$halobox" refresh --backend podman --name vllm --image "$1" --memlock 8M --yes >/dev/null 2>&1
}
fleet() {
  on a "$halobox" cluster refresh --cluster "$dir/cluster.toml" --image "$1" --memlock 8M --yes >/dev/null 2>&1
}
now_us() { echo $(( $(date +%s%N) / 1000 )); }
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

# Every node on the first image, and both paths warmed once.
fleet "${images[0]}" || { echo "error: cluster refresh failed: $(on a "$halobox" cluster refresh --cluster "$dir/cluster.toml" --image "${images[0]}" --memlock 8M --yes 2>&1 | tail -5)" >&2; exit 1; }
single "${images[1]}"
s_times=() f_times=()
for r in $(seq "$rounds"); do
  img=${images[$((r % 2))]}
  t0=$(now_us); single "$img"; t1=$(now_us)
  s_times+=($(( t1 - t0 )))
  t0=$(now_us); fleet "$img"; t1=$(now_us)
  f_times+=($(( t1 - t0 )))
done
s=$(printf '%s\n' "${s_times[@]}" | median)
f=$(printf '%s\n' "${f_times[@]}" | median)
awk -v s="$s" -v f="$f" -v n="$rounds" 'BEGIN {
  printf "one node'"'"'s halobox refresh:        median %8.1f ms over %d runs\n", s / 1000, n
  printf "halobox cluster refresh, 3 nodes: median %8.1f ms over %d runs\n", f / 1000, n
}'
ratio=$(awk -v s="$s" -v f="$f" 'BEGIN {
  printf "cluster refresh of 3 nodes / one node'"'"'s refresh (target <= 1.3x): %.2fx\n", f / s
}')
cleanup
trap - EXIT
doctor=$(HALOBOX_BIN=$halobox bash "$here/bench-cluster-doctor.sh" "$doctor_runs")
# The doctor's lines but its ratio, then both ratios: refresh, doctor.
printf '%s\n' "$doctor" | sed '$d'
echo "$ratio"
printf '%s\n' "$doctor" | tail -n 1
