#!/usr/bin/env bash
# Stops what scripts/engines/start.sh started (by the pid files in its state
# dir; nothing else is touched). Containers, images and registry data stay;
# `HALOBOX_ENGINES_PURGE=1` also removes the state dir (registries' data,
# password, logs). Idempotent.
set -euo pipefail

STATE=${HALOBOX_ENGINES_DIR:-/tmp/halobox-engines}
[ "$(id -u)" -eq 0 ] || { echo "stop.sh: error: must run as root: sudo $0" >&2; exit 1; }
[ -d "$STATE" ] || { echo "stop.sh: nothing to stop ($STATE missing)"; exit 0; }

# alive PID: running and not a zombie waiting for PID 1 to reap it.
alive() { local st; st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1; [[ $st != Z* ]]; }
stopped=()
# Reverse start order: clients of the bus go before the bus.
for name in podman-rootless registry-5001 registry-5000 dockerd podman dbus; do
  pidf=$STATE/$name.pid
  [ -s "$pidf" ] || continue
  pid=$(cat "$pidf")
  if alive "$pid"; then
    kill -TERM "$pid"
    # dockerd stops its containerd and containers: allow it 30 s.
    for _ in $(seq 150); do alive "$pid" || break; sleep 0.2; done
    if alive "$pid"; then
      echo "stop.sh: warning: $name (pid $pid) ignored SIGTERM for 30s; sending SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
    stopped+=("$name")
  fi
  rm -f "$pidf"
done
# A bus we stopped leaves its pid file behind; dbus-daemon refuses to start then.
[[ " ${stopped[*]-} " == *" dbus "* ]] && rm -f /run/dbus/pid /run/dbus/system_bus_socket

if [ "${HALOBOX_ENGINES_PURGE:-0}" = 1 ]; then
  rm -rf "$STATE"
fi
echo "stopped: ${stopped[*]:-nothing}"
