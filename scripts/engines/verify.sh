#!/usr/bin/env bash
# Re-runs the checks recorded in docs/dev-engines.md against the engines that
# start.sh brought up, printing one line per fact. Leaves no containers behind
# (all are named hbv-*). Usage: scripts/engines/verify.sh [IMAGE]
set -euo pipefail
IMG=${1:-localhost/halobox-test:1}
P=/run/podman/podman.sock D=/var/run/docker.sock
STATE=${HALOBOX_ENGINES_DIR:-/tmp/halobox-engines}
cd /tmp   # toolbox refuses to run from a cwd it cannot see in the container

api() { local s=$1; shift; curl -s --unix-socket "$s" "$@"; }
rm_all() { for c in $(podman ps -a --format '{{.Names}}' | grep '^hbv-' || true); do podman rm -f -t 0 "$c" >/dev/null; done; }
trap rm_all EXIT
rm_all

echo "podman /version: $(api $P http://d/version | jq -c '{Version,ApiVersion,MinAPIVersion}')"
echo "podman /info:    $(api $P http://d/info | jq -c '{DefaultRuntime,Driver,CgroupDriver,CgroupVersion}')"
echo "docker /version: $(api $D http://d/version | jq -c '{Version,ApiVersion,MinAPIVersion}')"
echo "docker /info:    $(api $D http://d/info | jq -c '{DefaultRuntime,Driver,CgroupDriver,CgroupVersion}')"

# toolbox's own container
toolbox -y create --image "$IMG" hbv-tb >/dev/null 2>&1 || echo "toolbox create FAILED"
echo "toolbox CreateCommand: $(podman inspect hbv-tb --format '{{json .Config.CreateCommand}}')"
echo "toolbox run true: rc=$(toolbox run -c hbv-tb true >/dev/null 2>&1; echo $?), false: rc=$(toolbox run -c hbv-tb false >/dev/null 2>&1; echo $?), ulimit -l: $(toolbox run -c hbv-tb sh -c 'ulimit -l' 2>&1)"

# The toolbox shape over the API. $1 = memlock bytes.
tb_cmd='["toolbox","--log-level","debug","init-container","--gid","0","--home","/root","--shell","/bin/bash","--uid","0","--user","root","--monitor-host"]'
compat_json() {
  jq -n --arg img "$IMG" --argjson ml "$1" --argjson cmd "$tb_cmd" '{
  Image: $img, Hostname: "toolbox", User: "root:root",
  Env: ["TOOLBOX_PATH=/usr/bin/toolbox"],
  Labels: {"com.github.containers.toolbox": "true"},
  Cmd: $cmd,
  HostConfig: {Privileged: true, IpcMode: "host", NetworkMode: "host", PidMode: "host",
    UsernsMode: "host", SecurityOpt: ["label=disable"],
    Ulimits: [{Name: "memlock", Soft: $ml, Hard: $ml},
              {Name: "nofile", Soft: 1024, Hard: 1024}, {Name: "nproc", Soft: 1024, Hard: 1024}],
    Binds: ["/:/run/host:rslave", "/dev:/dev:rslave",
      "/run/dbus/system_bus_socket:/run/dbus/system_bus_socket", "/root:/root:rslave",
      "/usr/bin/toolbox:/usr/bin/toolbox:ro", "/run/toolbox:/run/toolbox",
      "/media:/media:rslave", "/mnt:/mnt:rslave", "/run/media:/run/media:rslave",
      "/etc/profile.d/toolbox.sh:/etc/profile.d/toolbox.sh:ro"]}}'
}
libpod_json() {
  jq -n --arg img "$IMG" --arg name "$2" --argjson ml "$1" --argjson cmd "$tb_cmd" '{
  name: $name, image: $img, hostname: "toolbox", user: "root:root",
  env: {TOOLBOX_PATH: "/usr/bin/toolbox"},
  labels: {"com.github.containers.toolbox": "true"},
  command: $cmd, privileged: true,
  ipcns: {nsmode: "host"}, netns: {nsmode: "host"}, pidns: {nsmode: "host"}, userns: {nsmode: "host"},
  use_image_hosts: true, use_image_resolve_conf: true, selinux_opts: ["disable"],
  r_limits: [{type: "memlock", soft: $ml, hard: $ml},
             {type: "nofile", soft: 1024, hard: 1024}, {type: "nproc", soft: 1024, hard: 1024}],
  mounts: [
    {destination: "/run/host", type: "bind", source: "/", options: ["rbind","rslave"]},
    {destination: "/dev", type: "bind", source: "/dev", options: ["rbind","rslave"]},
    {destination: "/dev/pts", type: "devpts", source: "devpts", options: []},
    {destination: "/run/dbus/system_bus_socket", type: "bind", source: "/run/dbus/system_bus_socket", options: ["rbind"]},
    {destination: "/root", type: "bind", source: "/root", options: ["rbind","rslave"]},
    {destination: "/usr/bin/toolbox", type: "bind", source: "/usr/bin/toolbox", options: ["rbind","ro"]},
    {destination: "/run/toolbox", type: "bind", source: "/run/toolbox", options: ["rbind"]},
    {destination: "/media", type: "bind", source: "/media", options: ["rbind","rslave"]},
    {destination: "/mnt", type: "bind", source: "/mnt", options: ["rbind","rslave"]},
    {destination: "/run/media", type: "bind", source: "/run/media", options: ["rbind","rslave"]},
    {destination: "/etc/profile.d/toolbox.sh", type: "bind", source: "/etc/profile.d/toolbox.sh", options: ["rbind","ro"]}]}'
}
tb_try() { # NAME
  local listed=no
  toolbox list -c 2>/dev/null | awk '{print $2}' | grep -qx "$1" && listed=yes
  local out; out=$(toolbox run -c "$1" sh -c 'ulimit -l' 2>&1 | tail -1) || true
  echo "  listed=$listed; toolbox run -> $out; container log: $(podman logs "$1" 2>&1 | grep '^Error' | tail -1)"
}
api $P -X POST -H 'Content-Type: application/json' -d "$(compat_json 4194304)" 'http://d/v1.41/containers/create?name=hbv-compat' >/dev/null
echo "compat /containers/create, toolbox shape, memlock 4 MiB:"; tb_try hbv-compat
api $P -X POST -H 'Content-Type: application/json' -d "$(libpod_json 4194304 hbv-libpod)" 'http://d/v4.0.0/libpod/containers/create' >/dev/null
echo "libpod /libpod/containers/create, same shape + use_image_hosts/resolv_conf, memlock 4 MiB:"; tb_try hbv-libpod

