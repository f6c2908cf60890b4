#!/usr/bin/env bash
# Test nodes on this machine, for `halobox bench` and `halobox cluster` (and
# whatever later runs per node): one network namespace per node (hb-TAG-a,
# -b, -c, …), each with a veth into a bridge that lives in its own
# namespace (hb-TAG-sw), address 10.77.N.<i>/24 (private: it exists only
# inside the namespaces), one MTU (and interface name) per node, and its own
# sshd (key-only root login). Each node also runs in its own PID and mount
# namespace, with private copies of NODE_DIRS (its own /root and /tmp/ray)
# and /dev/shm, so a command that stops "every Ray on this machine" (`ray
# stop`) stops only that node's, as on real machines; the node's PID 1
# (bash) reaps what daemons leave behind.
#
#   up TAG N DIR SPEC...  one node per SPEC, MTU[:IFNAME] (IFNAME: dp0):
#                         `up t1 5 DIR 9000 9000:ens2 1500` makes a (dp0),
#                         b (ens2, MTU 9000) and c (MTU 1500) at 10.77.5.1-3
#   down TAG DIR          stops the nodes' containers, kills every process in
#                         the nodes, removes them
#
# With HB_NODE_ENGINE=podman (or docker) every node is a machine with its
# own container engine: a private /run (only that node's sockets:
# /run/podman/podman.sock, or /run/docker.sock, where halobox finds them;
# plus the machine's /run/host link and its system D-Bus, which toolbox
# needs),
# a private /dev with stand-in GPU and RDMA nodes (/dev/kfd,
# /dev/dri/renderD128, /dev/infiniband/uverbs0: no driver behind them, so
# passthrough is real and opening them fails), and a `podman system
# service` (storage in DIR/node_<x>/, the machine's image store shared
# read-only through additionalimagestores) or a `dockerd` (data and exec
# root of its own) started inside the node's namespaces: host networking
# in a container there means that node's network. A registry on the bridge
# (10.77.N.254:5000, plain HTTP, trusted by the node engines) serves the
# images the nodes pull; HB_NODE_REGISTRY_DATA keeps its storage between
# runs. With HB_NODE_DOCKER_TEMPLATE (scripts/netns/docker-template.sh) a
# docker node's data root starts as hard links to that one, which holds the
# node image unpacked. The main engines (/run/podman/podman.sock,
# /var/run/docker.sock) are not touched.
#
# In DIR: client_key (log in with it), known_hosts (every node's host key
# under its address), sshd_<x>.conf and sshd_<x>.log, node_<x>.pid (the
# node's PID 1 as the machine sees it: `nsenter -t PID -m -p -n CMD` runs
# CMD on the node), node_<x>/ (the private directories, engine storage and
# engine.log). Run as root; TAG at most 10 characters, N 0..255.
set -euo pipefail
# Directories each node gets its own copy of (bind mounts inside the node).
NODE_DIRS="/tmp/ray /root"
# The stand-in /dev/kfd's major: unused here (the real one is dynamic).
KFD_MAJOR=3999

usage() { echo "usage: $0 up TAG N DIR MTU[:IFNAME]... | down TAG DIR" >&2; exit 2; }

# Closes every inherited descriptor but 0-2: the daemons started here must
# not keep a lock the caller holds (`flock LOCK cargo test` would stay
# locked as long as the nodes live).
# shellcheck disable=SC2016
CLOSE_FDS='for fd in $(ls /proc/$$/fd); do case $fd in 0|1|2) ;; *) eval "exec $fd>&-" ;; esac; done'

