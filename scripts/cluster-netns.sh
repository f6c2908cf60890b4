#!/usr/bin/env bash
# Test nodes for `halobox cluster` on this machine: one network namespace per
# node (hbc-TAG-a, -b, …), each with a veth `dp0` into a bridge that lives in
# its own namespace (hbc-TAG-sw), address 10.78.N.<i>/24 (private, only inside
# the namespaces), and its own sshd (key-only root login). Each node runs in
# its own PID and mount namespace too, with a private /tmp/ray and /dev/shm,
# so `ray stop` on one node stops only that node's Ray, as on real machines.
# One MTU per node: `up TAG N DIR 9000 9000 1500` makes three nodes, the
# third with MTU 1500. In DIR: client_key, known_hosts, sshd_<x>.log.
# Usage (as root): scripts/cluster-netns.sh up TAG N DIR MTU...   (TAG ≤ 8 chars)
#                  scripts/cluster-netns.sh down TAG DIR
set -euo pipefail
cmd=${1:-}
case "$cmd" in
up)
  [ $# -ge 5 ] || { echo "usage: $0 up TAG N DIR MTU..." >&2; exit 2; }
  tag=$2 n=$3 dir=$4
  shift 4
  [ ${#tag} -le 8 ] || { echo "TAG must be at most 8 characters" >&2; exit 2; }
  mkdir -p "$dir" /run/sshd /tmp/ray
  sshd_bin=$(command -v sshd || echo /usr/sbin/sshd)
  sw="hbc-$tag-sw"
  ip netns add "$sw"
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 mtu 9000 up
  ssh-keygen -q -t ed25519 -N '' -C "halobox-test-client" -f "$dir/client_key"
  cp "$dir/client_key.pub" "$dir/authorized_keys"
  : >"$dir/known_hosts"
  i=0
  for mtu in "$@"; do
    i=$((i + 1))
    side=$(printf "\\x$(printf %x $((96 + i)))")
    ns="hbc-$tag-$side"
    addr="10.78.$n.$i"
    ip netns add "$ns"
    ip link add dp0 netns "$ns" mtu "$mtu" type veth peer name "p-$side" netns "$sw" mtu "$mtu"
    ip -n "$sw" link set "p-$side" master br0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$addr/24" dev dp0
    ip -n "$ns" link set dp0 up
    ssh-keygen -q -t ed25519 -N '' -C "halobox-test-$side" -f "$dir/host_key_$side"
    echo "$addr $(cut -d' ' -f1-2 "$dir/host_key_$side.pub")" >>"$dir/known_hosts"
    cat >"$dir/sshd_$side.conf" <<CONF
ListenAddress $addr
HostKey $dir/host_key_$side
AuthorizedKeysFile $dir/authorized_keys
PidFile none
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
LogLevel ERROR
CONF
    mkdir -p "$dir/ray_$side"
    # bash as PID 1 of the node reaps the daemons Ray leaves behind.
    ip netns exec "$ns" unshare --pid --fork --mount --propagation private --mount-proc \
      bash -c 'mount --bind "$1" /tmp/ray && mount -t tmpfs -o size=1g tmpfs /dev/shm && { "$2" -D -f "$3" -E "$4" & wait; }' \
      node "$dir/ray_$side" "$sshd_bin" "$dir/sshd_$side.conf" "$dir/sshd_$side.log" \
      </dev/null >/dev/null 2>&1 &
    for _ in $(seq 100); do
      ip netns exec "$ns" bash -c "echo >/dev/tcp/$addr/22" 2>/dev/null && break
      sleep 0.05
    done
    ip netns exec "$ns" bash -c "echo >/dev/tcp/$addr/22" 2>/dev/null \
      || { echo "sshd of node $side did not start: $(cat "$dir/sshd_$side.log" 2>/dev/null)" >&2; exit 1; }
    echo "node $side: $ns $addr dp0 MTU $mtu"
  done
  ;;
down)
  [ $# -eq 3 ] || { echo "usage: $0 down TAG DIR" >&2; exit 2; }
  tag=$2 dir=$3
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^hbc-$tag-[a-z]+$" || true); do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [ -n "$pids" ] && kill -9 $pids 2>/dev/null
    ip netns del "$ns"
  done
  for m in "$dir"/ray_*; do [ -d "$m" ] && rm -rf "$m"; done
  exit 0
  ;;
*)
  echo "usage: $0 up TAG N DIR MTU... | down TAG DIR" >&2
  exit 2
  ;;
esac
