#!/usr/bin/env bash
# `halobox cluster doctor` of 3 namespace nodes against one
# `ssh node halobox doctor --json`, from node a, same timing (wall time of
# the whole command, RUNS runs each, median). The last line ends with the
# ratio `N.NNx`. Root; builds halobox in release mode.
#   bash scripts/bench-cluster-doctor.sh [RUNS]
set -euo pipefail
runs=${1:-9}
cd "$(dirname "$0")/.."
cargo build --release --quiet
hb=$PWD/target/release/halobox
dir=$(mktemp -d)
tag=cd$$
n=$(( $$ % 200 + 20 ))
cleanup() { bash scripts/netns/nodes.sh down "$tag" "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"; }
trap cleanup EXIT
bash scripts/netns/nodes.sh up "$tag" "$n" "$dir" 9000 9000 9000 >/dev/null
opts=(-o "UserKnownHostsFile=$dir/known_hosts" -o "IdentityFile=$dir/client_key" -o IdentitiesOnly=yes)
{
  echo "halobox = \"$hb\""
  echo "ssh_options = [\"UserKnownHostsFile=$dir/known_hosts\", \"IdentityFile=$dir/client_key\", \"IdentitiesOnly=yes\"]"
  for i in 1 2 3; do
    echo "[[node]]"; echo "name = \"n$i\""; echo "ssh = \"root@10.77.$n.$i\""
    echo "ip = \"10.77.$n.$i\""; echo "backend = \"host\""
  done
} >"$dir/cluster.toml"
# Wall time of "$@" in node a's namespace, in ms.
ms() {
  local t0 t1
  t0=$(date +%s%N)
  ip netns exec "hb-$tag-a" "$@" >/dev/null 2>&1 || true
  t1=$(date +%s%N)
  echo $(( (t1 - t0) / 1000000 ))
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
one=(ssh "${opts[@]}" -o BatchMode=yes "root@10.77.$n.2" "$hb" doctor --json)
all=("$hb" cluster doctor --cluster "$dir/cluster.toml")
ms "${one[@]}" >/dev/null; ms "${all[@]}" >/dev/null   # warm up
a=(); b=()
for _ in $(seq "$runs"); do
  a+=("$(ms "${one[@]}")"); b+=("$(ms "${all[@]}")")
done
ma=$(printf '%s\n' "${a[@]}" | median); mb=$(printf '%s\n' "${b[@]}" | median)
echo "ssh node halobox doctor --json: median ${ma} ms over $runs runs (${a[*]})"
echo "halobox cluster doctor (3 nodes): median ${mb} ms over $runs runs (${b[*]})"
awk -v a="$ma" -v b="$mb" 'BEGIN { printf "cluster doctor of 3 nodes against one ssh doctor --json: %.2fx\n", b / a }'