# The node's PID 1: private mounts (and, with an engine, a private /run and
# /dev and the engine itself), then sshd; it reaps what is left behind.
# Arguments: sshd conf log engine nodedir [SRC DEST]...
# shellcheck disable=SC2016
NODE_INIT=$CLOSE_FDS'
sshd=$1 conf=$2 log=$3 engine=$4 nd=$5; shift 5
set -e
while [ $# -gt 0 ]; do mount --bind "$1" "$2"; shift 2; done
if [ "$engine" != none ]; then
  # /run/host as the machine has it (the toolbox package makes it with
  # tmpfiles.d: /usr/bin/toolbox is linked with the interpreter
  # /run/host/lib/...), made again in the private /run.
  host_link=$(readlink /run/host 2>/dev/null || true)
  # The system D-Bus of the machine too: `toolbox create` binds its socket
  # into every container and fails without one.
  dbus=
  if [ -S /run/dbus/system_bus_socket ]; then
    mkdir -p "$nd/dbus"
    mount --bind /run/dbus "$nd/dbus"
    dbus=1
  fi
  mount -t tmpfs -o mode=755 tmpfs /run
  mkdir -p /run/sshd /run/podman /run/lock
  # The runtime folder of root, as logind makes it on a machine: halobox
  # keeps its refresh locks there, so two nodes never share one.
  mkdir -p -m 0700 /run/user/0
  [ -z "$host_link" ] || ln -s "$host_link" /run/host
  if [ -n "$dbus" ]; then
    mkdir -p /run/dbus
    mount --move "$nd/dbus" /run/dbus
  fi
  d=$nd/dev
  mkdir -p "$d"
  mount -t tmpfs -o mode=755,size=1m tmpfs "$d"
  for n in null zero full random urandom tty; do cp -a "/dev/$n" "$d/"; done
  mkdir -p "$d/pts" "$d/shm" "$d/mqueue" "$d/dri" "$d/infiniband"
  ln -s /proc/self/fd "$d/fd"
  ln -s /proc/self/fd/0 "$d/stdin"; ln -s /proc/self/fd/1 "$d/stdout"; ln -s /proc/self/fd/2 "$d/stderr"
  ln -s pts/ptmx "$d/ptmx"
  mknod -m 666 "$d/kfd" c "$KFD_MAJOR" 0
  mknod -m 666 "$d/dri/renderD128" c 226 128
  mknod -m 666 "$d/infiniband/uverbs0" c 231 192
  mount --bind "$d" /dev
  mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts /dev/pts
  mount -t mqueue mqueue /dev/mqueue
  # `ip netns exec` mounts a fresh /sys (the netdevs of the node): put the
  # cgroup hierarchies of the machine back: the runtime of the engine needs them.
  mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup
  while read -r type opts target; do
    [ -n "$type" ] || continue
    mkdir -p "$target"
    mount -t "$type" -o "$opts" cgroup "$target"
  done <<<"$CGROUP_MOUNTS"
fi
mount -t tmpfs -o size=1g tmpfs /dev/shm
if [ "$engine" != none ]; then
  # The podman command on the node (toolbox runs it) uses the node
  # storage and registries, as the node service does; skopeo there (image
  # sync) trusts the node registry as the node engine does.
  mkdir -p "$nd/etc-containers"
  cp -a /etc/containers/. "$nd/etc-containers/"
  cp "$nd/registries.conf" "$nd/etc-containers/"
  [ "$engine" != podman ] || cp "$nd/storage.conf" "$nd/etc-containers/"
  mount --bind "$nd/etc-containers" /etc/containers
fi
case "$engine" in
podman)
  CONTAINERS_STORAGE_CONF=$nd/storage.conf CONTAINERS_REGISTRIES_CONF=$nd/registries.conf \
    podman system service --time=0 unix:///run/podman/podman.sock >"$nd/engine.log" 2>&1 & ;;
docker)
  dockerd --config-file "$nd/daemon.json" >"$nd/engine.log" 2>&1 & ;;
esac
"$sshd" -D -f "$conf" -E "$log" &
wait'

# registry DIR N: a plain-HTTP registry on the bridge at 10.77.N.254:5000.
registry() {
  local dir=$1 n=$2 sw=$3 data=${HB_NODE_REGISTRY_DATA:-$1/registry-data}
  mkdir -p "$data"
  ip -n "$sw" link set lo up
  ip -n "$sw" addr add "10.77.$n.254/24" dev br0
  printf 'version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: 10.77.%s.254:5000\n' \
    "$data" "$n" >"$dir/registry.yml"
  ip netns exec "$sw" setsid bash -c "$CLOSE_FDS"'
exec docker-registry serve "$1"' hb-registry "$dir/registry.yml" </dev/null >"$dir/registry.log" 2>&1 &
  for _ in $(seq 100); do
    ip netns exec "$sw" curl -sf -o /dev/null --max-time 2 "http://10.77.$n.254:5000/v2/" && return 0
    sleep 0.1
  done
  echo "the node registry did not start: $(tail -n 5 "$dir/registry.log")" >&2
  exit 1
}

