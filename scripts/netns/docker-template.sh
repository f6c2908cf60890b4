#!/usr/bin/env bash
# A docker data root that holds the test nodes' image (scripts/netns/node-image.sh),
# pulled once from the node registry's storage (HB_NODE_REGISTRY_DATA of
# scripts/netns/nodes.sh), for docker test nodes to start from:
# `HB_NODE_DOCKER_TEMPLATE=DIR nodes.sh up …` hard-links its layers and image
# metadata (overlay2/ and image/, `cp -al`; never the databases dockerd and
# its containerd write in place) into each docker node's data root before
# its dockerd starts. A node's pull of
# the image then finds every layer there ("Already exists") instead of
# unpacking 1 GB again: measured on the 2-core CI machine, a fresh pull took
# 20.9 s and 19 CPU-seconds of dockerd alone, the linked data root 0.7 s of
# `cp -al` and a 0.06 s pull. Overlay layers are only read (a container writes
# to its own upper folder, a removed image is unlinked), so the nodes never
# change the template's files.
# Made once per node image id, in /var/cache/halobox-engines/docker-node-ID12;
# prints that folder.
# Usage (as root): scripts/netns/docker-template.sh
#   HALOBOX_BIN: the halobox binary node-image.sh packs (default: target/debug/halobox)
set -euo pipefail
cd "$(dirname "$0")/../.."
ref=$(bash scripts/netns/node-image.sh)
id=$(podman image inspect --format '{{.Id}}' "$ref")
dir=/var/cache/halobox-engines/docker-node-${id:0:12}
data=/var/cache/halobox-engines/node-registry
tag=${ref##*:}
mkdir -p /run/lock /var/cache/halobox-engines
exec 9>/run/lock/halobox-docker-template.lock
flock 9
if [ -f "$dir/.complete" ]; then
  echo "$dir"
  exit 0
fi
for old in /var/cache/halobox-engines/docker-node-*; do
  [ -e "$old" ] && [ "$old" != "$dir" ] && rm -rf "$old"
done
rm -rf "$dir" "$dir.work"
work=$dir.work
mkdir -p "$work/root"
port=5019
cleanup() {
  [ -s "$work/dockerd.pid" ] && kill "$(cat "$work/dockerd.pid")" 2>/dev/null
  [ -n "${registry_pid:-}" ] && kill "$registry_pid" 2>/dev/null
  return 0
}
trap cleanup EXIT
printf 'version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: 127.0.0.1:%s\n' \
  "$data" "$port" >"$work/registry.yml"
mkdir -p "$data"
docker-registry serve "$work/registry.yml" >"$work/registry.log" 2>&1 &
registry_pid=$!
for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$port/v2/" && break; sleep 0.1; done
curl -sf -o /dev/null "http://127.0.0.1:$port/v2/" \
  || { echo "error: the registry on 127.0.0.1:$port did not start: $(tail -n 5 "$work/registry.log")" >&2; exit 1; }
remote=127.0.0.1:$port/halobox/node:$tag
# The same check and copy as node-image.sh's push: the node sets then find
# this manifest there and push nothing.
if ! curl -sf -o /dev/null -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
  -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
  "http://127.0.0.1:$port/v2/halobox/node/manifests/$tag"; then
  skopeo copy -q --dest-tls-verify=false "containers-storage:$ref" "docker://$remote" >&2
fi
printf '{"data-root": "%s/root", "exec-root": "%s/exec", "pidfile": "%s/dockerd.pid", "hosts": ["unix://%s/docker.sock"], "iptables": false, "ip-masq": false, "bridge": "none", "storage-driver": "overlay2", "insecure-registries": ["127.0.0.1:%s"]}\n' \
  "$work" "$work" "$work" "$work" "$port" >"$work/daemon.json"
setsid dockerd --config-file "$work/daemon.json" >"$work/dockerd.log" 2>&1 </dev/null &
for _ in $(seq 150); do curl -sf -o /dev/null --unix-socket "$work/docker.sock" http://d/_ping && break; sleep 0.2; done
curl -sf -o /dev/null --unix-socket "$work/docker.sock" http://d/_ping \
  || { echo "error: the template's dockerd did not start: $(tail -n 20 "$work/dockerd.log")" >&2; exit 1; }
docker -H "unix://$work/docker.sock" pull -q "$remote" >&2 \
  || { tail -n 20 "$work/dockerd.log" >&2; exit 1; }
pid=$(cat "$work/dockerd.pid")
kill "$pid"
for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
! kill -0 "$pid" 2>/dev/null || { echo "error: the template's dockerd did not stop" >&2; exit 1; }
mv "$work/root" "$dir"
touch "$dir/.complete"
rm -rf "$work"
echo "$dir"
