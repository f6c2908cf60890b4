#!/usr/bin/env bash
# Test nodes on this machine, for `halobox bench` and `halobox cluster` (and
# whatever later runs per node): one network namespace per node (hb-TAG-a,
# -b, -c, …), each with a veth `dp0` into a bridge that lives in its own
# namespace (hb-TAG-sw), address 10.77.N.<i>/24 (private: it exists only
# inside the namespaces), one MTU per node, and its own sshd (key-only root
# login). Each node also runs in its own PID and mount namespace, with
# private copies of NODE_DIRS and /dev/shm, so a command that stops "every
# Ray on this machine" (`ray stop`) stops only that node's, as on real
# machines; the node's PID 1 (bash) reaps what daemons leave behind.
#
#   up TAG N DIR MTU...   one node per MTU: `up t1 5 DIR 9000 9000 1500` makes
#                         a, b (MTU 9000) and c (MTU 1500) at 10.77.5.1-3
#   down TAG DIR          kills every process in the nodes, removes them
#
# In DIR: client_key (log in with it), known_hosts (every node's host key
# under its address), sshd_<x>.conf and sshd_<x>.log, node_<x>/ (the
# private directories). Run as root; TAG at most 10 characters, N 0..255.
set -euo pipefail
# Directories each node gets its own copy of (bind mounts inside the node).
NODE_DIRS="/tmp/ray"

usage() { echo "usage: $0 up TAG N DIR MTU... | down TAG DIR" >&2; exit 2; }

up() {
  [ $# -ge 4 ] || usage
  local tag=$1 n=$2 dir=$3
  shift 3
  [ ${#tag} -le 10 ] || { echo "TAG must be at most 10 characters" >&2; exit 2; }
  [ "$n" -ge 0 ] 2>/dev/null && [ "$n" -le 255 ] || { echo "N must be 0..255" >&2; exit 2; }
  [ $# -le 26 ] || { echo "at most 26 nodes" >&2; exit 2; }
  mkdir -p "$dir" /run/sshd
  for d in $NODE_DIRS; do mkdir -p "$d"; done
  local sshd_bin sw="hb-$tag-sw"
  sshd_bin=$(command -v sshd || echo /usr/sbin/sshd)
  ip netns add "$sw"
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 mtu 9000 up
  ssh-keygen -q -t ed25519 -N '' -C "halobox-test-client" -f "$dir/client_key"
  cp "$dir/client_key.pub" "$dir/authorized_keys"
  : >"$dir/known_hosts"
  local i=0 mtu x ns addr d binds
  for mtu in "$@"; do
    i=$((i + 1))
    x=$(printf "\\x$(printf %x $((96 + i)))")
    ns="hb-$tag-$x"
    addr="10.77.$n.$i"
    ip netns add "$ns"
    ip link add dp0 netns "$ns" mtu "$mtu" type veth peer name "p-$x" netns "$sw" mtu "$mtu"
    ip -n "$sw" link set "p-$x" master br0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$addr/24" dev dp0
    ip -n "$ns" link set dp0 up
    ssh-keygen -q -t ed25519 -N '' -C "halobox-test-$x" -f "$dir/host_key_$x"
    echo "$addr $(cut -d' ' -f1-2 "$dir/host_key_$x.pub")" >>"$dir/known_hosts"
    cat >"$dir/sshd_$x.conf" <<CONF
ListenAddress $addr
HostKey $dir/host_key_$x
AuthorizedKeysFile $dir/authorized_keys
PidFile none
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
LogLevel ERROR
CONF
    binds=()
    for d in $NODE_DIRS; do
      mkdir -p "$dir/node_$x$d"
      binds+=("$dir/node_$x$d" "$d")
    done
    # The node's PID 1: private mounts, then sshd; it reaps what is left behind.
    ip netns exec "$ns" unshare --pid --fork --mount --propagation private --mount-proc \
      bash -c 'sshd=$1 conf=$2 log=$3; shift 3
        while [ $# -gt 0 ]; do mount --bind "$1" "$2" || exit 1; shift 2; done
        mount -t tmpfs -o size=1g tmpfs /dev/shm || exit 1
        "$sshd" -D -f "$conf" -E "$log" & wait' \
      hb-node-init "$sshd_bin" "$dir/sshd_$x.conf" "$dir/sshd_$x.log" "${binds[@]}" \
      </dev/null >/dev/null 2>&1 &
    for _ in $(seq 100); do
      ip netns exec "$ns" bash -c "echo >/dev/tcp/$addr/22" 2>/dev/null && break
      sleep 0.05
    done
    ip netns exec "$ns" bash -c "echo >/dev/tcp/$addr/22" 2>/dev/null \
      || { echo "sshd of node $x did not start: $(cat "$dir/sshd_$x.log" 2>/dev/null)" >&2; exit 1; }
    echo "node $x: $ns $addr dp0 MTU $mtu"
  done
}

down() {
  [ $# -eq 2 ] || usage
  local tag=$1 dir=$2 ns pids
  set +e
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^hb-$tag-[a-z]+$"); do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [ -n "$pids" ] && kill -9 $pids 2>/dev/null
    ip netns del "$ns"
  done
  rm -rf "$dir"/node_*
  exit 0
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
up) up "$@" ;;
down) down "$@" ;;
*) usage ;;
esac
