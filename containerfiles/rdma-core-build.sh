#!/bin/bash
# rdma-core for the image: the distribution's when it is at least MIN, else
# the upstream release TAG built and installed into OUT_DIR (copied over the
# distribution's packages in the runtime stage, as the public gfx1151 image
# does on Ubuntu). The E810's irdma needs a new enough libirdma provider:
# rdma-core 50 reports RDMA_WRITE_WITH_IMM receives as plain receives, which
# RCCL rejects as an "Unknown completion"; 62 was proven on two gfx1151 nodes.
#
# Usage: rdma-core-build.sh MIN TAG OUT_DIR     (Fedora: dnf)
# Environment: RDMA_CORE_REPO (https://github.com/linux-rdma/rdma-core).
set -euo pipefail
me=rdma-core-build
here=$(cd "$(dirname "$0")" && pwd)
[ $# -eq 3 ] || { echo "usage: $me MIN TAG OUT_DIR" >&2; exit 2; }
min=$1 tag=$2 out=$3
repo=${RDMA_CORE_REPO:-https://github.com/linux-rdma/rdma-core}
mkdir -p "$out"
dnf -y install --setopt=install_weak_deps=False libibverbs >/dev/null
if RDMA_CORE_VERSION_FILE=/nonexistent sh "$here/rdma-core-version.sh" "$min"; then
  echo "$me: the distribution's rdma-core is at least $min: using it"
  exit 0
fi
echo "$me: building rdma-core $tag from $repo"
dnf -y install --setopt=install_weak_deps=False git cmake ninja-build gcc make pkgconf-pkg-config \
  python3 libnl3-devel systemd-devel >/dev/null
git clone -q --branch "$tag" --depth 1 "$repo" /tmp/rdma-core
cmake -S /tmp/rdma-core -B /tmp/rdma-core/build -GNinja \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_LIBDIR=lib64 \
  -DCMAKE_INSTALL_SYSCONFDIR=/etc -DNO_MAN_PAGES=1 -DNO_PYVERBS=1
ninja -C /tmp/rdma-core/build
DESTDIR="$out" ninja -C /tmp/rdma-core/build install
mkdir -p "$out/opt/halobox"
echo "${tag#v}" >"$out/opt/halobox/rdma-core.version"
echo "$me: rdma-core ${tag#v} installed into $out"
