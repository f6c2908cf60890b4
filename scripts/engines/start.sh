#!/usr/bin/env bash
# Starts, in the background, the real engines halobox's live tests talk to,
# and builds/pushes the local test images. Idempotent: whatever already
# answers is left alone. Needs scripts/engines/install.sh first (as root).
#
#   D-Bus system bus        /run/dbus/system_bus_socket   (toolbox needs it)
#   podman API (rootful)    unix:///run/podman/podman.sock
#   dockerd                 unix:///var/run/docker.sock
#   registry, no auth       http://127.0.0.1:5000
#   registry, htpasswd      http://127.0.0.1:5001  user halobox, password in
#                           $STATE/registry-auth/password, podman/skopeo
#                           authfile $STATE/registry-auth/auth.json
#   podman API (rootless)   unix:///run/user/1500/podman/podman.sock (user halotest)
#   images                  localhost/halobox-test:1 and :2 (static busybox),
#                           127.0.0.1:5000/halobox/test:{1,2,latest},
#                           127.0.0.1:5001/halobox/test:1,
#                           localhost/halobox-distro:1 (debootstrap minbase;
#                           toolbox + distrobox work in it; skip with
#                           HALOBOX_ENGINES_NO_DISTRO=1)
# Logs and pid files: $STATE (default /tmp/halobox-engines). Stop: stop.sh.
set -euo pipefail

