#!/usr/bin/env bash
# Two test hosts on this machine: network namespaces hb-TAG-a and hb-TAG-b
# joined by a veth pair (MTU 9000, 10.77.N.1/24 and 10.77.N.2/24: private
# addresses that exist only inside the namespaces), each running its own
# sshd that accepts root with a fresh key. Everything else goes in DIR:
#   client_key         the key to log in with
#   known_hosts        both sshd host keys, under their addresses
#   sshd_{a,b}.log     sshd logs
# Usage (as root): scripts/netns/up.sh TAG N DIR   (TAG ≤ 10 chars, N 0..255)
# Undo with scripts/netns/down.sh TAG DIR.
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 TAG N DIR" >&2; exit 2; }
tag=$1 n=$2 dir=$3
[ ${#tag} -le 10 ] || { echo "TAG must be at most 10 characters" >&2; exit 2; }
mkdir -p "$dir" /run/sshd
sshd_bin=$(command -v sshd || echo /usr/sbin/sshd)

ip netns add "hb-$tag-a"
ip netns add "hb-$tag-b"
ip link add "hb${tag}a" netns "hb-$tag-a" mtu 9000 type veth peer name "hb${tag}b" netns "hb-$tag-b" mtu 9000

ssh-keygen -q -t ed25519 -N '' -C "halobox-test-client" -f "$dir/client_key"
cp "$dir/client_key.pub" "$dir/authorized_keys"
: >"$dir/known_hosts"
for side in a b; do
  ns="hb-$tag-$side"
  addr="10.77.$n.$([ "$side" = a ] && echo 1 || echo 2)"
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "$addr/24" dev "hb$tag$side"
  ip -n "$ns" link set "hb$tag$side" up
  ssh-keygen -q -t ed25519 -N '' -C "halobox-test-$side" -f "$dir/host_key_$side"
  echo "$addr $(cut -d' ' -f1-2 "$dir/host_key_$side.pub")" >>"$dir/known_hosts"
  cat >"$dir/sshd_$side.conf" <<CONF
ListenAddress $addr
HostKey $dir/host_key_$side
AuthorizedKeysFile $dir/authorized_keys
PidFile $dir/sshd_$side.pid
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
LogLevel ERROR
CONF
  # sshd listens before it detaches, so it is ready when this returns.
  ip netns exec "$ns" "$sshd_bin" -f "$dir/sshd_$side.conf" -E "$dir/sshd_$side.log"
done
echo "hb-$tag-a 10.77.$n.1 <-> hb-$tag-b 10.77.$n.2 (MTU 9000), ssh keys in $dir"