# engine_config ENGINE NODEDIR N: the engine's own configuration files.
engine_config() {
  local engine=$1 nd=$2 n=$3
  mkdir -p "$nd/storage"
  case "$engine" in
  podman)
    printf '[storage]\ndriver = "overlay"\ngraphroot = "%s/storage"\nrunroot = "/run/containers/storage"\n[storage.options]\nadditionalimagestores = ["/var/lib/containers/storage"]\n' \
      "$nd" >"$nd/storage.conf"
    printf '[[registry]]\nlocation = "10.77.%s.254:5000"\ninsecure = true\n' "$n" >"$nd/registries.conf"
    ;;
  docker)
    printf '{"data-root": "%s/storage", "exec-root": "/run/docker", "pidfile": "/run/docker.pid", "hosts": ["unix:///run/docker.sock"], "iptables": false, "ip-masq": false, "bridge": "none", "storage-driver": "overlay2", "insecure-registries": ["10.77.%s.254:5000"]}\n' \
      "$nd" "$n" >"$nd/daemon.json"
    printf '[[registry]]\nlocation = "10.77.%s.254:5000"\ninsecure = true\n' "$n" >"$nd/registries.conf"
    ;;
  *) echo "HB_NODE_ENGINE must be podman or docker" >&2; exit 2 ;;
  esac
}

# engine_socket ENGINE PID: the node's engine socket, as this machine reaches it.
engine_socket() {
  case "$1" in
  podman) echo "/proc/$2/root/run/podman/podman.sock" ;;
  docker) echo "/proc/$2/root/run/docker.sock" ;;
  esac
}

