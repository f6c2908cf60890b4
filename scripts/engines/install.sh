#!/usr/bin/env bash
# Installs the real container engines the live tests use (Debian 12, as root):
# podman (+runc), toolbx, distrobox, docker.io (daemon), docker-registry,
# skopeo, D-Bus, a static busybox for test images. Idempotent: installs only
# what is missing and rewrites its config files with the same content.
# Then run scripts/engines/start.sh. Notes: docs/dev-engines.md.
set -euo pipefail

die() { printf 'install.sh: error: %s\n' "$*" >&2; exit 1; }
log() { printf '==> %s\n' "$*"; }

[ "$(id -u)" -eq 0 ] || die "must run as root (apt-get, /etc writes): sudo $0"
command -v apt-get >/dev/null || die "apt-get not found: this script is for Debian 12"

# package -> a file it installs (checked instead of dpkg so it stays fast).
declare -A want=(
  [podman]=/usr/bin/podman
  [runc]=/usr/sbin/runc
  [uidmap]=/usr/bin/newuidmap
  [slirp4netns]=/usr/bin/slirp4netns
  [passt]=/usr/bin/passt
  [catatonit]=/usr/bin/catatonit
  [podman-toolbox]=/usr/bin/toolbox
  [distrobox]=/usr/bin/distrobox
  [docker.io]=/usr/sbin/dockerd
  [docker-registry]=/usr/bin/docker-registry
  [apache2-utils]=/usr/bin/htpasswd
  [skopeo]=/usr/bin/skopeo
  [dbus]=/usr/bin/dbus-daemon
  [busybox-static]=/bin/busybox
  [debootstrap]=/usr/sbin/debootstrap
  [jq]=/usr/bin/jq
  [curl]=/usr/bin/curl
  [iproute2]=/usr/sbin/ip
  [sudo]=/usr/bin/sudo
)
missing=()
for p in "${!want[@]}"; do [ -e "${want[$p]}" ] || missing+=("$p"); done
# busybox-static conflicts with (replaces) the dynamic busybox package; also
# make sure the one found is really static.
if [ -e /bin/busybox ] && ! file -b /bin/busybox 2>/dev/null | grep -q static \
   && ! ldd /bin/busybox 2>&1 | grep -q 'not a dynamic'; then
  missing+=(busybox-static)
fi

if [ "${#missing[@]}" -gt 0 ]; then
  log "apt-get install ${missing[*]}"
  apt-get update -qq || die "apt-get update failed: check the Debian mirror in /etc/apt/sources.list*"
  # No recommends: podman would pull buildah/fuse-overlayfs/crun we don't use.
  # /usr/sbin/policy-rc.d (exit 101) keeps postinst from starting services;
  # start.sh starts them by hand.
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    -o Dpkg::Options::=--force-confold "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed (see output above)"
else
  log "all engine packages present"
fi

# --- podman: /etc/containers/containers.conf --------------------------------
# runc: crun 1.8 fails on this hybrid cgroup v1 host.
# default_ulimits: podman's default nofile/nproc are above this host's hard
#   limits and container start fails with setrlimit; lower them.
# cgroupfs + file events: no systemd as PID 1 here.
mkdir -p /etc/containers
cgroup_manager=systemd
[ "$(ps -p 1 -o comm= 2>/dev/null)" = systemd ] || cgroup_manager=cgroupfs
conf=$(cat <<EOF
# Written by halobox scripts/engines/install.sh
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]

[engine]
runtime = "runc"
cgroup_manager = "$cgroup_manager"
events_logger = "file"
EOF
)
if [ "$(cat /etc/containers/containers.conf 2>/dev/null)" != "$conf" ]; then
  log "writing /etc/containers/containers.conf (runtime runc, cgroups $cgroup_manager)"
  printf '%s\n' "$conf" > /etc/containers/containers.conf
fi

# The local registries are plain HTTP: let podman/skopeo/toolbox use them.
regconf=$(cat <<'EOF'
# Written by halobox scripts/engines/install.sh: local test registries (HTTP)
[[registry]]
location = "127.0.0.1:5000"
insecure = true

[[registry]]
location = "127.0.0.1:5001"
insecure = true

# 5002: a registry the refresh fault tests start and stop themselves.
[[registry]]
location = "127.0.0.1:5002"
insecure = true

[[registry]]
location = "localhost:5000"
insecure = true
EOF
)
mkdir -p /etc/containers/registries.conf.d
if [ "$(cat /etc/containers/registries.conf.d/50-halobox.conf 2>/dev/null)" != "$regconf" ]; then
  printf '%s\n' "$regconf" > /etc/containers/registries.conf.d/50-halobox.conf
fi

# --- docker: /etc/docker/daemon.json ----------------------------------------
# overlay2 (checked on this ext4 root; use "vfs" if dockerd's log says the
# overlay mount fails), no iptables/bridge (tests use --network host),
# 127.0.0.1:5000/5001 are plain HTTP registries, containers get nofile 1024
# (dockerd would otherwise pass on its own limit, 20000 here).
mkdir -p /etc/docker
daemon=$(cat <<'EOF'
{
  "storage-driver": "overlay2",
  "iptables": false,
  "ip6tables": false,
  "bridge": "none",
  "insecure-registries": ["127.0.0.1:5000", "127.0.0.1:5001", "127.0.0.1:5002", "localhost:5000"],
  "default-ulimits": {
    "nofile": { "Name": "nofile", "Soft": 1024, "Hard": 1024 }
  }
}
EOF
)
if [ "$(cat /etc/docker/daemon.json 2>/dev/null)" != "$daemon" ]; then
  log "writing /etc/docker/daemon.json"
  printf '%s\n' "$daemon" > /etc/docker/daemon.json
fi

# --- rootless test user ------------------------------------------------------
if ! id halotest >/dev/null 2>&1; then
  log "adding user halotest (uid 1500)"
  useradd -m -u 1500 -s /bin/bash halotest
fi
for f in /etc/subuid /etc/subgid; do
  grep -q '^halotest:' "$f" 2>/dev/null || echo 'halotest:200000:65536' >> "$f"
done
# distrobox 1.4.2 refuses to run as uid 0 at all; `distrobox create --root`
# must run as a user who can sudo. Test machine only.
if [ ! -e /etc/sudoers.d/50-halotest ]; then
  echo 'halotest ALL=(root) NOPASSWD: ALL' > /etc/sudoers.d/50-halotest
  chmod 440 /etc/sudoers.d/50-halotest
fi

log "install done: podman $(podman --version | awk '{print $3}'), dockerd $(/usr/sbin/dockerd --version | awk '{print $3}' | tr -d ,), toolbox $(toolbox --version 2>/dev/null | awk '{print $3}'), distrobox $(distrobox version 2>/dev/null | awk -F: '{print $2}' | tr -d ' ')"