STATE=${HALOBOX_ENGINES_DIR:-/tmp/halobox-engines}
CACHE=${HALOBOX_ENGINES_CACHE:-/var/cache/halobox-engines}
TIMEOUT=${HALOBOX_ENGINES_TIMEOUT:-60}     # seconds per readiness wait
MIRROR=${HALOBOX_DEBIAN_MIRROR:-http://deb.debian.org/debian}
RL_UID=1500 RL_USER=halotest RL_RUN=/run/user/1500
PODMAN_SOCK=/run/podman/podman.sock DOCKER_SOCK=/var/run/docker.sock

die() { printf 'start.sh: error: %s\n' "$*" >&2; exit 1; }
log() { printf '==> %s\n' "$*"; }

[ "$(id -u)" -eq 0 ] || die "must run as root: sudo $0"
for c in podman dockerd docker-registry htpasswd dbus-daemon dbus-send jq curl skopeo runuser; do
  command -v "$c" >/dev/null || die "$c not found: run scripts/engines/install.sh first"
done
mkdir -p "$STATE" "$CACHE"
cd "$STATE"

# wait_until DESC NAME CMD...: poll CMD every 0.2 s for up to $TIMEOUT s;
# fail early if the process in $STATE/NAME.pid has died. Log: $STATE/NAME.log.
wait_until() {
  local desc=$1 logf=$STATE/$2.log pidf=$STATE/$2.pid; shift 2
  local end=$((SECONDS + TIMEOUT)) why="not ready after ${TIMEOUT}s"
  until "$@" >/dev/null 2>&1; do
    if [ -s "$pidf" ] && ! alive "$(cat "$pidf")"; then
      why="exited"; rm -f "$pidf"
    elif [ "$SECONDS" -lt "$end" ]; then
      sleep 0.2; continue
    fi
    echo "--- last lines of $logf:" >&2; tail -n 20 "$logf" >&2 2>/dev/null || true
    die "$desc $why (log: $logf)"
  done
}
# spawn NAME CMD...: run CMD detached, output to $STATE/NAME.log, pid to NAME.pid.
spawn() {
  local name=$1; shift
  setsid "$@" >"$STATE/$name.log" 2>&1 </dev/null &
  echo $! >"$STATE/$name.pid"
}
# alive PID: running and not a zombie (PID 1 here reaps orphans slowly).
alive() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1; [[ $st != Z* ]]; }
sock_ping() { curl -sf --max-time 3 --unix-socket "$1" http://d/_ping; }
http_code() { curl -s -o /dev/null --max-time 3 -w '%{http_code}' "$1"; }
up=()

# --- D-Bus system bus ---------------------------------------------------------
# Hosts with systemd mount POSIX message queues on /dev/mqueue; podman's
# --ipc host (rootless) needs it. This machine has none until mounted.
if ! mountpoint -q /dev/mqueue 2>/dev/null; then
  mkdir -p /dev/mqueue
  mount -t mqueue mqueue /dev/mqueue || die "cannot mount /dev/mqueue (podman --ipc host needs it)"
fi

dbus_ok() { dbus-send --system --print-reply --dest=org.freedesktop.DBus / org.freedesktop.DBus.GetId; }
if ! dbus_ok >/dev/null 2>&1; then
  log "starting dbus-daemon --system"
  mkdir -p /run/dbus
  rm -f /run/dbus/pid /run/dbus/system_bus_socket   # stale from a dead bus
  dbus-daemon --system --fork >"$STATE/dbus.log" 2>&1 || die "dbus-daemon --system failed (log: $STATE/dbus.log)"
  cp /run/dbus/pid "$STATE/dbus.pid"
  wait_until "D-Bus system bus" dbus dbus_ok
fi
up+=(dbus)

# --- rootful podman API service -----------------------------------------------
if ! sock_ping "$PODMAN_SOCK" >/dev/null 2>&1; then
  log "starting podman system service on $PODMAN_SOCK"
  mkdir -p /run/podman
  spawn podman podman system service --time=0 "unix://$PODMAN_SOCK"
  wait_until "podman API ($PODMAN_SOCK)" podman sock_ping "$PODMAN_SOCK"
fi
up+=("podman($(curl -s --unix-socket "$PODMAN_SOCK" http://d/version | jq -r '.Version+"/api "+.ApiVersion'))")
# The first toolbox command after a podman install or upgrade runs `podman
# system migrate`, which stops every running container (stamp:
# ~/.config/toolbox/podman-system-migrate). Let that happen here, before any
# test has a container running, not in the middle of one.
if command -v toolbox >/dev/null && [ ! -s "$HOME/.config/toolbox/podman-system-migrate" ]; then
  log "letting toolbox migrate to this podman once (it stops running containers)"
  toolbox list >/dev/null 2>&1 || true
fi

# --- dockerd (config: /etc/docker/daemon.json from install.sh) ----------------
if ! sock_ping "$DOCKER_SOCK" >/dev/null 2>&1; then
  log "starting dockerd on $DOCKER_SOCK"
  spawn dockerd dockerd --host "unix://$DOCKER_SOCK"
  wait_until "dockerd ($DOCKER_SOCK)" dockerd sock_ping "$DOCKER_SOCK"
fi
up+=("dockerd($(curl -s --unix-socket "$DOCKER_SOCK" http://d/version | jq -r '.Version+"/api "+.ApiVersion'))")

# --- registries -----------------------------------------------------------------
auth=$STATE/registry-auth
mkdir -p "$auth" && chmod 700 "$auth"
if [ ! -s "$auth/password" ] || [ ! -s "$auth/htpasswd" ]; then
  (umask 077; head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$auth/password")
  # -i: password from stdin, never on a command line; -B: bcrypt (required).
  htpasswd -B -i -c "$auth/htpasswd" halobox <"$auth/password" 2>/dev/null \
    || die "htpasswd failed writing $auth/htpasswd"
fi
# authfile for podman/skopeo/toolbox (--authfile / REGISTRY_AUTH_FILE)
(umask 077; printf '{"auths":{"127.0.0.1:5001":{"auth":"%s"}}}\n' \
  "$(printf 'halobox:%s' "$(cat "$auth/password")" | base64 -w0)" >"$auth/auth.json")

start_registry() { # PORT [auth]
  local port=$1 name=registry-$1
  mkdir -p "$STATE/$name-data"
  {
    printf 'version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\n' "$STATE/$name-data"
    printf 'http:\n  addr: 127.0.0.1:%s\n' "$port"
    [ "${2:-}" = auth ] && printf 'auth:\n  htpasswd:\n    realm: halobox-test\n    path: %s\n' "$auth/htpasswd"
  } >"$STATE/$name.yml"
  local want=200; [ "${2:-}" = auth ] && want=401
  if [ "$(http_code "http://127.0.0.1:$port/v2/")" != "$want" ]; then
    log "starting docker-registry on 127.0.0.1:$port${2:+ (htpasswd)}"
    spawn "$name" docker-registry serve "$STATE/$name.yml"
    wait_until "registry 127.0.0.1:$port" "$name" \
      sh -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$port/v2/)\" = $want ]"
  fi
  up+=("registry:$port${2:+(auth)}")
}
start_registry 5000
start_registry 5001 auth

# --- rootless podman for halotest ---------------------------------------------
rl_sock=$RL_RUN/podman/podman.sock
if id "$RL_USER" >/dev/null 2>&1; then
  mkdir -p "$RL_RUN/podman" && chown "$RL_USER:" "$RL_RUN" "$RL_RUN/podman" && chmod 700 "$RL_RUN"
  if ! sock_ping "$rl_sock" >/dev/null 2>&1; then
    log "starting rootless podman service for $RL_USER on $rl_sock"
    spawn podman-rootless runuser -u "$RL_USER" -- env -C "/home/$RL_USER" \
      XDG_RUNTIME_DIR="$RL_RUN" HOME="/home/$RL_USER" \
      podman system service --time=0 "unix://$rl_sock"
    ( TIMEOUT=30 wait_until "rootless podman ($rl_sock)" podman-rootless sock_ping "$rl_sock" ) \
      || echo "start.sh: warning: rootless podman did not come up; rootless tests will be skipped" >&2
  fi
  sock_ping "$rl_sock" >/dev/null 2>&1 && up+=("rootless($RL_USER)")
else
  echo "start.sh: warning: user $RL_USER missing (install.sh adds it): no rootless podman" >&2
fi

# --- test images ------------------------------------------------------------------
# localhost/halobox-test:N: static busybox, /etc/os-release, label
# org.opencontainers.image.created. The four small shims (sudo group,
# usermod, passwd, capsh) are what toolbox 0.0.99.3 needs to init and enter
# it; see docs/dev-engines.md.
rebuilt=0
build_busybox_image() { # VERSION CREATED
  local v=$1 created=$2 img=localhost/halobox-test:$1 r=$STATE/rootfs-test-$1
  # The label halobox.recipe (hash of this function) rebuilds on any change.
  local recipe; recipe=$(declare -f build_busybox_image | sha256sum | cut -c1-12)
  if [ "$(podman image inspect "$img" --format '{{index .Labels "org.opencontainers.image.created"}} {{index .Labels "halobox.recipe"}}' 2>/dev/null)" = "$created $recipe" ]; then
    return 0
  fi
  rebuilt=1
  log "building $img"
  rm -rf "$r"; mkdir -p "$r"/{bin,etc,tmp,root,proc,sys,dev,run,var/tmp,usr}
  cp /bin/busybox "$r/bin/busybox"
  /bin/busybox --list | while read -r a; do [ "$a" = busybox ] || ln -s busybox "$r/bin/$a"; done
  ln -s ../bin "$r/usr/bin"; ln -s ../bin "$r/usr/sbin"; ln -s bin "$r/sbin"
  chmod 1777 "$r/tmp" "$r/var/tmp"
  printf 'NAME="halobox-test"\nID=halobox-test\nVERSION_ID=%s\nPRETTY_NAME="halobox test image %s"\n' "$v" "$v" >"$r/etc/os-release"
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$r/etc/passwd"
  printf 'root:x:0:\nsudo:x:27:\nnogroup:x:65534:\n' >"$r/etc/group"
  rm -f "$r/bin/passwd"
  printf '#!/bin/sh\n# toolbox shim: busybox has no usermod / passwd --delete\nexit 0\n' >"$r/bin/usermod"
  cp "$r/bin/usermod" "$r/bin/passwd"
  printf '#!/bin/sh\n# toolbox shim: `capsh --caps="" -- ARGS` runs `sh ARGS`\nwhile [ "$#" -gt 0 ] && [ "$1" != "--" ]; do shift; done\n[ "$#" -gt 0 ] && shift\nexec /bin/sh "$@"\n' >"$r/bin/capsh"
  printf '#!/bin/sh\nexec /bin/sh "$@"\n' >"$r/bin/bash"
  chmod 755 "$r/bin/usermod" "$r/bin/passwd" "$r/bin/capsh" "$r/bin/bash"
  tar --numeric-owner --owner=0 --group=0 -C "$r" -c . | podman import -q \
    --change "LABEL org.opencontainers.image.created=$created" \
    --change "LABEL halobox.recipe=$recipe" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["/bin/sh"]' - "$img" >/dev/null || die "podman import of $img failed"
  rm -rf "$r"
}
build_busybox_image 1 2024-01-01T00:00:00Z
build_busybox_image 2 2024-06-01T00:00:00Z
[ "$(podman run --rm --network host localhost/halobox-test:2 sh -c '. /etc/os-release; echo $VERSION_ID')" = 2 ] \
  || die "localhost/halobox-test:2 does not run (podman run ... sh failed)"
up+=("images(halobox-test:1,2)")

push() { # SRC DEST [authfile]
  podman push -q --tls-verify=false ${3:+--authfile "$3"} "$1" "docker://$2" \
    || die "podman push $1 -> $2 failed (registry log: $STATE/registry-*.log)"
}
if [ "$rebuilt" = 1 ] || ! curl -sf http://127.0.0.1:5000/v2/halobox/test/tags/list | jq -e '.tags | index("1") and index("2") and index("latest")' >/dev/null 2>&1; then
  log "pushing halobox/test:1,2,latest to 127.0.0.1:5000"
  push localhost/halobox-test:1 127.0.0.1:5000/halobox/test:1
  push localhost/halobox-test:2 127.0.0.1:5000/halobox/test:2
  push localhost/halobox-test:2 127.0.0.1:5000/halobox/test:latest
fi
if [ "$rebuilt" = 1 ] || ! curl -sf -u "halobox:$(cat "$auth/password")" http://127.0.0.1:5001/v2/halobox/test/tags/list | jq -e '.tags | index("1")' >/dev/null 2>&1; then
  log "pushing halobox/test:1 to 127.0.0.1:5001 (auth)"
  push localhost/halobox-test:1 127.0.0.1:5001/halobox/test:1 "$auth/auth.json"
fi
up+=("pushed(5000:1,2,latest 5001:1)")

# Same images in dockerd and in the rootless store, pulled from the registry.
if [ "$rebuilt" = 1 ] || ! curl -sf --unix-socket "$DOCKER_SOCK" http://d/images/127.0.0.1:5000/halobox/test:1/json >/dev/null; then
  curl -sf --unix-socket "$DOCKER_SOCK" -X POST \
    'http://d/images/create?fromImage=127.0.0.1:5000/halobox/test&tag=1' >/dev/null \
    || die "dockerd could not pull 127.0.0.1:5000/halobox/test:1 (log: $STATE/dockerd.log)"
fi
if sock_ping "$rl_sock" >/dev/null 2>&1 && { [ "$rebuilt" = 1 ] || ! curl -sf --unix-socket "$rl_sock" http://d/images/127.0.0.1:5000/halobox/test:1/json >/dev/null; }; then
  curl -sf --unix-socket "$rl_sock" -X POST \
    'http://d/images/create?fromImage=127.0.0.1:5000/halobox/test&tag=1' >/dev/null \
    || echo "start.sh: warning: rootless podman could not pull the test image" >&2
fi

# localhost/halobox-distro:1: Debian bookworm minbase + what toolbox (capsh,
# sudo) and distrobox-init (bc curl wget diff less lsof pinentry time ...)
# check for, so neither tries to install anything. The rootfs tarball is
# cached in $CACHE; debootstrap takes ~45 s here, the import ~10 s.
if [ "${HALOBOX_ENGINES_NO_DISTRO:-0}" != 1 ]; then
  if ! podman image exists localhost/halobox-distro:1; then
    tarball=$CACHE/bookworm-minbase-halobox.tar
    if [ ! -s "$tarball" ]; then
      command -v debootstrap >/dev/null || die "debootstrap not found: run scripts/engines/install.sh"
      log "debootstrap bookworm minbase from $MIRROR (~1 min)"
      rm -rf "$STATE/rootfs-distro"
      debootstrap --variant=minbase \
        --include=libcap2-bin,sudo,bc,curl,wget,diffutils,less,lsof,pinentry-curses,time,procps \
        bookworm "$STATE/rootfs-distro" "$MIRROR" >"$STATE/debootstrap.log" 2>&1 \
        || die "debootstrap failed (log: $STATE/debootstrap.log); check $MIRROR is reachable or set HALOBOX_DEBIAN_MIRROR"
      tar --numeric-owner -C "$STATE/rootfs-distro" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
      rm -rf "$STATE/rootfs-distro"
    fi
    log "importing localhost/halobox-distro:1"
    podman import -q --change 'CMD ["/bin/bash"]' \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'LABEL org.opencontainers.image.created=2024-01-01T00:00:00Z' \
      "$tarball" localhost/halobox-distro:1 >/dev/null || die "podman import of $tarball failed"
  fi
  if ! curl -sf http://127.0.0.1:5000/v2/halobox/distro/tags/list | jq -e '.tags | index("1")' >/dev/null 2>&1; then
    log "pushing halobox/distro:1 to 127.0.0.1:5000"
    push localhost/halobox-distro:1 127.0.0.1:5000/halobox/distro:1
  fi
  up+=("images(halobox-distro:1 pushed)")
fi

echo "engines up in ${SECONDS}s: ${up[*]} (state: $STATE)"