up() {
  [ $# -ge 4 ] || usage
  local tag=$1 n=$2 dir=$3
  shift 3
  [ ${#tag} -le 10 ] || { echo "TAG must be at most 10 characters" >&2; exit 2; }
  [ "$n" -ge 0 ] 2>/dev/null && [ "$n" -le 255 ] || { echo "N must be 0..255" >&2; exit 2; }
  [ $# -le 26 ] || { echo "at most 26 nodes" >&2; exit 2; }
  local engine=${HB_NODE_ENGINE:-none} cgroups
  cgroups=$(awk '$3 == "cgroup" || $3 == "cgroup2" {print $3, $4, $2}' /proc/self/mounts)
  mkdir -p "$dir" /run/sshd
  for d in $NODE_DIRS; do mkdir -p "$d"; done
  local sshd_bin sw="hb-$tag-sw"
  sshd_bin=$(command -v sshd || echo /usr/sbin/sshd)
  ip netns add "$sw"
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 mtu 9000 up
  [ "$engine" = none ] || registry "$dir" "$n" "$sw"
  ssh-keygen -q -t ed25519 -N '' -C "halobox-test-client" -f "$dir/client_key"
  cp "$dir/client_key.pub" "$dir/authorized_keys"
  : >"$dir/known_hosts"
  local i=0 spec mtu ifname x ns addr d binds nd pid sock
  for spec in "$@"; do
    i=$((i + 1))
    mtu=${spec%%:*}
    ifname=dp0
    [ "$spec" = "$mtu" ] || ifname=${spec#*:}
    x=$(printf "\\x$(printf %x $((96 + i)))")
    ns="hb-$tag-$x"
    addr="10.77.$n.$i"
    nd="$dir/node_$x"
    mkdir -p "$nd"
    ip netns add "$ns"
    ip link add "$ifname" netns "$ns" mtu "$mtu" type veth peer name "p-$x" netns "$sw" mtu "$mtu"
    ip -n "$sw" link set "p-$x" master br0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$addr/24" dev "$ifname"
    ip -n "$ns" link set "$ifname" up
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
      mkdir -p "$nd$d"
      binds+=("$nd$d" "$d")
    done
    [ "$engine" = none ] || engine_config "$engine" "$nd" "$n"
    if [ "$engine" = docker ] && [ -n "${HB_NODE_DOCKER_TEMPLATE:-}" ]; then
      # The layers and the image metadata only (written once, or replaced
      # whole); never a database dockerd or its containerd writes in place.
      cp -al "$HB_NODE_DOCKER_TEMPLATE/overlay2" "$HB_NODE_DOCKER_TEMPLATE/image" "$nd/storage/"
    fi
    ip netns exec "$ns" env KFD_MAJOR="$KFD_MAJOR" CGROUP_MOUNTS="$cgroups" unshare --pid --fork --mount --propagation private --mount-proc \
      bash -c "$NODE_INIT" hb-node-init "$sshd_bin" "$dir/sshd_$x.conf" "$dir/sshd_$x.log" "$engine" "$nd" "${binds[@]}" \
      </dev/null >"$nd/init.log" 2>&1 &
    pid=""
    for _ in $(seq 100); do
      pid=$(pgrep -P $! -f hb-node-init || true)
      [ -n "$pid" ] && break
      sleep 0.05
    done
    [ -n "$pid" ] || { echo "node $x did not start: $(cat "$nd/init.log")" >&2; exit 1; }
    echo "$pid" >"$dir/node_$x.pid"
    for _ in $(seq 100); do
      ip netns exec "$ns" bash -c "echo >/dev/tcp/$addr/22" 2>/dev/null && break
      sleep 0.05
    done
    ip netns exec "$ns" bash -c "echo >/dev/tcp/$addr/22" 2>/dev/null \
      || { echo "sshd of node $x did not start: $(cat "$dir/sshd_$x.log" "$nd/init.log" 2>/dev/null)" >&2; exit 1; }
    if [ "$engine" != none ]; then
      sock=$(engine_socket "$engine" "$pid")
      for _ in $(seq 300); do
        curl -sf -o /dev/null --max-time 2 --unix-socket "$sock" http://d/_ping && break
        sleep 0.1
      done
      curl -sf -o /dev/null --max-time 2 --unix-socket "$sock" http://d/_ping \
        || { echo "the $engine of node $x did not start: $(tail -n 20 "$nd/engine.log")" >&2; exit 1; }
    fi
    echo "node $x: $ns $addr $ifname MTU $mtu$([ "$engine" = none ] || echo ", $engine")"
  done
}

down() {
  [ $# -eq 2 ] || usage
  local tag=$1 dir=$2 ns pids f pid sock ids
  set +e
  # Stop the nodes' containers through their own engines first, so their
  # cgroups and mounts go away cleanly.
  for f in "$dir"/node_*.pid; do
    [ -e "$f" ] || continue
    pid=$(cat "$f")
    if sock=$(engine_socket podman "$pid") && [ -S "$sock" ]; then
      ids=$(curl -s --max-time 10 --unix-socket "$sock" 'http://d/containers/json?all=true' | jq -r '.[].Id' 2>/dev/null)
      for id in $ids; do curl -s -o /dev/null --max-time 20 --unix-socket "$sock" -X DELETE "http://d/containers/$id?force=true&v=true"; done
    fi
    if sock=$(engine_socket docker "$pid") && [ -S "$sock" ]; then
      ids=$(curl -s --max-time 10 --unix-socket "$sock" 'http://d/containers/json?all=true' | jq -r '.[].Id' 2>/dev/null)
      for id in $ids; do curl -s -o /dev/null --max-time 20 --unix-socket "$sock" -X DELETE "http://d/containers/$id?force=true&v=true"; done
    fi
  done
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^hb-$tag-[a-z]+$"); do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [ -n "$pids" ] && kill -9 $pids 2>/dev/null
    ip netns del "$ns"
  done
  # The nodes' folders are renamed aside and removed in the background, at
  # idle I/O priority: a docker node's data root holds a whole extracted
  # image, which takes a loaded machine most of a minute to delete, and the
  # caller need not wait for it. Files of the nodes' engines can be busy
  # for a moment after the kill, so the removal is tried again.
  trash=$(mktemp -d "$(dirname "$dir")/halobox-trash.XXXXXX")
  for f in "$dir"/node_*; do
    [ -e "$f" ] && mv "$f" "$trash"/
  done
  # shellcheck disable=SC2016
  setsid ionice -c 3 bash -c 'for _ in 1 2 3 4 5; do rm -rf "$1" 2>/dev/null && exit 0; sleep 1; done; rm -rf "$1"' \
    trash "$trash" </dev/null >/dev/null 2>&1 &
  exit 0
}

# Nothing this script starts may keep a descriptor of its caller: the
# nodes' daemons (and `unshare`, which waits for them) would hold a lock the
# caller took (`flock LOCK cargo test`) for as long as the nodes live.
# 255 is the descriptor bash reads this script from.
for fd in $(ls /proc/$$/fd); do
  case $fd in 0 | 1 | 2 | 255) ;; *) eval "exec $fd>&-" ;; esac
done

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
up) up "$@" ;;
down) down "$@" ;;
*) usage ;;
esac
