#!/usr/bin/env bash
# The image the test nodes' containers run (scripts/netns/nodes.sh with
# HB_NODE_ENGINE): Debian bookworm (localhost/halobox-distro:1 from
# scripts/engines/start.sh) with python3, iperf3, perftest and procps from
# Debian (and, for vLLM's CPU build, libnuma1, g++, python3-dev and openssl: torch's
# inductor compiles CPU kernels even with --enforce-eager), plus the pinned Ray venv (scripts/ray-venv.sh) put in as one
# layer by `halobox image add-layer` at the same path, /opt/halobox-ray.
# Made once in the rootful podman store (localhost/halobox-node:ray-VERSION-baseN);
# with TAG and N it is also pushed to that node set's registry
# (10.77.N.254:5000, skipped when already there).
# Prints the reference to refresh from.
# Usage (as root): scripts/netns/node-image.sh [TAG N]
#   HALOBOX_BIN: the halobox binary (default: target/debug/halobox)
#   HALOBOX_TEST_RAY: the venv's ray (default /opt/halobox-ray/bin/ray)
set -euo pipefail
cd "$(dirname "$0")/../.."
halobox=${HALOBOX_BIN:-$PWD/target/debug/halobox}
ray=${HALOBOX_TEST_RAY:-/opt/halobox-ray/bin/ray}
venv=$(dirname "$(dirname "$ray")")
[ -x "$halobox" ] || { echo "error: $halobox is missing: cargo build, or set HALOBOX_BIN" >&2; exit 1; }
[ -x "$ray" ] || bash scripts/ray-venv.sh "$venv" >&2
[ "$venv" = /opt/halobox-ray ] || { echo "error: the venv must be /opt/halobox-ray (its scripts name that path)" >&2; exit 1; }
version=$("$venv/bin/python" -c 'import ray; print(ray.__version__)')
podman image exists localhost/halobox-distro:1 \
  || { echo "error: localhost/halobox-distro:1 is missing: bash scripts/engines/start.sh" >&2; exit 1; }

# Tests run in parallel and each may find the images missing on a fresh
# machine: one maker at a time (the others then find them made).
mkdir -p /run/lock
exec 9>/run/lock/halobox-node-image.lock
flock 9

base=localhost/halobox-node-base:4
if ! podman image exists "$base"; then
  echo "==> $base: python3 iperf3 perftest procps libnuma1 g++ python3-dev openssl from Debian" >&2
  podman rm -f hb-node-base-build >/dev/null 2>&1 || true
  podman run --name hb-node-base-build --network host localhost/halobox-distro:1 sh -c \
    'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 iperf3 perftest procps libnuma1 g++ python3-dev openssl >/dev/null && rm -rf /var/lib/apt/lists/*' >&2
  podman commit -q hb-node-base-build "$base" >/dev/null
  podman rm hb-node-base-build >/dev/null
fi

tag=ray-$version-base4
ref=localhost/halobox-node:$tag
if ! podman image exists "$ref"; then
  echo "==> $ref: $venv as one layer (halobox image add-layer)" >&2
  "$halobox" image add-layer "$base" --engine unix:///run/podman/podman.sock \
    --add "$venv:/opt/halobox-ray" --tag "$ref" \
    --label org.opencontainers.image.created=2026-01-01T00:00:00Z \
    --label "org.opencontainers.image.title=halobox test node (Ray $version)" --load >&2
fi
exec 9>&-
if [ $# -eq 0 ]; then
  echo "$ref"
  exit 0
fi
[ $# -eq 2 ] || { echo "usage: $0 [TAG N]" >&2; exit 2; }
registry=10.77.$2.254:5000
remote=$registry/halobox/node:$tag
if ! ip netns exec "hb-$1-sw" curl -sf -o /dev/null --max-time 5 \
  -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
  -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
  "http://$registry/v2/halobox/node/manifests/$tag"; then
  echo "==> pushing $ref to $registry" >&2
  ip netns exec "hb-$1-sw" skopeo copy -q --dest-tls-verify=false \
    "containers-storage:$ref" "docker://$remote" >&2
fi
echo "$remote"
