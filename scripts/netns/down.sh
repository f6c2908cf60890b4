#!/usr/bin/env bash
# Removes what scripts/netns/up.sh TAG N DIR created: stops the sshds and
# every process left in the two namespaces, deletes the namespaces (and with
# them the veth pair).
# Usage (as root): scripts/netns/down.sh TAG DIR
set -uo pipefail
[ $# -eq 2 ] || { echo "usage: $0 TAG DIR" >&2; exit 2; }
tag=$1 dir=$2
for side in a b; do
  ns="hb-$tag-$side"
  [ -f "$dir/sshd_$side.pid" ] && kill "$(cat "$dir/sshd_$side.pid")" 2>/dev/null
  if ip netns list | grep -qw "$ns"; then
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [ -n "$pids" ] && kill $pids 2>/dev/null
    ip netns del "$ns"
  fi
done
exit 0
