#!/usr/bin/env bash
# Two small images for `cluster refresh` on the test nodes
# (scripts/netns/nodes.sh with HB_NODE_ENGINE): Debian bookworm
# (localhost/halobox-distro:1 from scripts/engines/start.sh) plus one file,
# /etc/halobox-fleet, saying v1 or v2 (so the two have different digests),
# made once in the rootful podman store (localhost/halobox-fleet:v1, :v2)
# by `halobox image add-layer`, and pushed to the node set's registry
# (10.77.N.254:5000/halobox/fleet:v1, :v2). With `ray`, the two are made
# on the test node image with Ray (scripts/netns/node-image.sh) instead:
# localhost/halobox-fleet:ray-VERSION-v1, -v2. Prints the v1 then the v2
# reference, one a line.
# With `local` instead of TAG N, only the local images are made (nothing is
# pushed or printed): scripts/test.sh makes them before the tests start.
# Usage (as root): scripts/netns/fleet-image.sh TAG N [ray]
#                  scripts/netns/fleet-image.sh local [ray]
#   HALOBOX_BIN: the halobox binary (default: target/debug/halobox)
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "${1:-}" = local ]; then
  shift
  set -- local 0 "$@"
fi
case "$#:${3:-}" in 2:|3:ray) ;; *) echo "usage: $0 TAG N [ray] | $0 local [ray]" >&2; exit 2 ;; esac
halobox=${HALOBOX_BIN:-$PWD/target/debug/halobox}
[ -x "$halobox" ] || { echo "error: $halobox is missing: cargo build, or set HALOBOX_BIN" >&2; exit 1; }
podman image exists localhost/halobox-distro:1 \
  || { echo "error: localhost/halobox-distro:1 is missing: bash scripts/engines/start.sh" >&2; exit 1; }
base=localhost/halobox-distro:1 prefix=
if [ "${3:-}" = ray ]; then
  base=$(HALOBOX_BIN=$halobox bash scripts/netns/node-image.sh)
  prefix=${base##*:}-
fi
# Tests run in parallel: one maker of the local images at a time.
mkdir -p /run/lock
exec 9>/run/lock/halobox-fleet-image.lock
flock 9
registry=10.77.$2.254:5000
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for v in v1 v2; do
  ref=localhost/halobox-fleet:$prefix$v
  if ! podman image exists "$ref"; then
    echo "$v" >"$work/$v"
    "$halobox" image add-layer "$base" --engine unix:///run/podman/podman.sock \
      --add "$work/$v:/etc/halobox-fleet" --tag "$ref" \
      --label "org.opencontainers.image.created=2026-0${v#v}-01T00:00:00Z" --load >&2
  fi
  [ "$1" = local ] && continue
  ip netns exec "hb-$1-sw" skopeo copy -q --dest-tls-verify=false \
    "containers-storage:$ref" "docker://$registry/halobox/fleet:$prefix$v" >&2
  echo "$registry/halobox/fleet:$prefix$v"
done
