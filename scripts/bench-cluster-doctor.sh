#!/usr/bin/env bash
# `halobox cluster doctor` of 3 namespace nodes against one
# `ssh node halobox doctor --json`, from node a, same timing (wall time of
# the whole command, RUNS runs each, median). The last line ends with the
# ratio `N.NNx` (target <= 1.5x). A run that fails stops it: exit 1 is a
# report with a FAIL (every test node has no GPU), any other code is not;
# each run must print a whole report (cluster doctor: every node's doctor
# read). Root; builds halobox in release mode unless HALOBOX_BIN names it.
#   bash scripts/bench-cluster-doctor.sh [RUNS]
set -euo pipefail
runs=${1:-9}
cd "$(dirname "$0")/.."
hb=$(bash scripts/release-bin.sh)
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
# One node's doctor report: JSON with its checks.
one_report() { grep -q '"checks"' "$1"; }
# The cluster's table, every node's doctor read (fleet.reached PASS x3).
all_reports() {
  awk '$1 == "fleet.reached" { n = 0; for (i = 2; i <= NF; i++) if ($i == "PASS") n++; ok = (NF == 4 && n == 3) }
    END { exit !ok }' "$1"
}
# Wall time of "$@" in node a's namespace, in ms; the script stops when the
# run failed: an exit code other than 0 and 1, or no whole report ($1).
ms() {
  local check=$1 t0 t1 rc=0
  shift
  t0=$(date +%s%N)
  ip netns exec "hb-$tag-a" "$@" >"$dir/out" 2>"$dir/err" || rc=$?
  t1=$(date +%s%N)
  if [ "$rc" -gt 1 ] || ! "$check" "$dir/out"; then
    echo "error: a run failed (exit $rc): $*: $(cat "$dir/err" "$dir/out" | tail -n 3)" >&2
    exit 1
  fi
  echo $(( (t1 - t0) / 1000000 ))
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
one=(ssh "${opts[@]}" -o BatchMode=yes "root@10.77.$n.2" "$hb" doctor --json)
all=("$hb" cluster doctor --cluster "$dir/cluster.toml")
ms one_report "${one[@]}" >/dev/null; ms all_reports "${all[@]}" >/dev/null   # warm up
a=(); b=()
for _ in $(seq "$runs"); do
  t=$(ms one_report "${one[@]}"); a+=("$t")
  t=$(ms all_reports "${all[@]}"); b+=("$t")
done
ma=$(printf '%s\n' "${a[@]}" | median); mb=$(printf '%s\n' "${b[@]}" | median)
echo "ssh node halobox doctor --json: median ${ma} ms over $runs runs (${a[*]})"
echo "halobox cluster doctor (3 nodes): median ${mb} ms over $runs runs (${b[*]})"
awk -v a="$ma" -v b="$mb" 'BEGIN { printf "cluster doctor of 3 nodes / one ssh node halobox doctor --json (target <= 1.5x): %.2fx\n", b / a }'