# memlock -1 and podman's replacement of default_ulimits
for ml in -1 8388608; do
  api $P -X POST -H 'Content-Type: application/json' \
    -d "{\"Image\":\"$IMG\",\"Cmd\":[\"true\"],\"HostConfig\":{\"Ulimits\":[{\"Name\":\"memlock\",\"Soft\":$ml,\"Hard\":$ml},{\"Name\":\"nofile\",\"Soft\":1024,\"Hard\":1024},{\"Name\":\"nproc\",\"Soft\":1024,\"Hard\":1024}]}}" \
    "http://d/v1.41/containers/create?name=hbv-ml$ml" >/dev/null
  echo "podman compat start, memlock $ml: $(api $P -w ' HTTP %{http_code}' -X POST "http://d/v1.41/containers/hbv-ml$ml/start")"
done
api $P -X POST -H 'Content-Type: application/json' \
  -d "{\"Image\":\"$IMG\",\"Cmd\":[\"true\"],\"HostConfig\":{\"Ulimits\":[{\"Name\":\"memlock\",\"Soft\":4194304,\"Hard\":4194304}]}}" \
  'http://d/v1.41/containers/create?name=hbv-mlonly' >/dev/null
echo "podman compat, only memlock given -> $(podman inspect hbv-mlonly --format '{{json .HostConfig.Ulimits}}'); start: $(api $P -w ' HTTP %{http_code}' -X POST http://d/v1.41/containers/hbv-mlonly/start)"

# keep-groups annotation with runc
api $P -X POST -H 'Content-Type: application/json' \
  -d "{\"image\":\"$IMG\",\"name\":\"hbv-kg\",\"command\":[\"sh\",\"-c\",\"grep Groups /proc/self/status\"],\"annotations\":{\"run.oci.keep_original_groups\":\"1\"}}" \
  'http://d/v4.0.0/libpod/containers/create' >/dev/null
echo "libpod annotation run.oci.keep_original_groups=1: stored=$(podman inspect hbv-kg --format '{{index .Config.Annotations "run.oci.keep_original_groups"}}'), start: $(podman start -a hbv-kg 2>&1 | tr -s '\t ' ' ')"
echo "podman CLI --group-add keep-groups, caller in groups 27,44: $(setpriv --groups 27,44 -- podman run --rm --name hbv-kg2 --group-add keep-groups "$IMG" sh -c 'grep Groups /proc/self/status' 2>&1 | tr -s '\t ' ' ')"

# registry with htpasswd via X-Registry-Auth (password never printed)
pw=$(cat "$STATE/registry-auth/password")
xra=$(printf '{"username":"halobox","password":"%s","serveraddress":"127.0.0.1:5001"}' "$pw" | base64 -w0 | tr '+/' '-_')
for s in $P $D; do
  noauth=$(api "$s" -w ' HTTP %{http_code}' -X POST 'http://d/v1.41/images/create?fromImage=127.0.0.1:5001/halobox/test&tag=1' | tail -c 300)
  withauth=$(api "$s" -H "X-Registry-Auth: $xra" -w ' HTTP %{http_code}' -X POST 'http://d/v1.41/images/create?fromImage=127.0.0.1:5001/halobox/test&tag=1' | tail -c 120)
  echo "pull 127.0.0.1:5001 via $s: without auth: ${noauth//$pw/<pw>} | with X-Registry-Auth: ${withauth//$pw/<pw>}"
done
