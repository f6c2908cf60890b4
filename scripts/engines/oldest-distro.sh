#!/usr/bin/env bash
# Makes localhost/halobox-oldest:SUITE, the oldest distribution image the
# tests can build without a registry: a Debian minbase rootfs from
# debootstrap, imported into rootful podman. The release test runs the
# release binary's `--version` in it. Idempotent; the rootfs tarball is cached
# in $HALOBOX_ENGINES_CACHE (default /var/cache/halobox-engines). Prints the
# image name.
#
# SUITE is $HALOBOX_OLDEST_SUITE, default bullseye (glibc 2.31): the oldest
# suite deb.debian.org still serves. buster (glibc 2.28, the release's floor)
# lives only on archive.debian.org; where that is reachable:
#   HALOBOX_OLDEST_SUITE=buster HALOBOX_DEBIAN_MIRROR=http://archive.debian.org/debian
set -euo pipefail
SUITE=${HALOBOX_OLDEST_SUITE:-bullseye}
MIRROR=${HALOBOX_DEBIAN_MIRROR:-http://deb.debian.org/debian}
CACHE=${HALOBOX_ENGINES_CACHE:-/var/cache/halobox-engines}
image=localhost/halobox-oldest:$SUITE

die() { printf 'oldest-distro.sh: error: %s\n' "$*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap, rootful podman): sudo $0"
for c in podman debootstrap; do
  command -v "$c" >/dev/null || die "$c not found: run scripts/engines/install.sh"
done
if ! podman image exists "$image"; then
  mkdir -p "$CACHE"
  tarball=$CACHE/$SUITE-minbase.tar
  if [ ! -s "$tarball" ]; then
    root=$(mktemp -d)
    trap 'rm -rf "$root"' EXIT
    echo "==> debootstrap $SUITE minbase from $MIRROR (~1 min)" >&2
    debootstrap --variant=minbase "$SUITE" "$root" "$MIRROR" >"$CACHE/$SUITE-debootstrap.log" 2>&1 ||
      die "debootstrap $SUITE failed (log: $CACHE/$SUITE-debootstrap.log): check $MIRROR serves $SUITE or set HALOBOX_DEBIAN_MIRROR"
    tar --numeric-owner -C "$root" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
  fi
  podman import -q --change 'CMD ["/bin/sh"]' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    "$tarball" "$image" >/dev/null || die "podman import of $tarball failed"
fi
echo "$image"
